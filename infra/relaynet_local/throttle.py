"""Stage throttling of the local stack: what API Gateway does for the template's HttpApi
``DefaultRouteSettings`` (``ThrottlingBurstLimit``, ``ThrottlingRateLimit``), enforced per route
with a token bucket, so a client looping on the local stack meets the same 429 it would meet in
AWS (PROTOCOL.md 2 ``rate_limited``).

The limits come from the template (its parameters' defaults: ``ThrottleBurstLimit``,
``ThrottleRateLimit``); ``RELAYNET_THROTTLE_BURST`` and ``RELAYNET_THROTTLE_RATE`` in the
environment of ``relaynet serve`` override them, as ``--parameter-overrides`` would in AWS. A
refused request answers 429 with the protocol's envelope and ``Retry-After`` (seconds until a
token is back, rounded up); API Gateway's own 429 body is ``{"message":"Too Many Requests"}``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RouteThrottle:
    """A token bucket per route: ``burst`` tokens at most, refilled at ``rate`` per second.

    ``burst`` or ``rate`` None (the template sets no limit) admits everything.
    """

    burst: int | None
    rate: float | None
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_template(cls, template: Any, environ: dict[str, str] | None = None) -> "RouteThrottle":
        """The limits of the template's first HttpApi ``DefaultRouteSettings`` (resolved with the
        parameters' defaults), overridden by ``RELAYNET_THROTTLE_BURST`` / ``_RATE``."""
        env = os.environ if environ is None else environ
        settings: dict[str, Any] = {}
        for resource in (template.document.get("Resources") or {}).values():
            if (resource or {}).get("Type") == "AWS::Serverless::HttpApi":
                settings = (resource.get("Properties") or {}).get("DefaultRouteSettings") or {}
                break
        burst = template.resolve(settings.get("ThrottlingBurstLimit"))
        rate = template.resolve(settings.get("ThrottlingRateLimit"))
        burst = env.get("RELAYNET_THROTTLE_BURST") or burst
        rate = env.get("RELAYNET_THROTTLE_RATE") or rate
        return cls(int(burst) if burst is not None else None, float(rate) if rate is not None else None)

    def admit(self, route_key: str, now: float | None = None) -> float | None:
        """Take a token for ``route_key``; None when admitted, else the seconds to wait."""
        if self.burst is None or self.rate is None:
            return None
        now = time.monotonic() if now is None else now
        with self._lock:
            bucket = self._buckets.setdefault(route_key, _Bucket(float(self.burst), now))
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            return (1.0 - bucket.tokens) / self.rate if self.rate > 0 else 60.0

    @staticmethod
    def retry_after(wait_s: float) -> str:
        """The ``Retry-After`` header value for a wait (whole seconds, at least 1)."""
        return str(max(1, math.ceil(wait_s)))
