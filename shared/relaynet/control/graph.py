"""control_get_graph (PROTOCOL.md 6, grant ``observe``): the network as nodes and edges, from the
directory, the task listing, the live claims and the event stream's recent messages."""

from __future__ import annotations

from collections import Counter
from typing import Any

from relaynet import claims, clock, events
from relaynet.control.grants import scope
from relaynet.directory import load
from relaynet.identity import Principal, availability
from relaynet.store import tasks as task_store

__all__ = ["graph"]


def graph(principal: Principal, network_id: str | None) -> dict[str, Any]:
    """control_get_graph: ``{nodes: [{id, kind, label}], edges: [{from, to, kind, label?}]}``.

    Nodes: agents, instances, groups, resources (and representatives that delegated or asked). Edges: ``serves`` (instance -> agent),
    ``member`` (agent -> group), ``responsible`` (agent -> resource), ``delegated`` (creator agent ->
    target, one per pair with a count), ``claims`` (instance -> resource or ``scope``), ``asked``
    (sender -> recipient, from the event stream's recent messages).
    """
    _, p = scope(principal, network_id, "observe")
    d = load(p.network_id)
    now = clock.now_ms()
    nodes = [{"id": f"agent:{n}", "kind": "agent", "label": n} for n in sorted(d.agents)]
    nodes += [{"id": f"instance:{i['id']}", "kind": "instance", "label": f"{i['agent']} {i['id'][-6:]}",
               "availability": availability(i, now)} for i in d.instances.values()]
    nodes += [{"id": f"group:{s}", "kind": "group", "label": s} for s in sorted(d.groups)]
    nodes += [{"id": f"resource:{r}", "kind": "resource", "label": r} for r in sorted(d.resources)]
    edges = [{"from": f"instance:{i['id']}", "to": f"agent:{i['agent']}", "kind": "serves"} for i in d.instances.values()]
    edges += [{"from": f"agent:{m}", "to": f"group:{s}", "kind": "member"}
              for s, g in sorted(d.groups.items()) for m in g.get("members", [])]
    edges += [{"from": f"agent:{n}", "to": f"resource:{r['resource']}", "kind": "responsible",
               "label": ",".join(r.get("actions", []))}
              for n, a in sorted(d.agents.items()) for r in a.get("responsibilities", []) if r.get("resource")]
    delegations: Counter = Counter()
    for task in task_store.all_of_network(p.network_id):
        creator = task.get("creator") or {}
        source = f"agent:{creator['agent']}" if creator.get("agent") else f"representative:{creator.get('representative')}"
        target = task["target"]
        dest = (f"agent:{target['agent']}" if "agent" in target else f"group:{target['group']}" if "group" in target
                else f"instance:{target['instanceId']}" if "instanceId" in target else f"resource:{target['resource']}")
        delegations[(source, dest)] += 1
    edges += [{"from": s, "to": dst, "kind": "delegated", "label": str(n)} for (s, dst), n in sorted(delegations.items())]
    for c in claims.active_for_network(p.network_id):
        edges.append({"from": f"instance:{c['holder']['instanceId']}",
                      "to": f"resource:{c['resourceId']}" if c.get("resourceId") else f"scope:{c['scope']}",
                      "kind": "claims", "label": c["scope"]})
    asks: Counter = Counter()
    for evt in events.recent(p.network_id, 100)["events"]:
        sender = evt.get("fromAgent") or ""
        if evt.get("kind") == "message" and sender and evt.get("toName"):
            source = f"representative:{sender[4:]}" if sender.startswith("rep:") else f"agent:{sender}"
            asks[(source, evt["toName"])] += 1
    edges += [{"from": s, "to": dst, "kind": "asked", "label": str(n)} for (s, dst), n in sorted(asks.items())]
    reps = sorted({end for e in edges for end in (e["from"], e["to"]) if end.startswith("representative:")})
    nodes += [{"id": r, "kind": "representative", "label": r.split(":", 1)[1]} for r in reps]
    return {"nodes": nodes, "edges": edges}
