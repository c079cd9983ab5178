"""The network's directory: agents, groups, resources and instances (PROTOCOL.md 3, 4.1, 4.2, 4.12).

Everything a network declares lives in one partition (relaynet.store.directory), so one strongly consistent
Query reads the whole directory: :func:`load`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relaynet import clock, supervision
from relaynet.errors import NotFound
from relaynet.identity import Principal, availability, status
from relaynet.push_view import public_config, status_view
from relaynet.resources import normalise as normalise_resource
from relaynet.store import directory as dir_store

if TYPE_CHECKING:  # annotations only: the sweep and the authorizer load no pydantic models
    from relaynet.models.worker import DiscoverRequest, RegisterCapabilitiesRequest

_AVAILABILITY_RANK = {"available": 0, "working": 1, "offline": 2, "stopped": 3}


@dataclass
class Directory:
    """A snapshot of one network's directory. Maps are keyed by name, slug, key or id."""

    network_id: str
    meta: dict[str, Any] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)

    def instances_of(self, agent: str) -> list[dict[str, Any]]:
        """The instances serving ``agent``, oldest first."""
        return [i for i in self.instances.values() if i["agent"] == agent]

    def members(self, name: str) -> list[str]:
        """Agent names an address name reaches: the agent itself or a group's members."""
        if name in self.agents:
            return [name]
        if name in self.groups:
            return list(self.groups[name].get("members", []))
        raise NotFound(f"no agent or group named {name!r}", {"available": sorted([*self.agents, *self.groups])})


def load(network_id: str) -> Directory:
    """Read the whole directory of ``network_id`` in one Query (strongly consistent)."""
    d = Directory(network_id)
    for item in dir_store.partition(network_id):
        kind, rest = dir_store.kind_of(item)
        if kind == "META":
            d.meta = item
        elif kind == "AGENT":
            d.agents[rest] = item
        elif kind == "GROUP":
            d.groups[rest] = item
        elif kind == "RES":
            d.resources[rest] = item
        elif kind == "INST":
            d.instances[rest] = item
        elif kind == "STATS":
            d.stats[rest] = item
    return d


def agent_view(agent: dict[str, Any]) -> dict[str, Any]:
    """``{name, description, capabilities, groups, responsibilities}`` of a definition, plus
    ``push: {url, authentication?}`` when it has a push endpoint (never its token), and
    ``a2a: {url, authentication?}`` when it is a remote A2A agent (docs/protocol.md 13.4; never
    its credentials)."""
    out = {
        "name": agent["name"],
        "description": agent.get("description", ""),
        "capabilities": agent.get("capabilities", []),
        "groups": agent.get("groups", []),
        "responsibilities": agent.get("responsibilities", []),
    }
    if agent.get("push"):
        out["push"] = public_config(agent["push"])
    if agent.get("a2a"):
        out["a2a"] = public_config(agent["a2a"])
    return out


def instance_view(inst: dict[str, Any], now_ms: int, agent: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{id, status, availability, capabilities, createdAt, lastSeenAt}`` of an instance, plus
    ``push`` (relaynet.push_view.status_view: the endpoint in force for it and the last delivery's
    status and failures) when it has an endpoint (its own or its definition ``agent``'s) or has
    had a delivery, and ``supervisor`` (relaynet.supervision.view: its run state) when a
    supervisor has reported on it, and ``a2a: {ok, error?, at}`` (relaynet.a2a.bridge: whether
    the hub last read the remote's card) for an A2A member's instance."""
    out = {
        "id": inst["id"],
        "status": status(inst),
        "availability": availability(inst, now_ms),
        "capabilities": inst.get("capabilities", []),
        "createdAt": inst["createdAt"],
        "lastSeenAt": clock.iso(int(inst["lastSeenAt"])),
    }
    push = status_view(inst, agent)
    if push is not None:
        out["push"] = push
    supervised = supervision.view(inst.get("supervisor"), now_ms, inst.get("supervisorLastRun"))
    if supervised is not None:
        out["supervisor"] = supervised
    if inst.get("a2a"):
        out["a2a"] = dict(inst["a2a"])
    return out


def whoami(principal: Principal) -> dict[str, Any]:
    """network_whoami (PROTOCOL.md 4.1): instance, agent and network in one BatchGetItem."""
    net = principal.network_id
    inst, agent, meta = dir_store.own_view(net, principal.instance_id, principal.agent)
    if not inst or not agent or not meta:
        raise NotFound("this instance's definition no longer exists")
    return {
        "instance": instance_view(inst, clock.now_ms(), agent),
        "agent": agent_view(agent),
        "network": {"id": net, "name": meta["name"]},
    }


def _active_count(inst: dict[str, Any]) -> int:
    return len(inst.get("active") or ())


def discover(principal: Principal, req: DiscoverRequest, recent_tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """network_discover (PROTOCOL.md 4.2). ``recent_tasks`` are the newest task summaries.

    Raises InvalidArgument when ``resourceKey`` cannot be normalised.
    """
    resource_key = normalise_resource(req.resourceKey, "resourceKey") if req.resourceKey else None
    d = load(principal.network_id)
    now = clock.now_ms()
    agents = []
    for name in sorted(d.agents):
        agent = d.agents[name]
        caps = [{**c, "source": "definition"} for c in agent.get("capabilities", [])]
        insts = sorted(d.instances_of(name), key=lambda i: i["id"])
        for inst in insts:
            caps += [{**c, "source": "instance", "instanceId": inst["id"]} for c in inst.get("capabilities", [])]
        entry = {
            "name": name,
            "description": agent.get("description", ""),
            "groups": agent.get("groups", []),
            "capabilities": caps,
            "instances": [{"id": i["id"], "availability": availability(i, now), "lastSeenAt": clock.iso(int(i["lastSeenAt"]))}
                          for i in insts],
        }
        if agent.get("a2a"):  # a remote A2A agent (docs/protocol.md 13.4): its card, never its credentials
            entry["a2a"] = public_config(agent["a2a"])
        agents.append(entry)
    result: dict[str, Any] = {
        "agents": agents,
        "groups": [{"slug": s, "members": g.get("members", [])} for s, g in sorted(d.groups.items())],
        "resources": [
            {"key": key, "responsibilities": [
                {"agent": a["name"], "actions": r.get("actions", []), "priority": r.get("priority", 0)}
                for a in d.agents.values() for r in a.get("responsibilities", []) if r.get("resource") == key]}
            for key in sorted(d.resources)
        ],
        "recentTasks": recent_tasks,
    }
    if req.resourceKey is not None or req.action is not None:
        result["candidates"] = candidates(d, resource_key, req.action, now)
    return result


def candidates(d: Directory, resource_key: str | None, action: str | None, now: int) -> list[dict[str, Any]]:
    """Agents whose responsibilities match, best first (PROTOCOL.md 4.2 ordering).

    A responsibility without a resource matches any resource (``resourceMatch: "any"``).
    """
    out = []
    for name, agent in d.agents.items():
        best = None
        for resp in agent.get("responsibilities", []):
            res = resp.get("resource")
            if resource_key is not None and res is not None and res != resource_key:
                continue
            actions = resp.get("actions", [])
            if action is not None and action not in actions:
                continue
            entry = (int(resp.get("priority", 0)), "exact" if res is not None and resource_key is not None else "any", actions)
            if best is None or entry[0] > best[0]:
                best = entry
        if best is None:
            continue
        insts = sorted(
            (i for i in d.instances_of(name) if i.get("status") != "stopped"),
            key=lambda i: (_AVAILABILITY_RANK[availability(i, now)], _active_count(i), i["id"]),
        )
        top = insts[0] if insts else None
        out.append({
            "agent": name,
            "instanceId": top["id"] if top else None,
            "availability": availability(top, now) if top else "offline",
            "matchingActions": [a for a in best[2] if action is None or a == action],
            "resourceMatch": best[1],
            "priority": best[0],
            "activeTasks": sum(_active_count(i) for i in d.instances_of(name)),
        })
    out.sort(key=lambda c: (-c["priority"], _AVAILABILITY_RANK[c["availability"]], c["activeTasks"], c["agent"]))
    return out


def register_capabilities(principal: Principal, req: RegisterCapabilitiesRequest) -> dict[str, Any]:
    """network_register_capabilities (PROTOCOL.md 4.12): replace this instance's declaration."""
    caps = [c.model_dump(exclude_none=True) for c in req.capabilities]
    if not dir_store.set_capabilities(principal.network_id, principal.instance_id, caps):
        raise NotFound("this instance no longer exists")
    return {"registered": caps, "count": len(caps)}
