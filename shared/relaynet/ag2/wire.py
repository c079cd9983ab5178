"""The dispatch of AG2's wire: one inbound WebSocket message in, the frames to post out. It
knows frames and AG2's error codes, not the domain: the ops, the handshake and receipts are
given to it (:class:`Wire`), so the same dispatch serves every WebSocket route.

What each inbound frame gets (as AG2 1.2.1's ``Hub._dispatch_frame``; the frames and errors are
Relaynet's models of AG2's, relaynet.ag2.protocol):

=========================================  ===================================================
frame                                      answer
=========================================  ===================================================
undecodable, no/unknown ``kind``, an       nothing (the client's request times out after 30 s)
extra or missing key
a field of the wrong JSON type             ``ErrorFrame(code="protocol_error")``
``ping``                                   ``pong``
``hello``                                  ``welcome`` (then the replay), or an ``ErrorFrame``
                                           (``auth_failed``, ``not_found``, ``access_denied``)
``request``                                ``response`` with the op's result, or ``ok=false`` and
                                           the error's code; a deferred op answers later
``receipt``                                nothing (an ack moves the cursor)
``welcome``/``response``/``error``/        nothing (hub-to-client kinds)
``notify``/``pong``
=========================================  ===================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from aws_lambda_powertools import Logger

from relaynet.ag2 import frames as f
from relaynet.ag2.protocol.errors import ERROR_CODES, NetworkError, ProtocolError, error_code
from relaynet.ag2.protocol.frames import ResponseFrame

log = Logger(child=True)  # observability.logger's child ("<service>.relaynet.ag2.wire")

__all__ = ("ERROR_CODES", "Wire", "error_code")  # the codes are relaynet.ag2.protocol.errors'


@dataclass
class Wire:
    """The dispatch, over ``ops`` (``{op name: fn(session, params) -> result | deferred}``),
    ``hello(session, name, scheme, claim, since)`` and ``receipt(session, recipient, channel,
    envelope, status)``. ``deferred`` is the sentinel an op returns to answer later."""

    ops: dict[str, Callable[[Any, dict[str, Any]], Any]]
    hello: Callable[..., None]
    receipt: Callable[..., None]
    deferred: object

    def handle(self, session: Any, message: str | bytes) -> None:
        """Decode ``message`` and queue the frames it gets on ``session.outbox`` (which the
        caller posts, in order). Never raises for a client's mistake; a bug is logged and the
        request answered ``ok=false`` with code ``error``."""
        try:
            frame = f.decode(message)
        except f.Dropped as exc:
            log.warning("AG2 frame dropped: %s", exc)
            return
        bad = f.malformed_field(frame)
        if bad is not None:
            session.outbox.append((session.connection_id,
                                   f.ErrorFrame(code="protocol_error", message=f"malformed {frame.kind} frame: {bad}")))
            return
        if isinstance(frame, f.PingFrame):
            session.outbox.append((session.connection_id, f.PongFrame()))
        elif isinstance(frame, f.HelloFrame):
            self._hello(session, frame)
        elif isinstance(frame, f.RequestFrame):
            self._request(session, frame)
        elif isinstance(frame, f.ReceiptFrame):
            self.receipt(session, frame.recipient_id, frame.channel_id, frame.envelope_id, frame.status)

    def _hello(self, session: Any, frame: f.HelloFrame) -> None:
        try:
            self.hello(session, frame.name, frame.auth_scheme, frame.auth_claim, frame.since_envelope_id)
        except NetworkError as exc:
            session.outbox.append((session.connection_id, f.ErrorFrame(code=error_code(exc), message=str(exc))))

    def _request(self, session: Any, frame: f.RequestFrame) -> None:
        op = self.ops.get(frame.op)
        session.request_id = frame.request_id
        try:
            if op is None:
                raise ProtocolError(f"unknown control-plane op: {frame.op!r}")
            result = op(session, frame.params)
        except NetworkError as exc:
            answer = ResponseFrame(request_id=frame.request_id, ok=False, error_code=error_code(exc),
                                   error_message=str(exc))
        except (KeyError, TypeError, ValueError) as exc:  # params of the wrong shape: AG2 answers "error" too
            answer = ResponseFrame(request_id=frame.request_id, ok=False, error_code="error",
                                   error_message=f"bad params for {frame.op}: {exc!r}")
        except Exception:  # noqa: BLE001 - a bug: logged, answered without internals
            log.exception("AG2 op %s failed", frame.op)
            answer = ResponseFrame(request_id=frame.request_id, ok=False, error_code="error",
                                   error_message="internal error")
        else:
            if result is self.deferred:
                return
            answer = ResponseFrame(request_id=frame.request_id, ok=True, result=result)
        session.outbox.append((session.connection_id, answer))
