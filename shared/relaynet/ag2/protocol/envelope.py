"""The envelope, the carrier of every message in a channel (AG2 1.2.1 ``ag2/network/envelope.py``).

Shape (JSON, every key always present): ``channel_id``, ``sender_id`` (strings),
``audience`` (list of agent ids, or null: the whole channel), ``event_type`` (one of the ``EV_*``
names, or any string), ``event_data`` (object), ``envelope_id`` (hub-stamped, ``""`` before),
``task_id``, ``causation_id``, ``trace_id`` (string or null), ``priority`` (``background`` |
``normal`` | ``urgent``), ``depth`` (int, 0), ``idempotency_key`` (string or null),
``created_at`` (ISO-Z, hub-stamped, ``""`` before), ``ttl_seconds`` (int seconds or null).
"""

from __future__ import annotations

from typing import Any, Literal

from relaynet.ag2.protocol.base import WireModel

__all__ = ("EV_CHANNEL_CLOSED", "EV_CHANNEL_EXPIRED", "EV_CHANNEL_INVITE", "EV_CHANNEL_INVITE_ACK",
           "EV_CHANNEL_INVITE_REJECT", "EV_CHANNEL_OPENED", "EV_CONTEXT_SET", "EV_EXPECTATION_VIOLATED", "EV_PACKET",
           "EV_TASK_CANCELLED", "EV_TASK_CANCEL_REQUEST", "EV_TEXT", "CHANNEL_PROTOCOL_EVENTS", "Envelope", "Priority")

Priority = Literal["background", "normal", "urgent"]

EV_TEXT = "ag2.msg.text"  #: ``event_data = {"text": str}``
#: one workflow round: ``{"routing": {"kind": "handoff"|"finish"|"text", "tool"?, "reason"?, "target"?},
#: "context_updates": {"set": {...}, "delete": [...]}, "body": str}``
EV_PACKET = "ag2.packet"
EV_CHANNEL_INVITE = "ag2.channel.invite"
EV_CHANNEL_INVITE_ACK = "ag2.channel.invite.ack"
EV_CHANNEL_INVITE_REJECT = "ag2.channel.invite.reject"
EV_CHANNEL_OPENED = "ag2.channel.opened"
EV_CHANNEL_CLOSED = "ag2.channel.closed"
EV_CHANNEL_EXPIRED = "ag2.channel.expired"
EV_EXPECTATION_VIOLATED = "ag2.expectation.violated"
EV_CONTEXT_SET = "ag2.context.set"  #: ``{"set": {...}, "delete": [...]}``
EV_TASK_CANCEL_REQUEST = "ag2.task.cancel_request"
EV_TASK_CANCELLED = "ag2.task.cancelled"

#: The channel's own events, which AG2's adapters let through without a turn
#: (``_CHANNEL_PROTOCOL_EVENTS`` of ``ag2/network/adapters/*.py``).
CHANNEL_PROTOCOL_EVENTS = frozenset({EV_CHANNEL_INVITE, EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT,
                                     EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})


class Envelope(WireModel):
    """One message of a channel (module docstring: its keys). ``from_dict`` raises pydantic's
    ``ValidationError`` for an unknown or missing key or a value of the wrong type."""

    channel_id: str
    sender_id: str
    audience: list[str] | None
    event_type: str
    event_data: dict[str, Any]

    envelope_id: str = ""
    task_id: str | None = None
    causation_id: str | None = None
    trace_id: str | None = None
    priority: Priority = "normal"
    depth: int = 0
    idempotency_key: str | None = None

    created_at: str = ""
    ttl_seconds: int | None = None
