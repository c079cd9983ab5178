"""The plugin surface's context tool (PROTOCOL.md 5.8): search | quote, through relaynet.context."""

from __future__ import annotations

from typing import Any

from relaynet import context
from relaynet.errors import InvalidArgument
from relaynet.identity import Principal
from relaynet.models import plugin as m


def context_tool(principal: Principal, req: m.ContextRequest) -> dict[str, Any]:
    """context ``search`` | ``quote``."""
    if req.action == "search":
        m.require(req, "query")
        return context.search(principal, req.query, req.scope or "channel", req.channel_id, req.limit, req.cursor)
    m.require(req, "speaker")
    if req.channel_id and req.thread_id:
        raise InvalidArgument.field("thread_id", "give channel_id or thread_id, not both")
    return context.quote(principal, req.speaker, req.recent_n, req.channel_id, req.thread_id)

