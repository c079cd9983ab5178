"""The operator's repository (relaynet.admin, PROTOCOL.md 9): what applying a network spec and
``relaynet admin launch`` read and write. Network names (``NETNAME#<name>`` / ``NETNAME``, the
network's id by its name), a network's item (``NET#<net>`` / ``META``) and its definitions
(``AGENT#<name>``, ``GROUP#<slug>``, ``RES#<key>`` in ``NET#<net>``), representatives
(``REP#<name>`` / ``META``) with their tokens. relaynet.admin decides what a spec means; this
module only knows where each item is and how it is written.
"""

from __future__ import annotations

from typing import Any, Iterable

from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.store.directory import PUSH_STATE

TransactionCancelled = t.TransactionCancelled


def existing_names(names: Iterable[str]) -> list[str]:
    """Which of the network names ``names`` exist (one strongly consistent BatchGetItem per 100;
    none for no names), in no particular order."""
    names = list(names)
    got = t.batch_get([k.network_name(n) for n in names]) if names else {}
    return [pk.split("#", 1)[1] for pk, _ in got]


def name_item(name: str) -> dict[str, Any] | None:
    """The name item of network ``name`` (``networkId``), strongly consistent, or None."""
    return t.get(*k.network_name(name))


def network(net: str) -> dict[str, Any] | None:
    """The network's item (``id``, ``name``, ``createdAt``, ``pushState``), strongly consistent, or None."""
    return t.get(*k.network(net))


def create_network(net: str, name: str, created_at: str) -> bool:
    """Create network ``net`` named ``name``: its name item and its item (``pushState`` ``"none"``:
    a new network has no push config, relaynet.store.directory.has_push_config), in one
    TransactWriteItems, both Puts on ``attribute_not_exists``. False when it was cancelled (the
    name was taken meanwhile, by another apply: read :func:`name_item`)."""
    pk, sk = k.network_name(name)
    try:
        t.transact([
            t.tx_put({"PK": pk, "SK": sk, "networkId": net}, "attribute_not_exists(PK)"),
            t.tx_put({"PK": k.net(net), "SK": k.META, "id": net, "name": name, "createdAt": created_at,
                      PUSH_STATE: "none"}, "attribute_not_exists(PK)"),
        ])
    except TransactionCancelled:
        return False
    return True


def put_agent(net: str, name: str, doc: dict[str, Any]) -> None:
    """Write agent ``name``'s definition (``doc``: the spec's agent, PROTOCOL.md 9), replacing any (a PutItem)."""
    pk, sk = k.agent(net, name)
    t.put({"PK": pk, "SK": sk, "type": "agent", **doc})


def put_group(net: str, slug: str, members: list[str]) -> None:
    """Write group ``slug`` with ``members`` (agent names), replacing any (a PutItem)."""
    pk, sk = k.group(net, slug)
    t.put({"PK": pk, "SK": sk, "type": "group", "slug": slug, "members": members})


def put_resource(net: str, key: str) -> None:
    """Write resource ``key`` (normalised, PROTOCOL.md 3), replacing any (a PutItem)."""
    pk, sk = k.resource(net, key)
    t.put({"PK": pk, "SK": sk, "type": "resource", "key": key})


def instances(net: str) -> list[dict[str, Any]]:
    """Every instance item of the network, any status (one strongly consistent Query, paged)."""
    return t.query(k.net(net), sk_prefix="INST#")


def set_grants(rep: str, grants: dict[str, str]) -> None:
    """Replace representative ``rep``'s ``grants`` (network id -> level) (an UpdateItem)."""
    t.update(*k.representative(rep), "SET grants = :g", g=grants)


def register_representative(rep: str, rep_id: str, grants: dict[str, str], created_at: str,
                            token: dict[str, Any]) -> None:
    """Create representative ``rep`` (``id``, ``grants``, ``createdAt``) and put its token item
    (relaynet.store.identity.token_item), in one TransactWriteItems, both Puts on
    ``attribute_not_exists``. Raises TransactionCancelled (created meanwhile by another apply)."""
    pk, sk = k.representative(rep)
    t.transact([
        t.tx_put({"PK": pk, "SK": sk, "id": rep_id, "name": rep, "grants": grants, "createdAt": created_at},
                 "attribute_not_exists(PK)"),
        t.tx_put(token, "attribute_not_exists(PK)"),
    ])
