"""Peers: find and describe the other agents of the network (PROTOCOL.md 5.5).

``success_rate`` and ``resume.observed`` come from counters the hub keeps per agent
(``STATS#<agent>`` in the network partition) as tasks are accepted and finish and consults are
answered or expire; :func:`observe_actions` builds the counter updates the other modules add to
their own transactions.
"""

from __future__ import annotations

from typing import Any

from relaynet import cursors
from relaynet.directory import Directory, load
from relaynet.errors import NotFound
from relaynet.identity import Principal
from relaynet.store import directory as dir_store

COUNTERS = ("tasks_total", "tasks_completed", "tasks_failed", "consults_answered", "consults_expired")


def observe_actions(net: str, agent: str, **increments: int) -> list[dict[str, Any]]:
    """Transaction actions adding ``increments`` (names from :data:`COUNTERS`) to ``agent``'s counters."""
    if not increments:
        return []
    unknown = set(increments) - set(COUNTERS)
    if unknown:
        raise ValueError(f"unknown counters {sorted(unknown)}")
    return [dir_store.add_to_stats_action(net, agent, increments)]


def observed(d: Directory, agent: str) -> dict[str, int]:
    """``{tasks_total, tasks_completed, tasks_failed, consults_answered, consults_expired}``."""
    stats = d.stats.get(agent, {})
    return {name: int(stats.get(name, 0)) for name in COUNTERS}


def success_rate(obs: dict[str, int]) -> float | None:
    """completed / (completed + failed), or None when none finished."""
    done = obs["tasks_completed"] + obs["tasks_failed"]
    return round(obs["tasks_completed"] / done, 4) if done else None


def capability_ids(d: Directory, agent: str) -> list[str]:
    """The union of operator-set, resume-claimed and instance-declared capability ids, sorted."""
    definition = d.agents[agent]
    ids = {c["id"] for c in definition.get("capabilities", [])}
    ids |= set((definition.get("resume") or {}).get("claimed_capabilities") or [])
    for inst in d.instances_of(agent):
        if inst.get("status") != "stopped":
            ids |= {c["id"] for c in inst.get("capabilities", [])}
    return sorted(ids)


def _cost(definition: dict[str, Any]) -> dict[str, Any] | None:
    return ((definition.get("passport") or {}).get("cost")) or None


def find(principal: Principal, query: str | None, capability: str | None, sort_by: str | None,
         limit: int, cursor: str | None = None) -> dict[str, Any]:
    """peers ``find``: ``{peers: [{name, summary, capabilities, success_rate, cost}], nextCursor}``,
    never the caller's agent. ``sort_by``: ``name`` (default) | ``cost`` (input_per_mtok ascending,
    missing last) | ``track_record`` (success_rate descending, null last), each then by name, a
    total order the cursor keeps its place in (PROTOCOL.md 2 "Lists"; a bad cursor is
    InvalidArgument)."""
    listing = cursors.Listing("peers.find", principal, query=query, capability=capability, sort_by=sort_by)
    after = listing.position(cursor)
    d = load(principal.network_id)
    peers = []
    for name, definition in d.agents.items():
        if name == principal.agent:
            continue
        summary = (definition.get("resume") or {}).get("summary") or definition.get("description", "")
        if query and query.lower() not in summary.lower():
            continue
        caps = capability_ids(d, name)
        if capability and capability not in caps:
            continue
        peers.append({"name": name, "summary": summary, "capabilities": caps,
                      "success_rate": success_rate(observed(d, name)), "cost": _cost(definition)})
    if sort_by == "cost":
        def order(p):
            cost = (p["cost"] or {}).get("input_per_mtok")
            return [int(cost is None), cost or 0, p["name"]]
    elif sort_by == "track_record":
        def order(p):
            return [int(p["success_rate"] is None), -(p["success_rate"] or 0), p["name"]]
    else:
        def order(p):
            return [p["name"]]
    peers.sort(key=order)
    page, last = cursors.page_sorted(peers, order, after, limit)
    return {"peers": page, "nextCursor": listing.next_cursor(last)}


def render_skill_md(name: str, definition: dict[str, Any]) -> str:
    """A SKILL.md-style page from the passport and resume, for definitions that have none."""
    passport, resume = definition.get("passport") or {}, definition.get("resume") or {}
    lines = [f"# {name}", "", resume.get("summary") or definition.get("description") or "No summary given.", ""]
    caps = definition.get("capabilities") or []
    if caps or resume.get("claimed_capabilities"):
        lines += ["## Capabilities", ""]
        lines += [f"- **{c['name']}** (`{c['id']}`): {c.get('description', '')}".rstrip(": ") for c in caps]
        lines += [f"- `{c}` (claimed)" for c in resume.get("claimed_capabilities") or [] if c not in {x["id"] for x in caps}]
        lines.append("")
    if resume.get("domains"):
        lines += ["## Domains", "", ", ".join(resume["domains"]), ""]
    if passport:
        lines += ["## Passport", ""]
        for key in ("owner", "provider", "model"):
            if passport.get(key):
                lines.append(f"- {key}: {passport[key]}")
        cost = passport.get("cost") or {}
        if cost:
            lines.append(f"- cost: {cost.get('input_per_mtok', '?')} in / {cost.get('output_per_mtok', '?')} out per million tokens")
        lines.append("")
    lines += ["## How to work with it", "", f"Consult it with `delegate(target='{name}', prompt=...)` or open a "
              f"channel with `channels(action='open', target='{name}', type='conversation')`."]
    return "\n".join(lines).rstrip() + "\n"


def describe(principal: Principal, name: str) -> dict[str, Any]:
    """peers ``describe``: ``{passport, resume (with observed), skill_md}``. Raises NotFound."""
    d = load(principal.network_id)
    definition = d.agents.get(name)
    if definition is None:
        raise NotFound(f"no agent named {name!r}", {"available": sorted(d.agents)})
    resume = {**(definition.get("resume") or {}), "observed": observed(d, name)}
    return {"passport": definition.get("passport") or {}, "resume": resume,
            "skill_md": definition.get("skill_md") or render_skill_md(name, definition)}
