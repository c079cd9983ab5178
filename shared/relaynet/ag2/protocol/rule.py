"""An agent's rule, access and limits (AG2 1.2.1 ``ag2/network/rule.py``), and AG2's duration
strings. Relaynet stores a registered agent's rule and answers ``get_rule`` with it; Relaynet's
own access rules (the agent definition's ``inbound_from``) are what its hub enforces.
"""

from __future__ import annotations

from pydantic import Field

from relaynet.ag2.protocol.base import WireModel

__all__ = ("AccessBlock", "ChannelTypeAccess", "InboxBlock", "LimitsBlock", "RateBlock", "Rule", "parse_duration")

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(s: str | int) -> int:
    """Seconds of ``"30s"``, ``"15m"``, ``"2h"``, ``"1d"``, ``"90"`` (seconds) or an int;
    ``""`` is 0. Raises ``ValueError`` for another unit or a non-number (AG2's ``int()``), and
    ``TypeError`` for another type (``s[-1]`` of it), exactly as AG2's ``parse_duration``."""
    if isinstance(s, int):
        return s
    if not s:
        return 0
    if s[-1] in _DURATION_UNITS:
        return int(s[:-1]) * _DURATION_UNITS[s[-1]]
    return int(s)


def _star() -> list[str]:
    return ["*"]


class ChannelTypeAccess(WireModel):
    initiate: list[str] = Field(default_factory=_star)
    accept: list[str] = Field(default_factory=_star)


class AccessBlock(WireModel):
    """Globs over agent names and channel types (``["*"]``: anyone)."""

    inbound_from: list[str] = Field(default_factory=_star)
    outbound_to: list[str] = Field(default_factory=_star)
    channel_types: ChannelTypeAccess = Field(default_factory=ChannelTypeAccess)


class RateBlock(WireModel):
    """Token bucket (per minute; 0: off)."""

    per_minute: int = 0
    burst: int = 0


class InboxBlock(WireModel):
    max_pending: int = 1000
    overflow: str = "reject"  # "reject" | "drop_oldest" | "drop_newest"
    high_water: int | None = None


class LimitsBlock(WireModel):
    """Caps (0: none) and default TTLs as duration strings (or int seconds)."""

    max_concurrent_channels: int = 0
    max_concurrent_tasks: int = 0
    channel_ttl_default: str | int = "2h"
    task_ttl_default: str | int = "15m"
    rate: RateBlock = Field(default_factory=RateBlock)
    delegation_depth: int = 5
    inbox: InboxBlock = Field(default_factory=InboxBlock)


class Rule(WireModel):
    """``{"version": 1, "access": {...}, "limits": {...}}``; the defaults permit everything."""

    version: int = 1
    access: AccessBlock = Field(default_factory=AccessBlock)
    limits: LimitsBlock = Field(default_factory=LimitsBlock)
