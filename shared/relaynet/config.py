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
        mailbox_cap: undelivered messages a mailbox holds before sends to it are 429
            (``RELAYNET_MAILBOX_CAP``, 1000; relaynet.limits).
        max_fanout: mailboxes one message may reach (``RELAYNET_MAX_FANOUT``, 200).
    """

    table_name: str
    offer_ttl: int
    presence_timeout: int
    channel_ttl: int
    reply_within: int
    max_wait: int
    sweep_batch: int
    mailbox_cap: int = 1000
    max_fanout: int = 200


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
        mailbox_cap=_int("RELAYNET_MAILBOX_CAP", 1000),
        max_fanout=_int("RELAYNET_MAX_FANOUT", 200),
    )
