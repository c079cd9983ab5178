"""List cursors (PROTOCOL.md 2 "Lists"): one codec for every tool that returns a list.

A list tool takes ``limit?`` and ``cursor?`` and answers its items plus ``nextCursor`` (null at
the end). Every list here is walked in a fixed total order (newest first by ULID, or by name),
and a cursor carries the sort key of the last item a page covered, so the next page starts
strictly after it: walking every page returns each item that existed when the walk started
exactly once, however many are created meanwhile (new items sort before the walk's position or
after it, never into a page already read).

A cursor is opaque to clients and tamper-evident: ``<base64url(JSON)>.<base64url(HMAC-SHA256)>``
over the position and what it is valid for (the tool and action, the network, the caller, and
the filter arguments of the call that returned it; ``limit`` may change between pages). The
signing key is 32 random bytes kept in the table (``relaynet.store.cursors``), created
by ``relaynet admin apply`` (every network passes through it before any token exists) and read
once per process. A cursor that does not decode, carries a bad signature, or was issued for
another list, network, caller or filter is 400 ``invalid_argument`` naming the field ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from relaynet.errors import InvalidArgument, RelaynetError
from relaynet.store import cursors as store

T = TypeVar("T")
MAX_CURSOR_CHARS = 2048
_keys: dict[tuple[str, str | None], tuple[Any, bytes]] = {}  # (table, entry point) -> (client, key)


def ensure_key() -> None:
    """Create the deployment's signing key if the table has none (idempotent; admin apply)."""
    if store.secret() is None:
        store.create(secrets.token_hex(32))


def _key() -> bytes:
    """The signing key, read once per entry point (as each Lambda container does; the local
    stack runs every function in one process) and client (a new client, as after
    ``table.reset()``, may talk to another table of the same name: read again)."""
    name, client = store.reader()
    cached = _keys.get(name)
    if cached is None or cached[0] is not client:
        secret = store.secret()
        if secret is None:
            raise RelaynetError("this table has no cursor key: run `relaynet admin apply` once")
        cached = _keys[name] = (client, bytes.fromhex(secret))
    return cached[1]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Listing:
    """One list as one caller sees it: ``Listing("tasks.list", principal, scope="own")``.

    ``principal`` is a :class:`relaynet.identity.Principal` (its network and its speaker name
    bind the cursor); ``filters`` are the call's arguments that shape the list (JSON scalars).
    """

    def __init__(self, name: str, principal: Any, **filters: Any):
        self.scope = {"l": name, "n": principal.network_id, "c": principal.speaker, "f": filters}

    def next_cursor(self, position: Any) -> str | None:
        """The opaque ``nextCursor`` for a page that ended at ``position`` (None: the end)."""
        if position is None:
            return None
        payload = json.dumps({"p": position, **self.scope}, separators=(",", ":"), sort_keys=True).encode("utf-8")
        mac = hmac.new(_key(), payload, hashlib.sha256).digest()[:16]
        return f"{_b64(payload)}.{_b64(mac)}"

    def position(self, cursor: str | None) -> Any:
        """The position ``cursor`` carries (None for no cursor: the list's start).

        Raises InvalidArgument (field ``cursor``) for a malformed, forged or foreign cursor.
        """
        if cursor is None:
            return None
        bad = InvalidArgument.field("cursor", "not a cursor this list returned (pass nextCursor as given)")
        if len(cursor) > MAX_CURSOR_CHARS or cursor.count(".") != 1:
            raise bad
        body, mac = cursor.split(".")
        try:
            payload, given = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError):
            raise bad from None
        if not hmac.compare_digest(hmac.new(_key(), payload, hashlib.sha256).digest()[:16], given):
            raise bad
        data = json.loads(payload)
        if {key: data.get(key) for key in self.scope} != self.scope:
            raise InvalidArgument.field("cursor", "this cursor belongs to another list, caller or other arguments")
        return data["p"]


def page_sorted(items: Sequence[T], sort_key: Callable[[T], Any], after: Any, limit: int) -> tuple[list[T], Any]:
    """One page of ``items`` (already sorted ascending by ``sort_key``, a total order whose values
    are JSON lists/strings/numbers): the first ``limit`` items whose key is greater than
    ``after``. Returns (page, the key to continue after, or None at the end)."""
    if after is not None:
        after = _tupled(after)
        items = [i for i in items if _tupled(sort_key(i)) > after]
    page = list(items[:limit])
    return page, (sort_key(page[-1]) if len(items) > limit else None)


def _tupled(value: Any) -> Any:
    return tuple(_tupled(v) for v in value) if isinstance(value, (list, tuple)) else value


def page_scan(candidates: Iterable[T], position: Callable[[T], Any], accept: Callable[[T], bool], limit: int,
              budget: int = 1000) -> tuple[list[T], Any]:
    """One page of a filtered walk over ``candidates`` (already in list order, starting after the
    cursor): the first ``limit`` accepted items, looking one accepted item further to know whether
    the list goes on. At most ``budget`` candidates are examined; when the budget runs out first,
    the page ends there (possibly short, even empty) and continues after the last candidate
    examined. Returns (page, the position to continue after, or None at the end)."""
    page: list[T] = []
    last: Any = None
    it: Iterator[T] = iter(candidates)
    for n, item in enumerate(it):
        if accept(item):
            if len(page) == limit:
                return page, position(page[-1])
            page.append(item)
        last = position(item)
        if n + 1 >= budget:
            return page, (last if next(it, None) is not None else None)
    return page, None
