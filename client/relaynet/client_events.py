"""The SDK's iterator over an instance's live events, ``GET /v1/events`` (docs/protocol.md 10.6):
Server-Sent Events parsed by httpx-sse, reconnected with ``Last-Event-ID`` after a drop.

Usage::

    with RelaynetClient(url, token) as hub:
        for event in hub.events():
            if event["event"] == "task_offer":
                hub.inbox()  # the offer itself comes through network_inbox
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import SSEError, connect_sse

if TYPE_CHECKING:
    from relaynet.client import RelaynetClient

__all__ = ["EVENT_NAMES", "iterate"]

EVENT_NAMES = ("message", "task_offer", "task_update", "wake", "claim_released", "activity")  # relaynet.event_stream
_RECONNECT = ("overflow", "stopping")  # the hub ended the stream; resume it
_SEEN = 1024  # ids remembered to drop a replayed event already yielded
_RETRY_STATUSES = (429, 502, 503, 504)  # the hub starting or stopping, a proxy, throttling: try again


class _Retry(Exception):
    """The hub answered that it may answer later (a status of _RETRY_STATUSES)."""


def iterate(client: "RelaynetClient", *, last_event_id: str | None = None, reconnect: bool = True,
            retry_seconds: float = 1.0, read_timeout: float = 45.0,
            stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
    """Yield the instance's events (``{event, id, networkId, instanceId, messageId, kind,
    threadId?, taskId?, createdAt}``, never a body; ``claim_released`` events carry ``claimId``
    and ``scope`` instead) as they are written, each once.

    Args:
        client: the RelaynetClient whose URL and token are used (an instance's token).
        last_event_id: resume after this event id (the hub replays the mail still waiting first);
            None starts with new events only. After a drop the iterator always resumes.
        reconnect: reconnect after a drop (the hub's restart, an ``overflow``, a network error,
            an answer of 429, 502, 503 or 504), waiting ``retry_seconds`` (doubled per failure,
            at most 10 s, so a restarted hub is heard again within 10 s); False: end instead.
        read_timeout: seconds without a byte before the connection counts as dropped (the hub
            sends a keepalive every 15 s).
        stop: set it (from another thread) to end the iteration at the next event, keepalive
            or retry.

    Ends when another stream of the same instance replaced this one, or ``stop`` is set.
    Raises ApiError: 401 ``unauthenticated`` (bad or revoked token; a revocation also ends an
    open stream), 403 ``permission_denied`` (a representative's token), any other refusal of
    the request; with ``reconnect=False`` also a dropped connection (``unavailable``).
    """
    from relaynet.client import ApiError, _error_from_response, _transport_error

    seen: collections.OrderedDict[str, None] = collections.OrderedDict()
    resume_from = last_event_id
    delay = retry_seconds
    timeout = httpx.Timeout(client._http.timeout.connect, read=read_timeout)
    while stop is None or not stop.is_set():
        headers = {"Accept": "text/event-stream"}
        if resume_from is not None:
            headers["Last-Event-ID"] = resume_from
        ended = None
        try:
            with connect_sse(client._http, "GET", "/v1/events", headers=headers, timeout=timeout) as source:
                if source.response.status_code != 200:
                    source.response.read()
                    error = _error_from_response(source.response)
                    if not (reconnect and error.status in _RETRY_STATUSES):
                        raise error
                    source.response.close()
                    raise _Retry()
                delay = retry_seconds
                resume_from = resume_from or ""  # any reconnect replays what still waits
                for sse in source.iter_sse():
                    if stop is not None and stop.is_set():
                        return
                    if sse.event in EVENT_NAMES:
                        try:  # "message" is also SSE's default type: a block cut short by a drop has it
                            event = json.loads(sse.data)
                        except ValueError:
                            continue
                        if not isinstance(event, dict) or not event.get("id"):
                            continue
                        resume_from = sse.id or resume_from
                        if event["id"] in seen:
                            continue
                        seen[event["id"]] = None
                        if len(seen) > _SEEN:
                            seen.popitem(last=False)
                        yield event
                    elif sse.event == "revoked":
                        raise ApiError(401, "unauthenticated", "the token was revoked (the instance was stopped "
                                                               "or restarted): the event stream is closed")
                    elif sse.event == "replaced":
                        return
                    elif sse.event in _RECONNECT:
                        ended = sse.event
                        break
        except httpx.TransportError as exc:
            if not reconnect:
                raise _transport_error(exc, client.url) from exc
        except _Retry:
            pass
        except SSEError as exc:  # not an event stream: a proxy's page, an old hub
            raise ApiError(502, "unavailable", f"GET /v1/events did not answer an event stream: {exc}") from exc
        if not reconnect:
            if ended is None:
                raise ApiError(0, "unavailable", "the event stream was dropped")
            return
        if ended is None:  # a drop, not the hub's word: wait before the next try
            if stop is not None:
                if stop.wait(delay):
                    return
            else:
                threading.Event().wait(delay)
            delay = min(delay * 2, 10.0)
