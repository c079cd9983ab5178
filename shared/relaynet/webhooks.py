"""Receiving Relaynet's webhook events (docs/protocol.md 10.3): check the signature, then act.

The hub POSTs a small JSON event (``{event, networkId, instanceId, messageId, taskId?, kind,
createdAt, deliveryId}``, never a message body) with two headers:

- ``X-Relaynet-Timestamp``: the Unix time of sending, in whole seconds;
- ``X-Relaynet-Signature``: ``v1=<hex HMAC-SHA256 of "<timestamp>.<raw body>" keyed with the
  push config's token>``.

:func:`verify` recomputes the signature over the raw body bytes as received and refuses a
timestamp more than :data:`REPLAY_WINDOW_SECONDS` (5 minutes) away from now, so a captured
request cannot be replayed later. It imports only the standard library::

    from relaynet import webhooks

    def handle(request):                      # any web framework
        try:
            event = webhooks.verify(request.headers, request.body, secret=MY_PUSH_TOKEN)
        except webhooks.InvalidSignature:
            return 401
        if event["event"] == "task_offer": ...  # then call network_inbox
        return 204
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Mapping

__all__ = ["InvalidSignature", "REPLAY_WINDOW_SECONDS", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "sign", "verify"]

SIGNATURE_HEADER = "X-Relaynet-Signature"
TIMESTAMP_HEADER = "X-Relaynet-Timestamp"
REPLAY_WINDOW_SECONDS = 300
_SCHEME = "v1"


class InvalidSignature(ValueError):
    """The request is not a genuine, fresh Relaynet event: a header is missing or malformed, the
    signature does not match the body and secret, or the timestamp is outside the replay window."""


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


def sign(secret: str | bytes, timestamp: int, body: str | bytes) -> str:
    """The ``X-Relaynet-Signature`` value for ``body`` sent at ``timestamp`` (Unix seconds)."""
    mac = hmac.new(_bytes(secret), f"{int(timestamp)}.".encode("ascii") + _bytes(body), hashlib.sha256)
    return f"{_SCHEME}={mac.hexdigest()}"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def verify(headers: Mapping[str, str], body: str | bytes, secret: str | bytes, *,
           now: float | None = None, tolerance: int = REPLAY_WINDOW_SECONDS) -> dict[str, Any]:
    """The event of a genuine request, or :class:`InvalidSignature`.

    ``headers`` is the request's header mapping (any case), ``body`` the raw body exactly as
    received (bytes or str; parse it only after this check), ``secret`` the push config's
    ``token``. ``now`` (Unix seconds, default the clock) and ``tolerance`` (seconds, default 300)
    bound the replay window. Comparison is constant-time.
    """
    stamp, given = _header(headers, TIMESTAMP_HEADER), _header(headers, SIGNATURE_HEADER)
    if not stamp or not given:
        raise InvalidSignature(f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}")
    try:
        timestamp = int(stamp.strip())
    except ValueError:
        raise InvalidSignature(f"{TIMESTAMP_HEADER} is not an integer") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise InvalidSignature(f"{TIMESTAMP_HEADER} is outside the {tolerance} s replay window")
    expected = sign(secret, timestamp, body)
    candidates = [part.strip() for part in given.split(",") if part.strip().startswith(f"{_SCHEME}=")]
    if not any(hmac.compare_digest(expected, candidate) for candidate in candidates):
        raise InvalidSignature("the signature does not match the body and secret")
    try:
        event = json.loads(_bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise InvalidSignature("the signed body is not JSON") from None
    if not isinstance(event, dict):
        raise InvalidSignature("the signed body is not a JSON object")
    return event
