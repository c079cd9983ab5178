"""Who may take a task, and who gets it (PROTOCOL.md 4.6 eligibility and choice, 7 the sweep).

Eligible: the pinned instance; or any non-stopped, non-offline instance of the target agent, of a
member of the target group, or (untargeted) of an agent responsible for the resource; never an
instance of the creator's own agent unless named explicitly (naming the own agent counts; the
creating instance itself only via ``toInstance``). Among eligible instances: fewest active tasks,
then least recently offered, then id.
"""

from __future__ import annotations

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
    return [i for m in members for i in d.instances_of(m)]


def eligible(task: dict[str, Any], d: Directory, now_ms: int) -> list[dict[str, Any]]:
    """Live candidates (not stopped, not offline), in the order the hub offers to them."""
    live = [i for i in candidate_instances(task, d) if availability(i, now_ms) not in ("stopped", "offline")]
    return sorted(live, key=lambda i: (len(i.get("active") or ()), int(i.get("lastOfferedAt", 0)), i["id"]))


def is_eligible(task: dict[str, Any], d: Directory, instance_id: str, now_ms: int) -> bool:
    """Whether ``instance_id`` may pull-accept ``task`` (PROTOCOL.md 4.8 pending -> accepted)."""
    return any(i["id"] == instance_id for i in eligible(task, d, now_ms))


def choose(task: dict[str, Any], d: Directory, now_ms: int) -> dict[str, Any] | None:
    """The instance to offer ``task`` to, or None. Instances whose offer of this task expired
    are passed over while another eligible instance exists."""
    live = eligible(task, d, now_ms)
    declined = set(task.get("declined") or ())
    fresh = [i for i in live if i["id"] not in declined]
    return (fresh or live or [None])[0]
