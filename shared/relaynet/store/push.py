"""The webhook repository (docs/protocol.md 10.3): an instance's own push config and push status
on its directory item, and the delivery items of its webhook events.

- ``NET#<net>`` / ``INST#<id>`` (the instance, relaynet.store.directory): ``push`` (the config
  ``{url, token, authentication?}`` the instance set itself) and its push status
  ``pushLastStatus``, ``pushLastAttemptAt``, ``pushLastDeliveredAt``, ``pushLastError``,
  ``pushFailures``.
- ``NET#<net>#PUSH#<inst>`` / ``DLV#<deliveryId>`` (keys.push_delivery): one item per (message,
  instance) delivery: ``{type: "pushDelivery", networkId, instanceId, event, attempts,
  firstAttemptAt, lastAttemptAt, state, ...}``. A ``retrying`` one (a lease, or a failed attempt
  waiting for its retry) is listed in GSI1 ``PUSHRETRY`` (keys.PUSH_RETRY) with ``GSI1SK``
  ``<due ms, 13 digits>#<net>#<inst>#<deliveryId>`` (keys.push_due_sk), so one Query finds those due.

relaynet.push decides when to attempt, retry and give up; this module only knows where things are.
"""

from __future__ import annotations

from typing import Any

from relaynet.store import keys as k
from relaynet.store import table as t


# --------------------------------------------------------------------------- configs and status

def set_instance_config(net: str, instance_id: str, config: dict[str, Any]) -> None:
    """Replace the instance's own push config (``push``): one UpdateItem on condition that the
    instance exists. The caller marks the network first (relaynet.store.directory
    .mark_push_configured). When the instance is gone nothing is written and nothing is raised."""
    t.update(*k.instance(net, instance_id), "SET push = :p", condition="attribute_exists(PK)", p=config)


def remove_instance_config(net: str, instance_id: str) -> bool:
    """Remove the instance's own push config: one conditional UpdateItem; False when it had none
    (or the instance is gone)."""
    return bool(t.update(*k.instance(net, instance_id), "REMOVE push", condition="attribute_exists(push)"))


def record_attempt(net: str, instance_id: str, status: int, error: str | None, now_ms: int,
                   final_failure: bool) -> None:
    """The instance's push status after one attempt at ``now_ms`` (one UpdateItem, on condition
    that the instance exists): ``pushLastStatus`` (the HTTP status, 0 for none) and
    ``pushLastAttemptAt``; a success (``error`` None) sets ``pushLastDeliveredAt`` and removes
    ``pushLastError``, a failure sets ``pushLastError`` (its first 300 characters);
    ``final_failure`` (the delivery is marked failed) adds one to ``pushFailures``
    (docs/protocol.md 10.3, the status control_list_agents shows)."""
    sets = ["pushLastStatus = :s", "pushLastAttemptAt = :now"]
    vals: dict[str, Any] = {"s": status, "now": now_ms}
    expr = ""
    if error is None:
        sets.append("pushLastDeliveredAt = :now")
        expr = " REMOVE pushLastError"
    else:
        sets.append("pushLastError = :e")
        vals["e"] = error[:300]
    if final_failure:
        expr += " ADD pushFailures :one"
        vals["one"] = 1
    t.update(*k.instance(net, instance_id), "SET " + ", ".join(sets) + expr, condition="attribute_exists(PK)",
             **vals)


# --------------------------------------------------------------------------- deliveries

def delivery(net: str, instance_id: str, event: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The delivery item of ``event`` (its ``deliveryId``) for ``instance_id``, with ``fields``
    (``attempts``, ``firstAttemptAt``, ``lastAttemptAt``, ``lastStatus``...); not written."""
    pk, sk = k.push_delivery(net, instance_id, event["deliveryId"])
    return {"PK": pk, "SK": sk, "type": "pushDelivery", "networkId": net, "instanceId": instance_id, "event": event,
            **fields}


def retrying(item: dict[str, Any], due_ms: int, ttl_s: int) -> dict[str, Any]:
    """``item`` (a :func:`delivery`) in state ``retrying``, due at ``due_ms`` (``nextAttemptAt``)
    and listed in GSI1 ``PUSHRETRY`` by that time, expiring at ``ttl_s``; not written."""
    return {**item, "state": "retrying", "nextAttemptAt": due_ms, "GSI1PK": k.PUSH_RETRY,
            "GSI1SK": k.push_due_sk(due_ms, item["networkId"], item["instanceId"], item["event"]["deliveryId"]),
            "ttl": ttl_s}


def put_new(item: dict[str, Any]) -> bool:
    """Put a delivery item unless one exists for that delivery (one conditional PutItem): False
    when it exists, i.e. another path took the delivery first."""
    return t.put(item, "attribute_not_exists(PK)")


def put(item: dict[str, Any]) -> None:
    """Put (replace) a delivery item: one PutItem."""
    t.put(item)


def due(now_ms: int, limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` delivery items due for a retry by ``now_ms`` (GSI1 ``PUSHRETRY``,
    oldest due first; leases due by then included): one Query (paged up to ``limit``)."""
    return t.query(k.PUSH_RETRY, index="GSI1", sk_between=("0", f"{now_ms:013d}~"), limit=limit)


def lease(item: dict[str, Any], until_ms: int) -> bool:
    """Take the due delivery ``item``, as read by :func:`due`, until ``until_ms``: its due key is
    moved there on condition that it is still the one read (one conditional UpdateItem). False
    when another run took it, or it was delivered meanwhile (a delivered marker has no due key)."""
    lease_sk = k.push_due_sk(until_ms, item["networkId"], item["instanceId"], item["event"]["deliveryId"])
    return bool(t.update(item["PK"], item["SK"], "SET GSI1SK = :lease", condition="GSI1SK = :seen",
                         lease=lease_sk, seen=item["GSI1SK"]))


def drop(item: dict[str, Any]) -> None:
    """Delete the delivery ``item`` (its instance is gone or stopped, or has no config any
    more): one DeleteItem, on condition that it exists."""
    t.delete_if(item["PK"], item["SK"], "attribute_exists(PK)")
