"""Prefixed ULIDs (PROTOCOL.md 2): ``msg_01J...``, sortable by creation time.

Ids made in one process strictly increase, even within one millisecond: the random part of a
ULID minted in the same millisecond as the previous one is the previous one's plus one (the ULID
spec's monotonic mode). That is what keeps a burst of messages in order in a mailbox.
"""

from __future__ import annotations

import os
import threading

from relaynet.clock import now_ms

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32
PREFIXES = ("net", "inst", "thr", "msg", "task", "clm", "art", "ch", "env", "rep", "evt")

_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def ulid() -> str:
    """A 26-character monotonic ULID: 48 bits of milliseconds, 80 bits random or incremented."""
    global _last_ms, _last_rand
    with _lock:
        ms = now_ms()
        if ms <= _last_ms:
            ms = _last_ms
            _last_rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            _last_ms = ms
            _last_rand = int.from_bytes(os.urandom(10), "big") >> 1  # headroom for increments
        return _encode(ms, 10) + _encode(_last_rand, 16)


def forget_monotonic_state() -> None:
    """Forget the last millisecond and random part, so the next ULID draws fresh randomness
    (after a SnapStart restore, relaynet.snapstart: environments restored from one snapshot
    would otherwise increment the same random part within the snapshot's millisecond and mint
    the same ids). Ids stay unique; order between ids minted before and after it in one
    millisecond is not kept, as between two processes."""
    global _last_ms, _last_rand
    with _lock:
        _last_ms, _last_rand = -1, 0


def new_id(prefix: str) -> str:
    """``new_id("msg")`` -> ``"msg_01JD..."``. ``prefix`` must be one of :data:`PREFIXES`."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{ulid()}"


def sibling(prefix: str, of: str) -> str:
    """The id with ``prefix`` and the same ULID as ``of``: ``sibling("msg", "env_01JD...")`` ->
    ``"msg_01JD..."``, so one object's copy can be found from the other's id without a read (a
    channel envelope's mailbox copies, relaynet.channels). ValueError for an unknown prefix or an
    ``of`` that is not a prefixed id."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    head, sep, rest = of.partition("_")
    if not sep or head not in PREFIXES or len(rest) != 26:
        raise ValueError(f"not a prefixed id: {of!r}")
    return f"{prefix}_{rest}"
