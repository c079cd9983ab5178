"""``GET /v1/events``: an instance's live events as Server-Sent Events, at the write
(docs/protocol.md 10.6; what is sent is relaynet.event_stream's decision).

Every mailbox entry a process of the hub commits reaches :class:`EventHub` through the hub's
commit feed (relaynet_local.commits: :func:`relaynet.store.table.on_commit` in the writing
process, the bus from the hub's other processes with ``--workers``): it turns each into its event
and hands it to the subscribers it reaches, each of which has one bounded queue. A subscription is served on
its own HTTP connection thread (the server is threaded):

- ``200`` with ``Content-Type: text/event-stream``; each event is ``id: <message id>``,
  ``event: <name>``, ``data: <the event's JSON>``; a ``: keepalive`` comment every
  :data:`KEEPALIVE_SECONDS` when nothing else was sent.
- With a ``Last-Event-ID`` header (or ``?lastEventId=``, for EventSource's first connect), the
  events of the mail still waiting are sent first (relaynet.event_stream.waiting): a reconnect
  after a drop loses nothing.
- A subscriber whose queue is full (it reads slower than its mail arrives, :data:`QUEUE_BOUND`)
  is sent ``event: overflow`` and closed; its reconnect with ``Last-Event-ID`` replays the waiting
  mail. At most :data:`MAX_PER_INSTANCE` streams per instance and hub process: the oldest is closed
  (``event: replaced``) when another opens.
- The token is checked when the stream opens (the authorizer, as for every route), again each
  keepalive, and at once when a process of the hub writes a token item (a revocation:
  control_stop_agent, control_restart_agent): a revoked token's stream is sent ``event: revoked``
  and closed.
- Writes made by another process (the admin CLI on the store's port) make no event here; their
  mail still waits in the mailbox and is replayed on the next resume.

In AWS the HTTP API cannot stream; the WebSocket route is issue 26's next step (not built).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from typing import Any, Callable

from relaynet import event_stream
from relaynet.identity import Principal

__all__ = ["EventHub", "Subscription", "KEEPALIVE_SECONDS", "QUEUE_BOUND", "MAX_PER_INSTANCE", "format_event",
           "token_proves"]

log = logging.getLogger("local_stack.events")

KEEPALIVE_SECONDS = 15.0
QUEUE_BOUND = 256
MAX_PER_INSTANCE = 4

_CLOSE = object()


def format_event(name: str, data: dict[str, Any], event_id: str | None = None) -> bytes:
    """One Server-Sent Event (WHATWG HTML, "Server-sent events"): ``id``, ``event``, ``data``
    (JSON on one line), a blank line."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode("utf-8")


def token_proves(token_hash: str, principal: Principal) -> bool:
    """Whether the token of that hash still proves ``principal`` (its instance, or its
    representative; not revoked): one GetItem of the token item (relaynet.identity.authorize_hash)."""
    from relaynet.identity import authorize_hash

    now = authorize_hash(token_hash)
    return now is not None and (now.kind, now.instance_id, now.rep) == (principal.kind, principal.instance_id,
                                                                       principal.rep)


def _granted(principal: Principal) -> frozenset[str]:
    """A representative's granted networks; none when its item is gone (its token then fails
    the next check and the stream ends ``revoked``)."""
    from relaynet.errors import NotFound

    try:
        return event_stream.granted_networks(principal)
    except NotFound:
        return frozenset()


def _owner(principal: Principal) -> str:
    """Whose streams count together against :data:`MAX_PER_INSTANCE`: an instance, or a representative."""
    return principal.instance_id if principal.kind == "instance" else f"rep:{principal.rep}"


class Subscription:
    """One open stream of one instance or representative: a bounded queue of SSE chunks (bytes)
    and why it ended; ``networks`` are a representative's granted networks (read when it opens
    and at each keepalive; empty for an instance)."""

    def __init__(self, principal: Principal, token_hash: str, networks: frozenset[str] = frozenset()):
        self.principal = principal
        self.token_hash = token_hash
        self.networks = networks
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_BOUND)
        self.closed: str | None = None  # why: overflow | revoked | replaced | stopping

    def offer(self, chunk: bytes) -> None:
        """Queue ``chunk``; a full queue closes the stream with ``overflow``."""
        if self.closed:
            return
        try:
            self.queue.put_nowait(chunk)
        except queue.Full:
            self.close("overflow")

    def close(self, why: str) -> None:
        """End the stream after what is queued (``event: <why>`` is its last event)."""
        if self.closed:
            return
        self.closed = why
        try:
            self.queue.put_nowait(_CLOSE)
        except queue.Full:  # the serving thread takes _CLOSE's place: it checks ``closed`` too
            pass


class EventHub:
    """The subscriptions of this process and the commit listener that feeds them.

    ``token_live(token_hash, principal)`` says whether a token still proves its principal (the
    local stack passes a fresh read of the token item)."""

    def __init__(self, token_live: Callable[[str, Principal], bool]):
        self._token_live = token_live
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()
        self._remove: Callable[[], None] | None = None
        self._recheck = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "EventHub":
        """Listen to the hub's commits (relaynet_local.commits: this process's and its other
        processes'); a thread makes the rechecks :meth:`recheck_soon` asks for."""
        from relaynet_local import commits

        self._stopping.clear()
        self._remove = commits.subscribe(self._committed)
        self._thread = threading.Thread(target=self._rechecking, daemon=True, name="relaynet-local-events")
        self._thread.start()
        return self

    def recheck_soon(self) -> None:
        """Ask for a :meth:`recheck` (a token item was written: quick, for the writing thread)."""
        self._recheck.set()

    def _rechecking(self) -> None:
        while not self._stopping.is_set():
            if self._recheck.wait(timeout=1.0):
                self._recheck.clear()
                try:
                    self.recheck()
                except Exception:  # noqa: BLE001 - a failed read: the keepalive checks again
                    log.exception("events: token recheck failed")

    def stop(self) -> None:
        """Stop listening and end every stream (``event: stopping``)."""
        if self._remove is not None:
            self._remove()
            self._remove = None
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            subs, self._subs = self._subs, []
        for sub in subs:
            sub.close("stopping")

    def subscribe(self, principal: Principal, token_hash: str, networks: frozenset[str] = frozenset()) -> Subscription:
        """A new stream for ``principal`` (a representative's with its granted ``networks``); the
        oldest of its instance's (or representative's) streams past :data:`MAX_PER_INSTANCE` is
        closed (``replaced``)."""
        sub = Subscription(principal, token_hash, networks)
        with self._lock:
            mine = [s for s in self._subs if _owner(s.principal) == _owner(principal)]
            for old in mine[: max(0, len(mine) - MAX_PER_INSTANCE + 1)]:
                old.close("replaced")
                self._subs.remove(old)
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def count(self) -> int:
        """Open streams."""
        with self._lock:
            return len(self._subs)

    def recheck(self) -> None:
        """Close every stream whose token no longer proves its principal (called when this
        process wrote a token item, and by each stream at its keepalive)."""
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            if not sub.closed and not self._token_live(sub.token_hash, sub.principal):
                sub.close("revoked")

    def _committed(self, images: list[dict[str, Any]]) -> None:
        from relaynet.store import table

        with self._lock:
            if not self._subs:
                return
            subs = list(self._subs)
        reps = [sub for sub in subs if sub.principal.kind == "representative"]
        for image in images:
            pk = (image.get("PK") or {}).get("S", "")
            if "#MBOX#" not in pk and not pk.endswith("#EVENTS"):  # mail, or the network's history
                continue
            item = table.decode(image)
            found = event_stream.addressed(item)
            if found is not None:
                for sub in subs:
                    if found.reaches(sub.principal):
                        data = event_stream.for_principal(found, sub.principal)
                        sub.offer(format_event(data["event"], data, data["id"]))
            seen = event_stream.activity(item) if reps else None
            if seen is not None:
                for sub in reps:
                    if seen["networkId"] in sub.networks:
                        sub.offer(format_event("activity", seen, seen["id"]))

    def serve(self, write: Callable[[bytes], None], principal: Principal, token_hash: str,
              last_event_id: str | None) -> str:
        """Serve one stream through ``write`` (the response body, headers already sent) until it
        ends; returns why (``overflow``, ``revoked``, ``replaced``, ``stopping`` or
        ``disconnected`` when a write failed). With a ``last_event_id`` (the header's value, even
        empty), an instance is sent the waiting mail's events first; a representative, with a
        non-empty one, the history entries after it (relaynet.event_stream.activity_since). They
        are read after subscribing, so an event committed meanwhile is sent twice at worst, never
        lost."""
        rep = principal.kind == "representative"
        sub = self.subscribe(principal, token_hash, _granted(principal) if rep else frozenset())
        try:
            write(b": relaynet events\n\n")
            if rep and last_event_id:
                for data in event_stream.activity_since(sub.networks, last_event_id):
                    write(format_event("activity", data, data["id"]))
            elif not rep and last_event_id is not None:
                for data in event_stream.waiting(principal):
                    write(format_event(data["event"], data, data["id"]))
            while True:
                try:
                    chunk = sub.queue.get(timeout=KEEPALIVE_SECONDS)
                except queue.Empty:
                    chunk = None
                    if not sub.closed and not self._token_live(token_hash, principal):
                        sub.close("revoked")
                    elif rep and not sub.closed:
                        sub.networks = _granted(principal)  # grants may change while it listens
                if chunk is not None and chunk is not _CLOSE:
                    write(chunk)
                if sub.closed and (chunk is _CLOSE or sub.queue.empty()):
                    write(format_event(sub.closed, {"reason": sub.closed}))
                    return sub.closed
                if chunk is None:
                    write(b": keepalive\n\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            return "disconnected"
        finally:
            self.unsubscribe(sub)
