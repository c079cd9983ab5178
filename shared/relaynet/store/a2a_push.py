"""A2A push notification configs' repository (docs/protocol.md 13.6): where the hub keeps the
configs A2A clients set on Relaynet tasks and what each receiver was last sent.

- ``<task partition>`` / ``A2APUSH#<owner>#<configId>``: one item per config, in the task's own
  partition (``NET#<net>#TASK#<task>``), so one Query reads the task, its artifacts and its
  configs: ``{networkId, taskId, owner, configId, url, token, authentication?, createdAt, sent:
  {state, messageId, artifacts}, seq, leaseUntil?}``. ``sent`` is what the receiver has had (the
  Relaynet state and status message of the last status event, the artifact ids); ``seq`` counts
  its outcomes and ``leaseUntil`` marks a sender at work: the lease is a conditional set on the
  ``seq`` the sender read, so two paths never post one change twice.
- A config that failed is also listed in GSI1 ``A2APUSHRETRY`` (``GSI1SK`` ``<due ms>#<net>#
  <task>#<owner>#<config>``) with ``attempts``, ``firstFailureAt``, ``lastStatus``, ``lastError``.
- The task's item carries ``a2aPush: true`` once it has had a config: each transition's history
  entry then carries it too (relaynet.tasks), which is what the webhook notifier's stream filter
  selects, so tasks without configs never invoke it.

relaynet.a2a.push decides what these mean; this module only knows where they are.
"""

from __future__ import annotations

from typing import Any

from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.store import unit_of_work as uow

PREFIX = "A2APUSH#"
RETRY_PK = "A2APUSHRETRY"
#: Configs one owner may keep on one task (A2A sets no bound; a task is not a mailing list).
MAX_PER_OWNER = 10


def _sk(owner: str, config_id: str) -> str:
    return f"{PREFIX}{owner}#{config_id}"


def partition(net: str, task_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """(the task or None, its artifact items oldest first, its config items): one Query."""
    items = t.query(k.task_pk(net, task_id))
    task = next((i for i in items if i["SK"] == k.META), None)
    return (task, [i for i in items if i["SK"].startswith("ART#")],
            [i for i in items if i["SK"].startswith(PREFIX)])


def put(net: str, task_id: str, owner: str, config_id: str, fields: dict[str, Any], sent: dict[str, Any],
        now_iso: str) -> bool:
    """Create or replace the config (a replaced config keeps nothing of the old one: its receiver
    is sent the task as it is now), and mark the task ``a2aPush`` (bumping its version) in the same transaction.
    False (nothing written) when the task is gone."""
    pk = k.task_pk(net, task_id)
    return bool(uow.commit([
        t.tx_put({"PK": pk, "SK": _sk(owner, config_id), "type": "a2aPushConfig", "networkId": net, "taskId": task_id,
                  "owner": owner, "configId": config_id, "createdAt": now_iso, "sent": sent, "seq": 0, **fields}),
        # the version moves too: a transition that read the task before this fails its conditional
        # put and retries on the marked item, so the mark is never written over
        t.tx_update(pk, k.META, "SET a2aPush = :yes ADD version :one", "attribute_exists(PK)", yes=True, one=1),
    ]))


def delete(net: str, task_id: str, owner: str, config_id: str) -> bool:
    """Remove the config; False when there was none."""
    return t.delete_if(k.task_pk(net, task_id), _sk(owner, config_id), "attribute_exists(PK)")


def lease(item: dict[str, Any], now_ms: int, until_ms: int) -> bool:
    """Take the config, as ``item`` was read, for one send (until ``until_ms``): False while
    another sender holds it, when it changed since it was read (``seq``: another sender
    delivered meanwhile, so ``item.sent`` is stale), or when it was deleted."""
    return bool(t.update(item["PK"], item["SK"], "SET leaseUntil = :until",
                         condition="attribute_exists(PK) AND seq = :seq AND "
                                   "(attribute_not_exists(leaseUntil) OR leaseUntil < :now)",
                         until=until_ms, now=now_ms, seq=int(item.get("seq") or 0)))


def delivered(item: dict[str, Any], sent: dict[str, Any], status: int, now_ms: int) -> None:
    """The receiver has ``sent``: record it, release the lease, leave the retry list."""
    t.update(item["PK"], item["SK"], "SET sent = :sent, lastStatus = :s, lastDeliveredAt = :now ADD seq :one "
             "REMOVE leaseUntil, GSI1PK, GSI1SK, attempts, firstFailureAt, lastError",
             condition="attribute_exists(PK)", sent=sent, s=status, now=now_ms, one=1)


def failed(item: dict[str, Any], status: int, error: str, attempts: int, first_ms: int, due_ms: int | None) -> None:
    """A send failed: record why, release the lease, and list the config as due at ``due_ms``
    (None: the retry window is over; it waits for the task's next change)."""
    sets = ["lastStatus = :s", "lastError = :e", "attempts = :a", "firstFailureAt = :f"]
    removes = ["leaseUntil"]
    vals: dict[str, Any] = {"s": status, "e": error[:300], "a": attempts, "f": first_ms, "one": 1}
    if due_ms is None:
        removes += ["GSI1PK", "GSI1SK"]
    else:
        sets += ["GSI1PK = :gpk", "GSI1SK = :gsk"]
        vals.update(gpk=RETRY_PK, gsk=f"{due_ms:013d}#{item['networkId']}#{item['taskId']}#{item['owner']}#"
                                      f"{item['configId']}")
    t.update(item["PK"], item["SK"], f"SET {', '.join(sets)} ADD seq :one REMOVE {', '.join(removes)}",
             condition="attribute_exists(PK)", **vals)


def due(now_ms: int, limit: int) -> list[dict[str, Any]]:
    """Configs whose retry is due (GSI1 ``A2APUSHRETRY``, oldest due first)."""
    return t.query(RETRY_PK, index="GSI1", sk_between=("0", f"{now_ms:013d}~"), limit=limit)


def listed_for_retry(item: dict[str, Any]) -> bool:
    """Whether the config ``item``, as read, is listed in GSI1 ``A2APUSHRETRY`` (a failed send
    waiting for its retry: :func:`failed` with a due time; :func:`delivered` unlists it)."""
    return bool(item.get("GSI1PK"))
