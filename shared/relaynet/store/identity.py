"""The identity repository (relaynet.identity, relaynet.supervision): token items
(``TOKEN#<sha256>`` / ``TOKEN``), the registration of an instance (``NET#<net>`` / ``INST#<id>``)
with its token, and what an instance writes about itself on its item (presence, its supervisor's
reports). relaynet.identity mints tokens and decides who a caller is; this module only knows where
the items are and how they are written.
"""

from __future__ import annotations

from typing import Any

from relaynet.store import keys as k
from relaynet.store import table as t


def token(token_hash: str) -> dict[str, Any] | None:
    """The token item of ``token_hash`` (``kind``, ``networkId``, ``instanceId``, ``agent``,
    ``rep``, ``revoked``...), or None: one eventually consistent GetItem (the authorizer's read)."""
    return t.get(*k.token(token_hash), consistent=False)


def token_item(token_hash: str, context: dict[str, str], created_at: str) -> dict[str, Any]:
    """The item of a new token: its hash is the key, ``context`` (a principal's authorizer
    context, relaynet.identity.Principal.context) its fields, with ``createdAt``. Written by
    :func:`register_instance`, :func:`register_representative` or as a Put of another
    transaction (relaynet.store.directory.put_new_action)."""
    pk, sk = k.token(token_hash)
    return {"PK": pk, "SK": sk, **context, "createdAt": created_at}


def agent(net: str, name: str) -> dict[str, Any] | None:
    """The agent definition, or None (strongly consistent; relaynet.store.directory.agent is this
    one). Here so that relaynet.identity (on every function's import path, the authorizer's too)
    does not load the directory repository for it."""
    return t.get(*k.agent(net, name))


def register_instance(net: str, instance_id: str, agent: str, *, token_hash: str, now_ms: int, created_at: str,
                      token: dict[str, Any]) -> None:
    """Register instance ``instance_id`` of ``agent`` (``available``, no declared capabilities,
    ``lastSeenAt`` ``now_ms``, ``tokenHash``) and put its token item (:func:`token_item`), in one
    TransactWriteItems: both Puts on ``attribute_not_exists``, with a ConditionCheck that the
    agent's definition exists (PROTOCOL.md 3 instances). Raises TransactionCancelled (the agent
    was deleted meanwhile, or an id or token collided)."""
    pk, sk = k.instance(net, instance_id)
    t.transact([
        t.tx_put({"PK": pk, "SK": sk, "type": "instance", "id": instance_id, "agent": agent, "status": "available",
                  "capabilities": [], "createdAt": created_at, "lastSeenAt": now_ms, "tokenHash": token_hash},
                 "attribute_not_exists(PK)"),
        t.tx_put(token, "attribute_not_exists(PK)"),
        t.tx_check(*k.agent(net, agent), "attribute_exists(PK)"),
    ])


def touch(net: str, instance_id: str, now_ms: int, cutoff_ms: int) -> bool:
    """Set the instance's ``lastSeenAt`` to ``now_ms`` if the stored one is at most ``cutoff_ms``
    and the instance exists (one conditional UpdateItem; PROTOCOL.md 3, presence at most once a
    minute). False when the condition failed (another container wrote it, or no such instance)."""
    return bool(t.update(*k.instance(net, instance_id), "SET lastSeenAt = :now",
                         condition="attribute_exists(PK) AND lastSeenAt <= :cutoff", now=now_ms, cutoff=cutoff_ms))


def set_supervisor(net: str, instance_id: str, report: dict[str, Any], last_run: dict[str, Any] | None = None
                   ) -> dict[str, Any] | None | bool:
    """Store a supervisor's report on its instance item (docs/protocol.md 10.8): ``supervisor``,
    and ``supervisorLastRun`` when ``last_run`` is given; one UpdateItem conditional on the item
    existing. Without ``last_run`` it answers the item as updated (its ``supervisorLastRun`` is
    the last run known); with it, True. False when the instance item does not exist."""
    key = k.instance(net, instance_id)
    if last_run is None:
        return t.update(*key, "SET supervisor = :s", condition="attribute_exists(PK)", return_new=True, s=report)
    return t.update(*key, "SET supervisor = :s, supervisorLastRun = :l", condition="attribute_exists(PK)",
                    s=report, l=last_run)
