"""The claims repository: the hot partition ``NET#<net>#CLAIMS`` (``HEAD`` with the fencing counter,
one ``CLAIM#<clm>`` item per live claim) and the ended partition beside it, where a released or
lapsed claim is moved (relaynet.claims explains why; docs/architecture.md "The table").

relaynet.claims decides overlap and renewal over the claim documents read here; this module
builds their items and the conditional writes (the HEAD counter condition, ``expiresAt = :seen``).
"""

from __future__ import annotations

from typing import Any

from relaynet.store import keys as k
from relaynet.store import table as t

TransactionCancelled = t.TransactionCancelled

KEEP_AFTER_END_S = 86_400  # ended claims stay readable a day (for release answers)


def read_partition(net: str) -> tuple[int, list[dict[str, Any]]]:
    """(HEAD's counter, the claim items of the hot partition, newest id first): one strongly
    consistent Query in *descending* order, so HEAD (``HEAD`` sorts after ``CLAIM#``) is read
    before the claims (Query is only read-committed against transactions)."""
    counter, claims = 0, []
    head_sk = k.claims_head(net)[1]
    for item in t.query(k.claims_pk(net), forward=False):
        if item["SK"] == head_sk:
            counter = int(item.get("counter", 0))
        else:
            claims.append(item)
    return counter, claims


def get_live(net: str, claim_id: str) -> dict[str, Any] | None:
    """The claim's item in the hot partition (strongly consistent), or None."""
    return t.get(*k.claim(net, claim_id))


def get_ended(net: str, claim_id: str) -> dict[str, Any] | None:
    """The claim's record in the ended partition (strongly consistent), or None."""
    return t.get(*k.ended_claim(net, claim_id))


def exists(net: str, claim_id: str) -> bool:
    """Whether a claim of that id is live or ended (at most two strongly consistent GetItems)."""
    return get_live(net, claim_id) is not None or get_ended(net, claim_id) is not None


def bump_action(net: str, counter: int) -> dict[str, Any]:
    """HEAD ``counter = counter + 1`` on condition that it is still ``counter`` (absent while 0)."""
    return t.tx_update(*k.claims_head(net), "SET #c = :next, #kind = :head",
                       "#c = :seen" if counter else "attribute_not_exists(#c)",
                       names={"#c": "counter", "#kind": "kind"}, next=counter + 1, head="head",
                       **({"seen": counter} if counter else {}))


def head_check(net: str, counter: int) -> dict[str, Any]:
    """A ConditionCheck that HEAD's ``counter`` is still ``counter`` (absent while 0): no claim was
    taken or renewed in the network since the read that saw it (every claim bumps it)."""
    return t.tx_check(*k.claims_head(net), "#c = :seen" if counter else "attribute_not_exists(#c)",
                      names={"#c": "counter"}, **({"seen": counter} if counter else {}))


def new_claim(net: str, claim: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the stored item, its Put on ``attribute_not_exists``) of a new claim document
    (``{id, scopeType, scope, resourceId, taskId, holder, expiresAt, fencingToken, createdAt}``),
    kept :data:`KEEP_AFTER_END_S` past its expiry by TTL."""
    pk, sk = k.claim(net, claim["id"])
    item = {"PK": pk, "SK": sk, "kind": "claim", **claim, "ttl": int(claim["expiresAt"]) // 1000 + KEEP_AFTER_END_S}
    return item, t.tx_put(item, "attribute_not_exists(PK)")


def renew_action(net: str, claim: dict[str, Any], expires_ms: int, task_id: str | None) -> dict[str, Any]:
    """The Update renewing a live claim read at its ``expiresAt`` (the TTL moved with it; ``taskId``
    set when given)."""
    return t.tx_update(
        *k.claim(net, claim["id"]), "SET expiresAt = :exp, #ttl = :ttl" + (", taskId = :tid" if task_id else ""),
        "expiresAt = :seen", names={"#ttl": "ttl"}, exp=expires_ms, ttl=expires_ms // 1000 + KEEP_AFTER_END_S,
        seen=int(claim["expiresAt"]), **({"tid": task_id} if task_id else {}))


def end_actions(net: str, claim: dict[str, Any], end_ms: int, reason: str) -> list[dict[str, Any]]:
    """The actions moving a live claim (as read) to the ended partition: Delete on
    ``expiresAt = :seen``, Put of the record (``endedAt``, ``endReason`` ``released`` |
    ``expired``, ``ttl`` a day after the end) on ``attribute_not_exists``."""
    pk, sk = k.ended_claim(net, claim["id"])
    ended = {**claim, "PK": pk, "SK": sk, "kind": "ended_claim", "endedAt": end_ms, "endReason": reason,
             "ttl": end_ms // 1000 + KEEP_AFTER_END_S}
    return [
        t.tx_delete(*k.claim(net, claim["id"]), "expiresAt = :seen", seen=int(claim["expiresAt"])),
        t.tx_put(ended, "attribute_not_exists(PK)"),
    ]


def commit(actions: list[dict[str, Any]]) -> None:
    """One TransactWriteItems; TransactionCancelled when HEAD or a claim moved since it was read."""
    t.transact(actions)
