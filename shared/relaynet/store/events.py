"""The events repository: the network's event stream (``NET#<net>#EVENTS`` / ``EVT#<ulid>``), one
item per thing the hub did, put in the same transaction as the change, kept :data:`KEEP_DAYS`."""

from __future__ import annotations

from typing import Any, Iterator

from relaynet.store import keys as k
from relaynet.store import table as t

KEEP_DAYS = 30
_EVT = "EVT#"


def put_action(net: str, event: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The Put of ``event`` (``{id, kind, actor, summary, at, ...refs}``) for the change's own
    transaction, with its ``ttl`` :data:`KEEP_DAYS` from now."""
    pk, sk = k.event(net, event["id"])
    return t.tx_put({"PK": pk, "SK": sk, **event, "ttl": now_ms // 1000 + KEEP_DAYS * 86400})


def newest_first(net: str, before_id: str | None, page_size: int, now_s: int) -> Iterator[dict[str, Any]]:
    """The network's events newest first, lazily (``page_size`` per Query), those with ids below
    ``before_id`` when given; events past their ``ttl`` (not yet deleted by DynamoDB) left out.
    Yields the event documents (keys and ``ttl`` removed)."""
    walk = t.iterate(k.events_pk(net), sk_lt=k.event(net, before_id)[1] if before_id else _EVT + "~",
                     forward=False, page_size=page_size)
    for item in walk:
        if not item["SK"].startswith(_EVT) or int(item.get("ttl") or now_s + 1) <= now_s:
            continue
        yield {key: v for key, v in item.items() if key not in ("PK", "SK", "ttl")}


def network_of(item: dict[str, Any]) -> str | None:
    """The network whose event stream partition ``item`` (an item as written: a stream image
    decoded, a commit's item) is in (keys.events_network), or None for any other item."""
    return k.events_network(str(item.get("PK", "")))


def is_event(item: dict[str, Any]) -> bool:
    """Whether ``item`` sits at an event's sort key (``EVT#<ulid>``) of its partition."""
    return str(item.get("SK", "")).startswith(_EVT)


def oldest_after(net: str, after_id: str, page_size: int) -> Iterator[dict[str, Any]]:
    """The network's event items with ids above ``after_id``, oldest first, lazily
    (``page_size`` per strongly consistent Query, the next one only when iterated past the
    last), as stored (keys and ``ttl`` kept, those past their ``ttl`` too); stops at the first
    item that is not an event (:func:`is_event`)."""
    pk, after = k.event(net, after_id)
    for item in t.iterate(pk, sk_gt=after, page_size=page_size):
        if not is_event(item):
            return
        yield item
