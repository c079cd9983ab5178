"""The A2A bridge's repository (issue 28 part 3, docs/protocol.md 13.4): where the hub keeps the
remote A2A agents that are members of a network and the remote tasks it follows for them.

- ``A2A#MEMBERS`` / ``<net>#<instance>``: one item per A2A member's instance, ``{networkId,
  agent, instanceId}``, so a bridge run finds every member in one Query. Written by
  ``relaynet admin apply`` (:func:`register`), never on a request's path.
- ``A2A#OUT#<net>#<instance>`` / ``<taskId>``: one *remote record* per Relaynet task the member
  took, ``{taskId, sent, remoteTaskId?, contextId?, state?, delayMs, nextPollAt, artifacts,
  lastError?, pushTokenHash?, leaseId?, leaseUntil?}``, deleted once the task is settled on both
  sides. A run works on a record only while it holds the record's *lease* (``leaseId``, until
  ``leaseUntil`` in epoch ms): the record's conditional put (:func:`take`) is the first one, a
  conditional update (:func:`lease`) every later one, and the holder's last put (:func:`save`)
  or delete (:func:`drop`) lets it go, so of overlapping bridge runs (the schedule's, an offer's,
  a push's) only one sends a task or mirrors its remote state at a time.
- ``A2A#PUSHED#<net>#<instance>`` / ``<taskId>``: the *push receipt* of a remote task, ``{a2aPushed:
  true, networkId, instanceId, taskId, at, ttl}``, put when the remote posts a notification the
  record's token proves (:func:`note_push`; a later one overwrites it) and consumed by the bridge
  run its stream record starts (:func:`consume_push`), so of the two deliveries of one receipt
  locally (at the write and by the stream) only one follows it. ``ttl`` is a day.

relaynet.a2a.bridge decides what these mean; this module only knows where they are.
"""

from __future__ import annotations

from typing import Any

from relaynet import clock, ids
from relaynet.store import keys as k
from relaynet.store import table as t

MEMBERS_PK = "A2A#MEMBERS"


def _out_pk(net: str, inst_id: str) -> str:
    return f"A2A#OUT#{net}#{inst_id}"


def members() -> list[dict[str, Any]]:
    """Every A2A member's registry item (one strongly consistent Query, paged)."""
    return t.query(MEMBERS_PK)


def register(net: str, agent: str, existing_instances: list[dict[str, Any]]) -> str | None:
    """Make ``agent`` of ``net`` an A2A member: its one instance (no token: the hub's bridge acts
    as it) and its registry item. ``existing_instances`` are the agent's instance items already
    stored; the first one is kept. Returns the new instance's id, or None when it had one."""
    now = clock.now_ms()
    if existing_instances:
        inst_id = sorted(existing_instances, key=lambda i: i["createdAt"])[0]["id"]
        t.update(*k.instance(net, inst_id), "SET bridge = :b", condition="attribute_exists(PK)", b="a2a")
        t.put({"PK": MEMBERS_PK, "SK": f"{net}#{inst_id}", "networkId": net, "agent": agent, "instanceId": inst_id})
        return None
    inst_id = ids.new_id("inst")
    pk, sk = k.instance(net, inst_id)
    t.transact([
        t.tx_put({"PK": pk, "SK": sk, "type": "instance", "id": inst_id, "agent": agent, "status": "available",
                  "bridge": "a2a", "capabilities": [], "createdAt": clock.iso(now), "lastSeenAt": now},
                 "attribute_not_exists(PK)"),
        t.tx_put({"PK": MEMBERS_PK, "SK": f"{net}#{inst_id}", "networkId": net, "agent": agent, "instanceId": inst_id}),
        t.tx_check(*k.agent(net, agent), "attribute_exists(PK)"),
    ])
    return inst_id


def unregister(net: str, inst_id: str) -> None:
    """The member is no longer an A2A agent (its definition lost ``a2a:``): drop its registry item."""
    t.delete_if(MEMBERS_PK, f"{net}#{inst_id}", "attribute_exists(SK)")


def remotes(net: str, inst_id: str) -> list[dict[str, Any]]:
    """The member's remote records, by task id (one Query, paged)."""
    return t.query(_out_pk(net, inst_id))


def take(net: str, inst_id: str, task_id: str, now_ms: int, lease_id: str, lease_ms: int,
         push_token_hash: str | None = None) -> dict[str, Any] | None:
    """The new remote record of ``task_id`` (``sent`` false, due at ``now_ms``, with
    ``pushTokenHash`` when given), its lease held as ``lease_id`` for ``lease_ms``; or None when
    another run already holds a record for it (a conditional put)."""
    rec = {"PK": _out_pk(net, inst_id), "SK": task_id, "taskId": task_id, "sent": False, "delayMs": 0,
           "nextPollAt": now_ms, "artifacts": [], "createdAt": clock.iso(now_ms),
           "leaseId": lease_id, "leaseUntil": now_ms + lease_ms}
    if push_token_hash:
        rec["pushTokenHash"] = push_token_hash
    return rec if t.put(rec, "attribute_not_exists(PK)") else None


def lease(rec: dict[str, Any], lease_id: str, now_ms: int, lease_ms: int) -> dict[str, Any] | None:
    """Take the lease of the remote record ``rec`` names (its ``PK``/``SK``) as ``lease_id`` for
    ``lease_ms`` from ``now_ms``: the record as stored now, lease included (a conditional update
    returning the new item, so a copy read before another run's save is never acted on), or None
    when the record is gone or another run's lease has not run out."""
    held = t.update(rec["PK"], rec["SK"], "SET leaseId = :id, leaseUntil = :until",
                    condition="attribute_exists(SK) AND (attribute_not_exists(leaseUntil) OR leaseUntil <= :now)",
                    return_new=True, id=lease_id, until=now_ms + lease_ms, now=now_ms)
    return held or None


def save(rec: dict[str, Any], *, release: bool = True) -> bool:
    """Store ``rec`` as it is now, if its ``leaseId`` still holds the record's lease; with
    ``release`` the stored record has no lease (another run may take it at once). False when the
    lease was lost (it ran out and another run took it): nothing is written."""
    item = {key: value for key, value in rec.items() if not release or key not in ("leaseId", "leaseUntil")}
    return t.put(item, "leaseId = :id", id=rec["leaseId"])


def drop(rec: dict[str, Any]) -> None:
    """Delete the remote record (its task is settled), if its ``leaseId`` still holds the lease."""
    t.delete_if(rec["PK"], rec["SK"], "leaseId = :id", id=rec["leaseId"])


def set_status(net: str, inst_id: str, status: dict[str, Any]) -> None:
    """The member instance's ``a2a`` status block (``{ok, error?, at}``), shown by
    relaynet.directory.instance_view."""
    t.update(*k.instance(net, inst_id), "SET a2a = :s", condition="attribute_exists(PK)", s=status)


PUSHED_PREFIX = "A2A#PUSHED#"
RECEIPT_TTL_S = 86_400


def remote(net: str, inst_id: str, task_id: str) -> dict[str, Any] | None:
    """The remote record of ``task_id``, or None (a strongly consistent GetItem)."""
    return t.get(_out_pk(net, inst_id), task_id)


def note_push(net: str, inst_id: str, task_id: str, now_ms: int) -> None:
    """Put the push receipt of ``task_id`` (module docstring): its stream record starts the bridge
    for this one remote task."""
    t.put({"PK": f"{PUSHED_PREFIX}{net}#{inst_id}", "SK": task_id, "a2aPushed": True, "networkId": net,
           "instanceId": inst_id, "taskId": task_id, "at": now_ms, "ttl": now_ms // 1000 + RECEIPT_TTL_S})


def receipt(net: str, inst_id: str, task_id: str) -> dict[str, Any] | None:
    """The push receipt of ``task_id`` not yet consumed, or None."""
    return t.get(f"{PUSHED_PREFIX}{net}#{inst_id}", task_id)


def consume_push(net: str, inst_id: str, task_id: str, at: int) -> bool:
    """Delete the receipt put at ``at``; False when it is gone (another delivery of the same
    receipt took it) or a later push replaced it (that push's own record will follow)."""
    return t.delete_if(f"{PUSHED_PREFIX}{net}#{inst_id}", task_id, "#at = :at", names={"#at": "at"}, at=at)
