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


def recent(net: str, limit: int, cursor: str | None = None) -> dict[str, Any]:
    """``{events: [...], nextCursor}``, newest first; ``cursor`` is the last id of the previous page."""
    upper = f"EVT#{cursor}" if cursor else "EVT#~"
    items = t.query(k.events_pk(net), sk_between=("EVT#", upper), forward=False, limit=limit + 1)
    items = [i for i in items if i["SK"] != upper][:limit + 1]
    page = items[:limit]
    events = [{key: v for key, v in i.items() if key not in ("PK", "SK", "ttl")} for i in page]
    return {"events": events, "nextCursor": page[-1]["id"] if len(items) > limit else None}
