"""Time in the protocol's format: RFC 3339 UTC with milliseconds (PROTOCOL.md 2)."""

from __future__ import annotations

import time
from datetime import datetime, timezone


def now_ms() -> int:
    """Milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


def iso(ms: int) -> str:
    """``1764439200000`` -> ``"2025-11-29T18:00:00.000Z"``."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def now_iso() -> str:
    """The current time as an RFC 3339 UTC string with milliseconds."""
    return iso(now_ms())


def parse_iso(value: str) -> int:
    """Inverse of :func:`iso`: an RFC 3339 string to epoch milliseconds."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return int(dt.timestamp() * 1000)
