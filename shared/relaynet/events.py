"""The network's event stream (PROTOCOL.md 6 ``control_get_history``): one event per thing the hub
did (a message sent, a task transition, a claim taken or released, a channel event), written in
the same transaction as the change itself (relaynet.store.events), read newest first. Events
expire after 30 days.
"""

from __future__ import annotations

from typing import Any

from relaynet import clock, ids
from relaynet.store import events as store
from relaynet.store.events import KEEP_DAYS

__all__ = ["KEEP_DAYS", "event_action", "recent"]


def event_action(net: str, kind: str, actor: dict[str, Any] | None, summary: str, **refs: Any) -> dict[str, Any]:
    """A Put for the change's transaction: ``{id, kind, actor, summary, at, ...refs}``.

    ``kind`` is e.g. ``message``, ``task``, ``claim``, ``channel``; ``refs`` name the objects
    (``taskId``, ``threadId``, ``claimId``, ``channelId``, ``state``...); None refs are left out.
    """
    now = clock.now_ms()
    event = {"id": ids.new_id("evt"), "kind": kind, "actor": actor, "summary": summary[:500], "at": clock.iso(now),
             **{key: v for key, v in refs.items() if v is not None}}
    return store.put_action(net, event, now)


def recent(net: str, limit: int, after: str | None = None) -> dict[str, Any]:
    """``{events: [...], after}``: at most ``limit`` events, newest first, older than the event id
    ``after`` when given; ``after`` in the result is the id to continue after (None at the end).
    Expired events (past their ``ttl``, not yet deleted by DynamoDB) are left out."""
    page: list[dict[str, Any]] = []
    last = None
    for event in store.newest_first(net, after, limit + 1, clock.now_ms() // 1000):
        if len(page) == limit:
            last = page[-1]["id"]
            break
        page.append(event)
    return {"events": page, "after": last}
