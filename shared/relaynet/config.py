"""Configuration read from the environment (PROTOCOL.md 9), once per container.

Every value is read lazily through :func:`settings` so tests can change the environment and
call :func:`settings.cache_clear`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """Runtime knobs. Durations are seconds.

    Attributes:
        table_name: the DynamoDB table (``RELAYNET_TABLE``).
        offer_ttl: how long a task offer stays open (``RELAYNET_OFFER_TTL_SECONDS``, 300).
        presence_timeout: after this long without a call an instance is ``offline``
            (``RELAYNET_PRESENCE_TIMEOUT_SECONDS``, 300).
        channel_ttl: default channel lifetime (``RELAYNET_CHANNEL_TTL_SECONDS``, 7200).
        reply_within: consulting reply window (``RELAYNET_REPLY_WITHIN_SECONDS``, 600).
        max_wait: longest server-side wait of one request (``RELAYNET_MAX_WAIT_SECONDS``, 20).
        sweep_batch: tasks one sweep run handles at most (``RELAYNET_SWEEP_BATCH``, 500).
        push_retry_base: the first retry delay of a failed webhook delivery; each further retry
            waits twice as long (``RELAYNET_PUSH_RETRY_BASE_SECONDS``, 30; fractions allowed).
        push_retry_window: how long a delivery is retried before it is marked failed
            (``RELAYNET_PUSH_RETRY_WINDOW_SECONDS``, 900).
        push_timeout: seconds one webhook POST may take (``RELAYNET_PUSH_TIMEOUT_SECONDS``, 3).
        push_allow_loopback: whether push URLs may be ``http`` to a loopback host and resolve to
            private addresses (``RELAYNET_PUSH_ALLOW_LOOPBACK``; the local stack sets it, AWS
            never does: there only ``https`` to public addresses is allowed).
        mailbox_cap: undelivered messages a mailbox holds before sends to it are 429
            (``RELAYNET_MAILBOX_CAP``, 1000; relaynet.limits).
        max_fanout: mailboxes one message may reach (``RELAYNET_MAX_FANOUT``, 200).
        cache_seconds: how long a container keeps representative grants and agent and group
            definitions it read (``RELAYNET_CACHE_SECONDS``, 5; 0 turns the caches off;
            relaynet.cache): the bound on how stale they can be.
    """

    table_name: str
    offer_ttl: int
    presence_timeout: int
    channel_ttl: int
    reply_within: int
    max_wait: int
    sweep_batch: int
    push_retry_base: float = 30.0
    push_retry_window: float = 900.0
    push_timeout: float = 3.0
    push_allow_loopback: bool = False
    mailbox_cap: int = 1000
    max_fanout: int = 200
    cache_seconds: float = 5.0


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    """The settings of this process, read from the environment on first use."""
    return Settings(
        table_name=os.environ.get("RELAYNET_TABLE", "relaynet"),
        offer_ttl=_int("RELAYNET_OFFER_TTL_SECONDS", 300),
        presence_timeout=_int("RELAYNET_PRESENCE_TIMEOUT_SECONDS", 300),
        channel_ttl=_int("RELAYNET_CHANNEL_TTL_SECONDS", 7200),
        reply_within=_int("RELAYNET_REPLY_WITHIN_SECONDS", 600),
        max_wait=_int("RELAYNET_MAX_WAIT_SECONDS", 20),
        sweep_batch=_int("RELAYNET_SWEEP_BATCH", 500),
        push_retry_base=_float("RELAYNET_PUSH_RETRY_BASE_SECONDS", 30.0),
        push_retry_window=_float("RELAYNET_PUSH_RETRY_WINDOW_SECONDS", 900.0),
        push_timeout=_float("RELAYNET_PUSH_TIMEOUT_SECONDS", 3.0),
        push_allow_loopback=os.environ.get("RELAYNET_PUSH_ALLOW_LOOPBACK", "").lower() in ("1", "true", "yes"),
        mailbox_cap=_int("RELAYNET_MAILBOX_CAP", 1000),
        max_fanout=_int("RELAYNET_MAX_FANOUT", 200),
        cache_seconds=_float("RELAYNET_CACHE_SECONDS", 5.0),
    )
