"""The frames of AG2's wire and their codec (AG2 1.2.1 ``ag2/network/transport/frames.py``).

A frame is a JSON object whose ``kind`` names it; the other keys are the frame's fields:

==========  ================  ===========================================================
kind        direction         fields (default)
==========  ================  ===========================================================
hello       client -> hub     name, auth_scheme ("none"), auth_claim ({}), since_envelope_id (null)
welcome     hub -> client     endpoint_id, hub_time (ISO-Z)
ping, pong  both              (none)
request     client -> hub     request_id, op, params ({})
response    hub -> client     request_id, ok, result (null), error_code (""), error_message ("")
error       hub -> client     code, message, envelope_id (null)
notify      hub -> client     envelope (an Envelope), recipient_id ("")
receipt     client -> hub     envelope_id, status ("ack"|"nack"), recipient_id, channel_id, reason ("")
==========  ================  ===========================================================

:func:`decode_frame` is AG2's: an unknown ``kind`` raises ``ValueError``, an unknown or a missing
key ``TypeError`` (AG2 builds the dataclass with ``cls(**payload)``), and the values are taken as
sent, whatever their JSON type: AG2's hub checks the types of the fields it reads itself
(relaynet.ag2.frames.malformed_field). :func:`encode_frame` writes every field and ``kind``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from relaynet.ag2.protocol.base import WireModel
from relaynet.ag2.protocol.envelope import Envelope

__all__ = ("ErrorFrame", "Frame", "HelloFrame", "NotifyFrame", "PingFrame", "PongFrame", "ReceiptFrame",
           "RequestFrame", "ResponseFrame", "WelcomeFrame", "decode_frame", "encode_frame")


class Frame(WireModel):
    """A frame; ``kind`` is the class's (not a field, as AG2's is a ``ClassVar``)."""

    kind: ClassVar[str] = ""


class HelloFrame(Frame):
    """Open the connection as ``name``, authenticated by ``auth_scheme``/``auth_claim``; replay
    from ``since_envelope_id`` (None: no replay)."""

    kind: ClassVar[str] = "hello"
    name: str
    auth_scheme: str = "none"
    auth_claim: dict[str, Any] = Field(default_factory=dict)
    since_envelope_id: str | None = None


class WelcomeFrame(Frame):
    """The handshake accepted: the connection's id and the hub's clock."""

    kind: ClassVar[str] = "welcome"
    endpoint_id: str
    hub_time: str


class PingFrame(Frame):
    kind: ClassVar[str] = "ping"


class PongFrame(Frame):
    kind: ClassVar[str] = "pong"


class RequestFrame(Frame):
    """A control-plane op; ``request_id`` is echoed on its ``response``."""

    kind: ClassVar[str] = "request"
    request_id: str
    op: str
    params: dict[str, Any] = Field(default_factory=dict)


class ResponseFrame(Frame):
    """An op's answer: ``ok`` and its ``result`` (any JSON value), or ``ok=false`` with one of
    AG2's ``error_code``s (relaynet.ag2.protocol.errors) and a message."""

    kind: ClassVar[str] = "response"
    request_id: str
    ok: bool
    result: Any = None
    error_code: str = ""
    error_message: str = ""


class ErrorFrame(Frame):
    """A refusal outside a request (a failed ``hello``, a malformed frame)."""

    kind: ClassVar[str] = "error"
    code: str
    message: str
    envelope_id: str | None = None


class NotifyFrame(Frame):
    """An envelope delivered to ``recipient_id`` (one connection may host several agents)."""

    kind: ClassVar[str] = "notify"
    envelope: Envelope
    recipient_id: str = ""


class ReceiptFrame(Frame):
    """An ``ack`` (processed: the recipient's cursor moves) or ``nack`` of a notify."""

    kind: ClassVar[str] = "receipt"
    envelope_id: str
    status: str
    recipient_id: str = ""
    channel_id: str = ""
    reason: str = ""


FRAME_CLASSES: dict[str, type[Frame]] = {cls.kind: cls for cls in (
    HelloFrame, WelcomeFrame, PingFrame, PongFrame, RequestFrame, ResponseFrame, ErrorFrame, NotifyFrame,
    ReceiptFrame)}


def encode_frame(frame: Frame) -> dict[str, Any]:
    """The frame as a JSON-compatible dict: every field (the envelope's too), then ``kind``."""
    data = frame.model_dump()
    data["kind"] = frame.kind
    return data


def decode_frame(data: dict[str, Any]) -> Frame:
    """A frame from its JSON object, values as sent (module docstring). Raises ``ValueError``
    for an unknown ``kind``, ``TypeError`` for an unknown or missing key, and pydantic's
    ``ValidationError`` (a ``ValueError``) for a notify's malformed envelope."""
    payload = dict(data)
    kind = payload.pop("kind", None)
    cls = FRAME_CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown frame kind: {kind!r}")
    fields = cls.model_fields
    unknown = sorted(set(payload) - set(fields))
    if unknown:
        raise TypeError(f"{cls.__name__} got unexpected keyword argument(s) {unknown}")
    missing = sorted(name for name, info in fields.items() if info.is_required() and name not in payload)
    if missing:
        raise TypeError(f"{cls.__name__} missing required argument(s) {missing}")
    if isinstance(payload.get("envelope"), dict):
        payload["envelope"] = Envelope.from_dict(payload["envelope"])
    return cls.model_construct(**payload)  # values unchecked, as AG2's dataclasses take them
