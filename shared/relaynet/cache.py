"""Per-container caches of items read on almost every call and rarely changed: representative
grants and agent and group definitions (issue 16, "request floors"; docs/architecture.md).

A value is kept :attr:`relaynet.config.Settings.cache_seconds` seconds (``RELAYNET_CACHE_SECONDS``,
5) from the moment it was read, so a change made by another container (a revoked grant, a
redefined agent or group) is seen at most that long after it committed. A change made through
this process (``relaynet admin apply``, ``control_use_network``) drops the entries it touches at
once. Absent items are never cached: what was just created is found by the next read.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Hashable

from relaynet.config import settings

MAX_ENTRIES = 4096  # per cache; past that the oldest reads are dropped first


def _now() -> float:
    """Seconds on a monotonic clock (time.monotonic): the age of a cached read."""
    return time.monotonic()


class TTLCache:
    """``key -> value`` kept for the configured seconds per container (thread-safe: the local
    stack runs every function's containers in one process)."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, Any]] = {}

    def get(self, key: Hashable, load: Callable[[], Any]) -> Any:
        """The cached value of ``key`` if read less than the bound ago, else ``load()`` (kept
        unless it is None). Raises whatever ``load`` raises (and caches nothing then)."""
        bound = settings().cache_seconds
        now = _now()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and now - hit[0] < bound:
            return hit[1]
        value = load()
        if value is not None and bound > 0:
            self.put(key, value, now)
        return value

    def peek(self, key: Hashable) -> Any:
        """The cached value of ``key`` if read less than the bound ago, else None (no read)."""
        with self._lock:
            hit = self._entries.get(key)
        return hit[1] if hit is not None and _now() - hit[0] < settings().cache_seconds else None

    def put(self, key: Hashable, value: Any, read_at: float | None = None) -> None:
        """Keep ``value`` as read at ``read_at`` (monotonic seconds; now by default)."""
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                for old in sorted(self._entries, key=lambda k: self._entries[k][0])[: MAX_ENTRIES // 4]:
                    del self._entries[old]
            self._entries[key] = (_now() if read_at is None else read_at, value)

    def drop(self, match: Callable[[Hashable], bool] | None = None) -> None:
        """Forget the keys ``match`` accepts (all of them without ``match``)."""
        with self._lock:
            for key in [key for key in self._entries if match is None or match(key)]:
                del self._entries[key]


#: ``(table, representative name) -> its item`` (relaynet.control: grants and activeNetwork).
representatives = TTLCache("representatives")
#: ``(table, network id, agent or group name) -> {"agent": item} or {"group": item}`` (relaynet.messaging).
definitions = TTLCache("definitions")
#: token hash -> Principal of a live token: what an AG2 connection re-checks on every frame
#: (relaynet.ag2.ops), so a stopped or restarted instance's connection stops acting within the bound.
tokens = TTLCache("tokens")
#: ``(table, network id, channel id) -> {channel_id, type, participants}`` of a channel head: what
#: the AG2 notifier needs to address an envelope (relaynet.ag2.ops.deliver). A channel's
#: participants and type never change after it opens, so a cached shape is never wrong.
channel_shapes = TTLCache("channel_shapes")
#: AG2 connection id -> the network it acts in, which never changes once set (relaynet.store.ag2
#: .bind's condition): lets a frame read its connection and its channel in one request.
connection_networks = TTLCache("connection_networks")


def drop_network(network_id: str) -> None:
    """Forget every cached definition of ``network_id`` (after this process changed them)."""
    definitions.drop(lambda key: key[1] == network_id)


def clear() -> None:
    """Forget everything (tests, a process that switches tables, a SnapStart restore)."""
    representatives.drop()
    definitions.drop()
    tokens.drop()
    channel_shapes.drop()
    connection_networks.drop()
