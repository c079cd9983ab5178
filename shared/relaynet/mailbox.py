"""The inbox summary (``GET /v1/inbox/summary``, docs/protocol.md "Inbox summary"): what an
instance's ``network_inbox`` would hand out, counted without handing anything out.

An instance fetches from two mailboxes, two partitions of the table: its own and its agent's.
A base-table Query reads one partition, so the summary reads the agent's *mailbox view* instead:
a sparse index where every mailbox entry of the agent and of each of its instances is listed in
one partition with only its keys, ``kind``, ``createdAt`` and ``senderInstance`` projected
(relaynet.store.mailboxes.summary_page; the keys in docs/architecture.md). One Query of that partition, filtered to this instance's two
mailboxes and to messages it did not send itself (the same rule as ``network_inbox``), is the
whole summary: one DynamoDB request, no write, nothing delivered.

Why not counters: counts kept in the mailbox write transactions would be one hot item per
mailbox that every concurrent send and fetch writes in its transaction (TransactionConflict
under load), would take a transaction slot per mailbox in a fan-out and two in a 100-message
fetch (which already fills the 100-item limit), and cannot give the oldest ``createdAt`` after
a delete. The view costs one extra index write per mailbox entry put and deleted (entries are
under 1 KB, so one write unit each) and is eventually consistent: a message committed a moment
ago may be missing from the summary for the index's propagation delay (typically well under a
second in AWS; DynamoDB Local and moto update their indexes synchronously).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from relaynet import event_stream
from relaynet.config import settings
from relaynet.identity import Principal
from relaynet.store import mailboxes as mail_store

#: Entries evaluated by the one Query (its ``Limit``): the projected entries are about 150
#: bytes, so this stays far below the 1 MB page; beyond it the counts are a lower bound
#: (``complete`` false) rather than a second request.
SUMMARY_LIMIT = 2000

#: The pauses between two summaries of one long poll (:func:`wait`): the first pause, doubled
#: after each empty look up to the longest. They bound how late a write made by another process
#: (another Lambda in AWS) is seen; writes this process commits wake the poll at once.
WAIT_POLL_SECONDS = 0.5
WAIT_POLL_MAX_SECONDS = 2.0


def summary(principal: Principal) -> dict[str, Any]:
    """``GET /v1/inbox/summary``: ``{undelivered, byKind, oldestCreatedAt, complete}``.

    ``undelivered`` is the number of messages ``network_inbox`` would hand this instance now
    (its own mailbox and its agent's, its own messages left out), ``byKind`` counts them by
    message kind (only kinds present), ``oldestCreatedAt`` is the oldest one's ``createdAt``
    (RFC 3339, null when there is none), ``complete`` is false when the agent's mailboxes hold
    more than :data:`SUMMARY_LIMIT` entries (the counts then cover the oldest of them).
    Delivers nothing and writes nothing. One Query of the mailbox view (module docstring).
    """
    items, more = mail_store.summary_page(principal.network_id, principal.agent, principal.instance_id,
                                          SUMMARY_LIMIT)
    by_kind: dict[str, int] = {}
    oldest: str | None = None
    for entry in items:
        by_kind[entry["kind"]] = by_kind.get(entry["kind"], 0) + 1
        created = entry.get("createdAt")
        if created and (oldest is None or created < oldest):
            oldest = created
    return {"undelivered": sum(by_kind.values()), "byKind": by_kind, "oldestCreatedAt": oldest,
            "complete": not more}


class _Waiters:
    """The long polls of this process, woken by its own commits (relaynet.store.mailboxes.on_commit):
    a mailbox entry another request of this process commits (always, in the local stack, which
    runs every function in one process) ends a wait at once instead of at its next poll. The one
    commit listener is registered at the first wait and stays."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[threading.Event, Principal] = {}
        self._listening = False

    def add(self, principal: Principal) -> threading.Event:
        woken = threading.Event()
        with self._lock:
            if not self._listening:
                mail_store.on_commit(self._committed)
                self._listening = True
            self._waiting[woken] = principal
        return woken

    def remove(self, woken: threading.Event) -> None:
        with self._lock:
            self._waiting.pop(woken, None)

    def _committed(self, images: list[dict[str, Any]]) -> None:
        with self._lock:
            if not self._waiting:
                return
            waiting = list(self._waiting.items())
        for item in mail_store.committed_mail(images):  # what is not mail is not even decoded
            found = event_stream.addressed(item)
            if found is None or found.everyone:  # not mail (a claim released is no inbox entry)
                continue
            for woken, principal in waiting:
                if found.reaches(principal):
                    woken.set()


_waiters = _Waiters()


def wait(principal: Principal, timeout: int) -> dict[str, Any]:
    """``GET /v1/inbox/wait?timeout=S`` (docs/protocol.md 10.7): :func:`summary` as soon as it
    counts an undelivered message (at once if one waits already), else at
    ``min(S, RELAYNET_MAX_WAIT_SECONDS)`` seconds with ``undelivered`` 0. Delivers and writes
    nothing. A summary Query, then one after each pause (:data:`WAIT_POLL_SECONDS`, doubled up
    to :data:`WAIT_POLL_MAX_SECONDS`; 13 Queries in all in a 20 s wait, the last at the deadline); a
    mailbox entry this process commits for the caller ends the pause at once (:class:`_Waiters`)."""
    deadline = time.monotonic() + min(max(0, timeout), settings().max_wait)
    pause = WAIT_POLL_SECONDS
    woken = _waiters.add(principal)
    try:
        while True:
            woken.clear()
            found = summary(principal)
            left = deadline - time.monotonic()
            if found["undelivered"] > 0 or left <= 0:
                return found
            if not woken.wait(min(pause, left)):
                pause = min(pause * 2, WAIT_POLL_MAX_SECONDS)
    finally:
        _waiters.remove(woken)
