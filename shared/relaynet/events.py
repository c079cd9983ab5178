"""The network's event stream (PROTOCOL.md 6 ``control_get_history``): one item per thing the hub
did (a message sent, a task transition, a claim taken or released, a channel event), written in
the same transaction as the change itself, read newest first. Events expire after 30 days.
"""

from __future__ import annotations

from typing import Any

from relaynet import clock, ids
from relaynet.store import keys as k
from relaynet.store import table as t

KEEP_DAYS = 30


def event_action(net: str, kind: str, actor: dict[str, Any] | None, summary: str, **refs: Any) -> dict[str, Any]:
    """A Put for :func:`relaynet.store.table.transact`: ``{id, kind, actor, summary, at, ...refs}``.

    ``kind`` is e.g. ``message``, ``task``, ``claim``, ``channel``; ``refs`` name the objects
    (``taskId``, ``threadId``, ``claimId``, ``channelId``, ``state``...).
    """
    evt_id = ids.new_id("evt")
    now = clock.now_ms()
    pk, sk = k.event(net, evt_id)
    return t.tx_put({"PK": pk, "SK": sk, "id": evt_id, "kind": kind, "actor": actor, "summary": summary[:500],
                     "at": clock.iso(now), **{key: v for key, v in refs.items() if v is not None},
                     "ttl": now // 1000 + KEEP_DAYS * 86400})


def recent(net: str, limit: int, after: str | None = None) -> dict[str, Any]:
    """``{events: [...], after}``: at most ``limit`` events, newest first, older than the event id
    ``after`` when given; ``after`` in the result is the id to continue after (None at the end).
    Expired events (past their ``ttl``, not yet deleted by DynamoDB) are left out."""
    now_s = clock.now_ms() // 1000
    walk = t.iterate(k.events_pk(net), sk_lt=k.event(net, after)[1] if after else "EVT#~", forward=False,
                     page_size=limit + 1)
    page, last = [], None
    for item in walk:
        if not item["SK"].startswith("EVT#") or int(item.get("ttl") or now_s + 1) <= now_s:
            continue
        if len(page) == limit:
            last = page[-1]["id"]
            break
        page.append({key: v for key, v in item.items() if key not in ("PK", "SK", "ttl")})
    return {"events": page, "after": last}
