"""The representative's own conversation with its owner (PROTOCOL.md 6): control_channel_send and
control_channel_history. No network and no grant: it belongs to the representative."""

from __future__ import annotations

from typing import Any

from relaynet import clock, cursors, ids
from relaynet.identity import Principal
from relaynet.store import mailboxes as mail_store

_FIELDS = ("id", "conversationId", "from", "body", "createdAt")


def channel_send(principal: Principal, body: str, conversation_id: str | None) -> dict[str, Any]:
    """control_channel_send: a message in the representative's conversation with its owner
    (``conversationId`` default ``default``). Returns ``{messageId, conversationId}``."""
    conv = conversation_id or "default"
    msg_id = ids.new_id("msg")
    mail_store.put_conversation_message(principal.rep, conv, {
        "id": msg_id, "conversationId": conv, "from": {"representative": principal.rep}, "body": body,
        "createdAt": clock.now_iso()})
    return {"messageId": msg_id, "conversationId": conv}


def channel_history(principal: Principal, conversation_id: str | None, limit: int,
                    cursor: str | None = None) -> dict[str, Any]:
    """control_channel_history: ``{messages, nextCursor}``: the newest ``limit`` messages of that
    conversation, oldest first within the page; ``nextCursor`` pages back to older ones
    (PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    conv = conversation_id or "default"
    listing = cursors.Listing("control_channel_history", principal, conversationId=conv)
    after = listing.position(cursor)
    walk = mail_store.walk_conversation(principal.rep, conv, after, limit + 1)
    page, last = cursors.page_scan(walk, lambda i: i["id"], lambda i: True, limit)
    return {"messages": [{f: i[f] for f in _FIELDS} for i in reversed(page)], "nextCursor": listing.next_cursor(last)}
