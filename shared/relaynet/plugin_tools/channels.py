"""The plugin surface's channel tools (PROTOCOL.md 5.2, 5.3, 5.6): say, handoff and channels
(list | open | info | close): argument checks per action, then one call into relaynet.channels."""

from __future__ import annotations

from typing import Any

from relaynet import channels
from relaynet.adapters import Send
from relaynet.errors import InvalidArgument
from relaynet.identity import Principal
from relaynet.models import plugin as m


def say(principal: Principal, req: m.SayRequest) -> dict[str, Any]:
    """say: ``{envelope_id, seq, channel_state}``."""
    out = channels.send(principal, req.channel_id, Send(sender=principal.agent, tool="say"), req.content, req.audience)
    return {key: out[key] for key in ("envelope_id", "seq", "channel_state")}


def handoff(principal: Principal, req: m.HandoffRequest) -> dict[str, Any]:
    """handoff: ``{envelope_id, seq, next_speaker, channel_state}``; ``reason`` needs ``finish``."""
    if req.reason is not None and req.finish is None:
        raise InvalidArgument.field("reason", "only meaningful with finish")
    attempt = Send(sender=principal.agent, tool="handoff", target=req.target, finish=req.finish, reason=req.reason,
                   context=req.context or {}, routing_tool=req.tool)
    content = {key: value for key, value in {"text": req.content, "finish": req.finish, "target": req.target,
                                             "reason": req.reason, "context": req.context, "tool": req.tool}.items()
               if value is not None}
    out = channels.send(principal, req.channel_id, attempt, content, event_type="packet")
    return {key: out[key] for key in ("envelope_id", "seq", "next_speaker", "channel_state")}


def channels_tool(principal: Principal, req: m.ChannelsRequest) -> dict[str, Any]:
    """channels ``list`` | ``open`` | ``info`` | ``close``."""
    if req.action == "list":
        return channels.list_channels(principal, req.state or "active", req.limit, req.cursor)
    if req.action == "open":
        m.require(req, "type", "target")
        targets = [req.target] if isinstance(req.target, str) else list(req.target)
        return channels.open_channel(principal, req.type, targets, req.knobs, req.intent, req.ttl, req.message)
    m.require(req, "channel_id")
    if req.action == "info":
        return channels.info(principal, req.channel_id)
    return channels.close(principal, req.channel_id)

