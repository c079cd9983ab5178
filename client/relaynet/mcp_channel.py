"""The worker bridge as a Claude Code channel (issue 27 part 1): the instance's events
(``GET /v1/events``, docs/protocol.md 10.6) told to the session as ``notifications/claude/channel``.

Claude Code (v2.1.80 and later, a research preview) listens to an MCP server that declares the
experimental capability ``claude/channel`` and shows each ``notifications/claude/channel``
(``params.content``, a string; ``params.meta``, string attributes) to the model, which acts on it
even when the session is idle. What the bridge says is short and never a message body, since
bodies come through ``network_inbox``, which marks them as from peers:
``"2 new on Relaynet: a task_offer (task task_...), a message. Call network_inbox."`` with meta
``{kind, messageId, taskId?, count}`` (the latest event's kind and ids, how many it covers).

Bursts are coalesced (:class:`Coalescer`): the first event after a quiet spell is told at once,
later ones wait for the end of a :data:`WINDOW_SECONDS` window and are told together, so at most
one notification leaves per window. The events come from the SDK's iterator
(relaynet.client_events), which reconnects after a drop and replays what still waits, run in a
worker thread; a token the hub refuses for events (a representative's, a revoked one) is logged
once and the tools keep working.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["CAPABILITY", "METHOD", "WINDOW_SECONDS", "ChannelNotification", "Coalescer", "Notice", "pump"]

logger = logging.getLogger("relaynet.mcp_bridge")

CAPABILITY = "claude/channel"  #: the experimental capability Claude Code looks for
METHOD = "notifications/claude/channel"
MAIL_EVENTS = ("message", "task_offer", "task_update", "wake")  # relaynet.event_stream.MAIL_EVENTS
WINDOW_SECONDS = 5.0



class ChannelNotification(types.Notification[dict[str, Any], Literal["notifications/claude/channel"]]):
    """Claude Code's channel event: ``params`` is ``{"content": str, "meta": {str: str}}``."""

    method: Literal["notifications/claude/channel"] = METHOD


_NAMES = {"task_offer": ("a task_offer", "task_offers"), "task_update": ("a task_update", "task_updates"),
          "wake": ("a wake-up", "wake-ups"), "message": ("a message", "messages")}


@dataclass
class Notice:
    """One ``notifications/claude/channel``: ``params`` is ``{"content", "meta"}``."""

    events: list[dict[str, Any]]

    @property
    def params(self) -> dict[str, Any]:
        """``content``: what waits, by kind, and what to do; ``meta``: strings only."""
        counts = Counter(e["event"] for e in self.events)
        parts = []
        for name in ("task_offer", "wake", "task_update", "message"):
            n = counts.get(name, 0)
            if not n:
                continue
            one, many = _NAMES[name]
            text = one if n == 1 else f"{n} {many}"
            tasks = [e["taskId"] for e in self.events if e["event"] == name and e.get("taskId")]
            if name == "task_offer" and tasks:
                text += f" (task {', '.join(dict.fromkeys(tasks))})"
            parts.append(text)
        last = self.events[-1]
        content = f"{len(self.events)} new on Relaynet: {', '.join(parts)}. Call network_inbox."
        meta = {"kind": str(last["event"]), "messageId": str(last["id"]), "count": str(len(self.events))}
        if last.get("taskId"):
            meta["taskId"] = str(last["taskId"])
        return {"content": content, "meta": meta}


@dataclass
class Coalescer:
    """At most one :class:`Notice` per ``window`` seconds (monotonic ``now``, seconds).

    :meth:`add` answers a notice to send now when no notice left in the last window, else keeps
    the event for :meth:`flush`, due at :meth:`due`."""

    window: float = WINDOW_SECONDS
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _last_sent: float | None = None

    def add(self, event: dict[str, Any], now: float) -> Notice | None:
        self._pending.append(event)
        if self._last_sent is None or now - self._last_sent >= self.window:
            return self.flush(now)
        return None

    def due(self) -> float | None:
        """When the kept events are to be told (None: nothing kept)."""
        return None if not self._pending or self._last_sent is None else self._last_sent + self.window

    def flush(self, now: float) -> Notice | None:
        """The kept events as one notice (None when none are kept)."""
        if not self._pending:
            return None
        notice, self._pending, self._last_sent = Notice(self._pending), [], now
        return notice


def _listen(url: str, token: str, send: MemoryObjectSendStream, stop: threading.Event) -> None:
    """In a worker thread: the SDK's iterator, each event handed to the event loop."""
    from relaynet.client import ApiError, RelaynetClient

    while not stop.is_set():
        try:
            with RelaynetClient(url, token) as hub:
                for event in hub.events(last_event_id="", stop=stop):  # what waits at start is told too
                    if event.get("event") in MAIL_EVENTS:  # mail only: network_inbox is what it points to
                        anyio.from_thread.run(send.send, event)
            if not stop.is_set():  # another stream of this instance replaced ours: take it back shortly
                logger.warning("relaynet channel: another stream of this instance replaced this one; again in 5 s")
                stop.wait(5.0)
        except ApiError as err:
            logger.warning("relaynet channel: no events (%s: %s); the tools still work", err.code, err.message)
            return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
            return  # the bridge is closing
        except Exception:  # noqa: BLE001 - a bug must not silence the channel for the session
            logger.exception("relaynet channel: the event stream failed; again in 5 s")
            stop.wait(5.0)


async def pump(url: str, token: str, notify, *, window: float = WINDOW_SECONDS) -> None:
    """Tell ``notify(params)`` (an async function sending ``notifications/claude/channel``) of the
    instance's events, coalesced, until cancelled. ``url`` and ``token`` as RELAYNET_URL and
    RELAYNET_TOKEN."""
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](256)
    stop = threading.Event()
    coalescer = Coalescer(window)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_run_listener, url, token, send, stop)
            await _tell(receive, coalescer, notify)
    finally:
        stop.set()


async def _run_listener(url: str, token: str, send: MemoryObjectSendStream, stop: threading.Event) -> None:
    async with send:
        await anyio.to_thread.run_sync(_listen, url, token, send, stop, abandon_on_cancel=True)


async def _tell(receive: MemoryObjectReceiveStream, coalescer: Coalescer, notify) -> None:
    async with receive:
        while True:
            due = coalescer.due()
            event = None
            if due is None:
                try:
                    event = await receive.receive()
                except anyio.EndOfStream:
                    return
            else:
                with anyio.move_on_after(max(0.0, due - anyio.current_time())):
                    try:
                        event = await receive.receive()
                    except anyio.EndOfStream:
                        notice = coalescer.flush(anyio.current_time())
                        if notice is not None:
                            await notify(notice.params)
                        return
            now = anyio.current_time()
            notice = coalescer.add(event, now) if event is not None else coalescer.flush(now)
            if notice is not None:
                await notify(notice.params)
