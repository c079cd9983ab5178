"""The cursor-signing key's repository (relaynet.cursors, PROTOCOL.md 2 "Lists"): one item per
table, ``CONFIG#CURSORS`` / ``KEY`` (:func:`relaynet.store.keys.cursor_key`), whose ``secret`` is
32 random bytes in hex. relaynet.cursors makes the secret, signs and checks cursors; this module
only knows where the secret is kept.
"""

from __future__ import annotations

from typing import Any

from relaynet.store import keys as k
from relaynet.store import table as t


def secret() -> str | None:
    """The stored secret (hex), or None when the table has none yet: one strongly consistent GetItem."""
    item = t.get(*k.cursor_key())
    return item["secret"] if item else None


def create(secret_hex: str) -> bool:
    """Store ``secret_hex`` as the table's secret unless one exists (a PutItem on
    ``attribute_not_exists``: of two concurrent creators one wins, and the key never changes).
    Returns whether this call wrote it."""
    pk, sk = k.cursor_key()
    return t.put({"PK": pk, "SK": sk, "secret": secret_hex}, "attribute_not_exists(PK)")


def reader() -> tuple[tuple[str, str | None], Any]:
    """``((table name, entry point or None), client)``: what a secret read now is read for (the
    table and the entry point running, relaynet.store.table.declared) and with (the container's
    client: a new one, after ``table.reset()``, may talk to another table of the same name)."""
    decl = t.current_declaration()
    return (t.table_name(), decl.owner if decl else None), t.client()
