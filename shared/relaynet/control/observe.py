"""The control tools that watch a network (PROTOCOL.md 6, grant ``observe``): network_status,
list_agents, find_agents, list_blocked, get_history."""

from __future__ import annotations

from collections import Counter
from typing import Any

from relaynet import channels, claims, clock, cursors, events, routing, tasks
from relaynet.control.grants import scope
from relaynet.directory import agent_view, candidates, instance_view, load
from relaynet.identity import Principal, availability
from relaynet.resources import normalise as normalise_resource
from relaynet.store import channels as channel_store
from relaynet.store import tasks as task_store
from relaynet.taskstate import STATES


def network_status(principal: Principal, network_id: str | None) -> dict[str, Any]:
    """control_network_status: counts of agents, instances by availability, tasks by state,
    active claims and open channels, and the live claims and open channels themselves.

    ``claims`` lists every active claim (``relaynet.claims.view``: claimId, scope, holder,
    expiresAt, ...; oldest first) and ``channels`` every open channel as ``{channel_id, type,
    participants (names, opener first), next_speaker (null: anyone may speak), intent,
    expires_at}``. Both come from the reads the counts already need (the claims partition and
    the channels index), so an operator console needs no extra call to show them (issue 15;
    docs/protocol.md 6).
    """
    _, p = scope(principal, network_id, "observe")
    d = load(p.network_id)
    now = clock.now_ms()
    by_avail = Counter(availability(i, now) for i in d.instances.values())
    by_state = Counter(task["state"] for task in task_store.all_of_network(p.network_id))
    heads = [ch for ch in channel_store.heads_of_network(p.network_id)
             if channels.effective_state(ch, now) == "active"]
    active_claims = claims.active_for_network(p.network_id)
    return {"networkId": p.network_id, "agents": len(d.agents),
            "instances": {a: by_avail.get(a, 0) for a in ("available", "working", "offline", "stopped")},
            "tasks": {s: by_state.get(s, 0) for s in STATES},
            "activeClaims": len(active_claims), "openChannels": len(heads),
            "claims": active_claims, "channels": [channels.open_view(ch) for ch in heads]}


def list_agents(principal: Principal, network_id: str | None, limit: int = 50,
                cursor: str | None = None) -> dict[str, Any]:
    """control_list_agents: ``{agents, nextCursor}``, definitions with their instances, by name
    (PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    _, p = scope(principal, network_id, "observe")
    listing = cursors.Listing("control_list_agents", p)
    after = listing.position(cursor)
    d = load(p.network_id)
    now = clock.now_ms()
    page, last = cursors.page_sorted(sorted(d.agents), lambda name: name, after, limit)
    return {"agents": [{**agent_view(d.agents[name]),
                        "instances": [instance_view(i, now, d.agents[name]) for i in d.instances_of(name)]}
                       for name in page], "nextCursor": listing.next_cursor(last)}


def find_agents(principal: Principal, network_id: str | None, resource_key: str | None,
                action: str | None) -> dict[str, Any]:
    """control_find_agents: ``{candidates}`` as network_discover ranks them."""
    _, p = scope(principal, network_id, "observe")
    key = normalise_resource(resource_key, "resourceKey") if resource_key else None
    return {"candidates": candidates(load(p.network_id), key, action, clock.now_ms())}


def list_blocked(principal: Principal, network_id: str | None) -> dict[str, Any]:
    """control_list_blocked: ``{tasks, instances}``: blocked tasks, pending tasks nobody is
    eligible for, offline instances holding tasks."""
    _, p = scope(principal, network_id, "observe")
    d = load(p.network_id)
    now = clock.now_ms()
    stuck = []
    for task in task_store.all_of_network(p.network_id):
        if task["state"] == "blocked":
            stuck.append({**tasks.summary(task), "why": "blocked",
                          "reason": next((h.get("reason") for h in reversed(task.get("history", []))
                                          if h["state"] == "blocked"), None)})
        elif task["state"] == "pending" and not routing.eligible(task, d, now):
            stuck.append({**tasks.summary(task), "why": "no_eligible_instance"})
    holding = [{"instanceId": i["id"], "agent": i["agent"], "lastSeenAt": clock.iso(int(i["lastSeenAt"])),
                "tasks": sorted(i.get("active") or [])}
               for i in d.instances.values() if availability(i, now) == "offline" and i.get("active")]
    return {"tasks": stuck, "instances": holding}


def history(principal: Principal, network_id: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
    """control_get_history: ``{events, nextCursor}``, newest first (PROTOCOL.md 2 "Lists"; a bad
    cursor is InvalidArgument)."""
    _, p = scope(principal, network_id, "observe")
    listing = cursors.Listing("control_get_history", p)
    page = events.recent(p.network_id, limit, listing.position(cursor))
    return {"events": page["events"], "nextCursor": listing.next_cursor(page["after"])}
