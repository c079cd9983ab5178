"""The frame codec of AG2's wire (relaynet.ag2.protocol.frames, Relaynet's models of AG2 1.2.1's
``ag2/network/transport/frames.py``), strict as AG2 is, and the message-size limits of API
Gateway's WebSocket APIs.

Decoding is AG2's ``decode_frame`` plus its hub's type checks (``Hub._malformed_field``), so a
frame AG2's hub would drop is dropped here too: not JSON, not an object, no or an unknown ``kind``,
an extra or a missing key (AG2 builds a dataclass from the keys), a field of the wrong JSON type.
A dropped frame gets no answer, exactly as with AG2's hub: the client's request times out (30 s).

Limits (docs/protocol.md 12): API Gateway refuses client frames over 32 KB (the local stack does
the same: the connection closes with 1009) and server messages over 128 KB
(:data:`MAX_SERVER_MESSAGE`); :func:`encode` refuses to produce one, and list answers are cut to
fit by :func:`fit_list`.
"""

from __future__ import annotations

import json
from typing import Any

from relaynet.ag2.protocol.frames import (
    ErrorFrame,
    Frame,
    HelloFrame,
    PingFrame,
    PongFrame,
    ReceiptFrame,
    RequestFrame,
    decode_frame,
    encode_frame,
)

MAX_CLIENT_FRAME = 32 * 1024  # API Gateway: WebSocket frame size
MAX_SERVER_MESSAGE = 128 * 1024  # API Gateway: message payload size (postToConnection)

__all__ = ("MAX_CLIENT_FRAME", "MAX_SERVER_MESSAGE", "Dropped", "decode", "encode", "fit_list", "malformed_field",
           "ErrorFrame", "HelloFrame", "PingFrame", "PongFrame", "ReceiptFrame", "RequestFrame")


class Dropped(ValueError):
    """A frame AG2's hub would drop without an answer; the message says why (for the log)."""


class TooLarge(ValueError):
    """An outbound message over :data:`MAX_SERVER_MESSAGE` bytes."""


def decode(text: str | bytes) -> Frame:
    """One WebSocket text message -> a frame (relaynet.ag2.protocol.frames). Raises :class:`Dropped`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise Dropped("not UTF-8") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise Dropped("not JSON") from None
    if not isinstance(data, dict):
        raise Dropped("not a JSON object")
    try:
        frame = decode_frame(data)
    except (TypeError, ValueError) as exc:  # unknown kind; extra or missing keys
        raise Dropped(str(exc)) from None
    return frame


def malformed_field(frame: Frame) -> str | None:
    """The first field of an inbound frame whose JSON type is wrong, or None (AG2's hub answers
    such a frame with an ``ErrorFrame(code="protocol_error")``)."""
    if isinstance(frame, HelloFrame):
        fields: tuple[tuple[str, object, bool], ...] = (
            ("name", frame.name, False), ("auth_scheme", frame.auth_scheme, False),
            ("since_envelope_id", frame.since_envelope_id, True))
    elif isinstance(frame, ReceiptFrame):
        fields = (("envelope_id", frame.envelope_id, False), ("status", frame.status, False),
                  ("recipient_id", frame.recipient_id, False), ("channel_id", frame.channel_id, False),
                  ("reason", frame.reason, False))
    elif isinstance(frame, RequestFrame):
        if not isinstance(frame.params, dict):
            return "params"
        fields = (("request_id", frame.request_id, False), ("op", frame.op, False))
    else:
        return None
    for name, value, optional in fields:
        if not (isinstance(value, str) or (optional and value is None)):
            return name
    return None


def encode(frame: Frame) -> bytes:
    """A frame -> the UTF-8 JSON text message, as AG2's ``encode_frame`` and ``json.dumps`` write
    it. Raises :class:`TooLarge` over 128 KB."""
    data = json.dumps(encode_frame(frame), separators=(",", ":"), default=str).encode("utf-8")
    if len(data) > MAX_SERVER_MESSAGE:
        raise TooLarge(f"{frame.kind} frame of {len(data)} bytes is over {MAX_SERVER_MESSAGE}")
    return data


def fit_list(items: list[Any], budget: int = MAX_SERVER_MESSAGE - 1024) -> list[Any]:
    """The longest prefix of ``items`` whose JSON fits ``budget`` bytes (room is left for the
    response frame around it). ``read_wal`` pages with it: a caller reads on with ``since``."""
    out: list[Any] = []
    used = 2
    for item in items:
        size = len(json.dumps(item, separators=(",", ":"), default=str).encode("utf-8")) + 1
        if used + size > budget:
            break
        out.append(item)
        used += size
    return out
