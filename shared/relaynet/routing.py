"""Who may take a task, and who gets it (PROTOCOL.md 4.6 eligibility and choice, 7 the sweep).

Eligible: the pinned instance; or any instance of the target agent, of a member of the target
group, or (untargeted) of an agent responsible for the resource (a responsibility without a
resource makes its agent responsible for every resource); never an instance of the creator's own
agent unless named explicitly (naming the own agent counts; the creating instance itself only via
``toInstance``). Only live instances are eligible: not stopped, and seen within the presence
timeout (an ``offline`` instance gets no offers; once it calls again it gets them again). Among
eligible instances: fewest active tasks, then least recently offered, then id.

Eligibility depends only on a task's *probe* (its target and, where they matter, its creator's
agent and instance), so pending tasks nobody can take are parked by :func:`wait_key`: one check
per wait group tells the sweep whether any of them can move (relaynet.sweep).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from relaynet.directory import Directory
from relaynet.identity import availability


def _responsible(agent: dict[str, Any], resource: str | None) -> bool:
    return any(r.get("resource") is None or r.get("resource") == resource for r in agent.get("responsibilities", []))


def candidate_instances(task: dict[str, Any], d: Directory) -> list[dict[str, Any]]:
    """Every instance the target names, before liveness: see the module rules."""
    target = task["target"]
    creator = task.get("creator") or {}
    own_agent, own_instance = creator.get("agent"), creator.get("instanceId")
    if "instanceId" in target:
        inst = d.instances.get(target["instanceId"])
        return [inst] if inst else []
    if "agent" in target:
        return [i for i in d.instances_of(target["agent"]) if i["id"] != own_instance]
    if "group" in target:
        members = [m for m in d.groups.get(target["group"], {}).get("members", []) if m != own_agent]
    else:
        members = [name for name, a in d.agents.items() if name != own_agent and _responsible(a, target.get("resource"))]
    return [i for m in dict.fromkeys(members) for i in d.instances_of(m)]


def live(inst: dict[str, Any], now_ms: int) -> bool:
    """Not stopped and not offline (PROTOCOL.md 3 availability)."""
    return availability(inst, now_ms) not in ("stopped", "offline")


def _order(inst: dict[str, Any]) -> tuple[int, int, str]:
    return len(inst.get("active") or ()), int(inst.get("lastOfferedAt", 0)), inst["id"]


def eligible(task: dict[str, Any], d: Directory, now_ms: int) -> list[dict[str, Any]]:
    """Live candidates, in the order the hub offers to them."""
    return sorted((i for i in candidate_instances(task, d) if live(i, now_ms)), key=_order)


def any_eligible(task: dict[str, Any], d: Directory, now_ms: int) -> bool:
    """Whether anyone at all may take ``task`` now (no sorting)."""
    return any(live(i, now_ms) for i in candidate_instances(task, d))


def is_eligible(task: dict[str, Any], d: Directory, instance_id: str, now_ms: int) -> bool:
    """Whether ``instance_id`` may pull-accept ``task`` (PROTOCOL.md 4.8 pending -> accepted)."""
    return any(i["id"] == instance_id and live(i, now_ms) for i in candidate_instances(task, d))


def choose(task: dict[str, Any], d: Directory, now_ms: int) -> dict[str, Any] | None:
    """The instance to offer ``task`` to, or None when nobody is eligible.

    Instances whose offer of this task expired (``declined``) are passed over while another
    eligible instance exists; when every eligible instance has let it expire, the one that let
    it expire longest ago gets it again.
    """
    candidates = eligible(task, d, now_ms)
    if not candidates:
        return None
    declined = list(task.get("declined") or ())
    fresh = [i for i in candidates if i["id"] not in declined]
    if fresh:
        return fresh[0]
    return min(candidates, key=lambda i: (declined.index(i["id"]), _order(i)))


def probe(task: dict[str, Any]) -> dict[str, Any]:
    """What eligibility depends on: the target and, where it matters, the creator."""
    target = dict(task["target"])
    creator = task.get("creator") or {}
    if "instanceId" in target:
        return {"target": target}
    if "agent" in target:
        if target["agent"] != creator.get("agent"):
            return {"target": target}
        return {"target": target, "creator": {"agent": creator.get("agent"), "instanceId": creator.get("instanceId")}}
    return {"target": target, "creator": {"agent": creator.get("agent")}}


def wait_key(task: dict[str, Any]) -> str:
    """The wait group of ``task``: tasks with one key are eligible for exactly the same instances."""
    return hashlib.sha256(json.dumps(probe(task), sort_keys=True).encode()).hexdigest()[:32]
