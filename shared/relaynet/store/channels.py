"""The channels repository: a channel's partition (``NET#<net>#CH#<ch>``: the head ``HEAD`` with the
sequence and the adapter's folded state, one ``ENV#<seq>`` item per envelope), the membership
items listing an agent's channels, the listing index (GSI2 ``NET#<net>#CHANNELS``) and the
timers index (GSI1 ``CHANNELS``, by next deadline).

relaynet.channels and the adapters decide what a send does; this module writes it. A head
crosses this boundary as the stored head document (the protocol's channel fields plus ``seq``,
``adapter_state``, ``expires_ms``).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from relaynet.store import keys as k
from relaynet.store import table as t


_ENV = "ENV#"
_HEAD_SK = "HEAD"


def _envelopes(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i["SK"].startswith(_ENV)]


# --------------------------------------------------------------------------- reads

def get_head(net: str, channel_id: str) -> dict[str, Any] | None:
    """The channel head (strongly consistent GetItem), or None."""
    return t.get(*k.channel_head(net, channel_id))


def get_envelope(net: str, channel_id: str, seq: int) -> dict[str, Any] | None:
    """The channel's envelope at ``seq`` (strongly consistent GetItem), or None."""
    return t.get(*k.envelope(net, channel_id, seq))


def head_and_newest(net: str, channel_id: str, envelopes: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the head or None, up to ``envelopes`` newest envelope items, newest first): one
    descending Query (``HEAD`` sorts after ``ENV#``)."""
    items = t.query(k.channel_pk(net, channel_id), forward=False, limit=envelopes + 1)
    if not items or items[0]["SK"] != k.channel_head(net, channel_id)[1]:
        return None, []
    return items[0], _envelopes(items[1:])


def head_and_envelopes(net: str, channel_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the head or None, every envelope item oldest first): one strongly consistent Query."""
    items = t.query(k.channel_pk(net, channel_id))
    head_sk = k.channel_head(net, channel_id)[1]
    return next((i for i in items if i["SK"] == head_sk), None), _envelopes(items)


def envelopes(net: str, channel_id: str) -> list[dict[str, Any]]:
    """Every envelope item of a channel, oldest first."""
    return t.query(k.channel_pk(net, channel_id), sk_prefix=_ENV)


def memberships(net: str, agent: str) -> list[dict[str, Any]]:
    """Every membership item of ``agent`` (``{channel_id, created_at}``), oldest channel first."""
    return t.query(k.memberships_pk(net, agent))


def walk_memberships(net: str, agent: str, before_id: str | None) -> Iterator[dict[str, Any]]:
    """``agent``'s membership items newest first, lazily (100 per Query), channel ids below ``before_id``."""
    return t.iterate(k.memberships_pk(net, agent), forward=False, page_size=100,
                     sk_lt=k.membership(net, agent, before_id)[1] if before_id else None)


def heads(net: str, channel_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{channel id: head}`` of those that exist (one BatchGetItem per 100)."""
    got = t.batch_get([k.channel_head(net, c) for c in channel_ids]) if channel_ids else {}
    return {c: got[k.channel_head(net, c)] for c in channel_ids if k.channel_head(net, c) in got}


def heads_of_network(net: str) -> list[dict[str, Any]]:
    """Every channel head of the network (one Query of the listing index, paged)."""
    return t.query(k.channels_index(net), index="GSI2")


def due(now_ms: int, batch: int) -> list[dict[str, Any]]:
    """Up to ``batch`` active channel heads whose next deadline is at or before ``now_ms`` (GSI1)."""
    return t.query(k.CHANNEL_TIMERS, index="GSI1", sk_between=("0", f"{now_ms:013d}~"), limit=batch)


# --------------------------------------------------------------------------- writes

def new_head(net: str, channel_id: str, fields: dict[str, Any], expires_ms: int,
             due_ms: int | None = None) -> dict[str, Any]:
    """The stored head of a new channel: ``fields`` plus its keys, its timer (GSI1, due at
    ``due_ms``, else at ``expires_ms``; epoch ms) and its place in the network's listing (GSI2)."""
    pk, sk = k.channel_head(net, channel_id)
    return {"PK": pk, "SK": sk, "kind": "channel", **fields,
            "GSI1PK": k.CHANNEL_TIMERS, "GSI1SK": k.timer_sk(expires_ms if due_ms is None else due_ms, net, channel_id),
            "GSI2PK": k.channels_index(net), "GSI2SK": channel_id}


def as_read(head: dict[str, Any]) -> dict[str, Any]:
    """A head as a read would return it (numbers as DynamoDB gives them back), without reading it."""
    return t.decode(t.encode(head))


def create_actions(head: dict[str, Any], members: list[str]) -> list[dict[str, Any]]:
    """The Put of a new head (``attribute_not_exists``) and one membership item per member."""
    net, ch_id = head["network_id"], head["channel_id"]
    return [t.tx_put(head, "attribute_not_exists(PK)"),
            *(t.tx_put({"PK": mpk, "SK": msk, "channel_id": ch_id, "created_at": head["created_at"]})
              for mpk, msk in (k.membership(net, n, ch_id) for n in members))]


def envelope_action(net: str, envelope: dict[str, Any]) -> dict[str, Any]:
    """The Put of an envelope item at its ``seq`` (``attribute_not_exists``: one envelope per seq)."""
    pk, sk = k.envelope(net, envelope["channel_id"], envelope["seq"])
    return t.tx_put({"PK": pk, "SK": sk, "kind": "envelope", **envelope}, "attribute_not_exists(PK)")


def head_update(channel: dict[str, Any], new_state: dict[str, Any], seq: int, *, due_ms: int | None = None,
                closed: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """The Update of a head read at ``channel["seq"]`` while active: ``seq`` and ``adapter_state``
    set; then either the next deadline ``due_ms`` in the timers index, or ``closed`` =
    ``(final state, closed_at, close_reason)``, which takes it out of the timers index."""
    sets = ["seq = :seq", "adapter_state = :st"]
    vals: dict[str, Any] = {"seq": seq, "st": new_state, "seen": int(channel["seq"]), "active": "active"}
    removes = []
    if closed is not None:
        sets += ["#s = :closed", "closed_at = :at", "close_reason = :why"]
        vals.update(closed=closed[0], at=closed[1], why=closed[2])
        removes = ["GSI1PK", "GSI1SK"]
    else:
        sets += ["GSI1SK = :due"]
        vals["due"] = k.timer_sk(int(due_ms), channel["network_id"], channel["channel_id"])
    expr = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
    return t.tx_update(*k.channel_head(channel["network_id"], channel["channel_id"]), expr,
                       "seq = :seen AND #s = :active", names={"#s": "state"}, **vals)

