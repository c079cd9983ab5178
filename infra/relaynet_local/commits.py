"""The hub's commit feed: every item a process of this hub commits, seen by every process.

:func:`relaynet.store.table.on_commit` tells a process about the Puts *it* commits. A local hub
of several processes (``relaynet serve --workers N``, relaynet_local.workers) must also tell a
stream held by one process about mail another process wrote: the Server-Sent Events of
``GET /v1/events`` (relaynet_local.event_stream) and A2A's streamed tasks
(relaynet_local.a2a_stream). :func:`subscribe` gives a listener both: this process's commits, in
the writing thread, and those the other processes forward (:func:`deliver_remote`, called by the
bus's reader thread). Push at the write (relaynet_local.streams.WriteNotifier) stays on
``table.on_commit``: the process that wrote pushes, once.

Listeners get ``images`` (DynamoDB JSON, as ``NewImage`` on the table's stream) and must be quick;
what one raises is logged and dropped, since the write happened.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

__all__ = ["subscribe", "deliver_remote", "forward_to"]

log = logging.getLogger("local_stack.commits")

Listener = Callable[[list[dict[str, Any]]], None]

_listeners: list[Listener] = []
_forward: Callable[[list[dict[str, Any]]], None] | None = None
_remove_hook: Callable[[], None] | None = None
_lock = threading.Lock()


def _dispatch(images: list[dict[str, Any]]) -> None:
    for listener in list(_listeners):
        try:
            listener(images)
        except Exception:  # noqa: BLE001 - the write committed; a listener's failure is not the writer's
            log.exception("a commit listener failed")


def _local(images: list[dict[str, Any]]) -> None:
    forward = _forward
    if forward is not None:
        try:
            forward(images)
        except Exception:  # noqa: BLE001 - the other processes' streams replay on resume
            log.exception("forwarding a commit to the hub's other processes failed")
    _dispatch(images)


def _hook() -> None:
    global _remove_hook
    with _lock:
        if _remove_hook is None:
            from relaynet.store import table

            _remove_hook = table.on_commit(_local)


def subscribe(listener: Listener) -> Callable[[], None]:
    """Call ``listener(images)`` for every commit of this hub, this process's and the others';
    returns a function that removes it."""
    _hook()
    _listeners.append(listener)

    def remove() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return remove


def forward_to(send: Callable[[list[dict[str, Any]]], None] | None) -> None:
    """Hand each of this process's commits to ``send`` too (the bus: it must not block), or stop
    (``None``)."""
    global _forward
    _forward = send
    if send is not None:
        _hook()


def deliver_remote(images: list[dict[str, Any]]) -> None:
    """Another process of this hub committed ``images``: tell this process's listeners."""
    if images:
        _dispatch(images)
