"""The unit of work (issue 29): how the domain's decisions are committed, and how a lost race is
tried again. The domain builds a transaction's actions with the repositories of ``store/`` and
hands them here; it never sees a ``TransactionCancelled``, never spells DynamoDB's 100-action limit
and never sleeps a jitter of its own.

- :func:`commit` runs one TransactWriteItems and answers an :class:`Outcome`: truthy when it
  committed, falsy (with DynamoDB's per-action cancellation reasons) when a condition failed or it
  conflicted with another transaction. Nothing was written then.
- :func:`apply` runs one whose cancellation the caller does not expect (new ids, items nobody
  else writes): a cancellation there is a fault, and it propagates as one (a 500).
- :func:`attempts` is the optimistic loop's one backoff policy: ``for n in attempts(limit)`` yields
  ``0 .. limit - 1`` and sleeps :func:`backoff` before every try after the first, so a loop that
  reads, decides and commits ``continue``s after a lost race and ``return``s when it won.
- :func:`fits` is the one place that knows how many actions a transaction holds.

The policy is "full jitter" exponential backoff (AWS Architecture Blog, "Exponential Backoff And
Jitter"): before retry ``n`` (0-based) a uniform pause in ``[0, min(CAP_S, BASE_S * 2**n)]``, so
racing callers spread out instead of colliding again in step. ``random`` is reseeded after a
SnapStart restore (relaynet.snapstart), so restored environments do not jitter alike.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from relaynet.store import table as t

#: DynamoDB's limit on one TransactWriteItems (actions, the Idempotency-Key rider included).
MAX_ACTIONS = t.MAX_TRANSACT_ITEMS
BASE_S = 0.005  # the first retry's pause is at most 5 ms
CAP_S = 0.2  # and no pause is longer than 200 ms


@dataclass(frozen=True)
class Outcome:
    """What one :func:`commit` did: ``committed``, or not and why.

    ``reasons`` holds one DynamoDB cancellation code per action when it did not commit
    (``"ConditionalCheckFailed"``, ``"TransactionConflict"``, ... or None for an action that was
    fine); empty when it committed. Truthy exactly when it committed.
    """

    committed: bool
    reasons: tuple[str | None, ...] = ()

    def __bool__(self) -> bool:
        return self.committed

    def refused_at(self, index: int) -> bool:
        """True when the action at ``index`` (negative counts from the end) failed its condition."""
        try:
            return self.reasons[index] == "ConditionalCheckFailed"
        except IndexError:
            return False


COMMITTED = Outcome(True)


def commit(actions: list[dict[str, Any]]) -> Outcome:
    """One TransactWriteItems of ``actions`` (all or nothing). Returns :data:`COMMITTED`, or an
    Outcome with the cancellation reasons when a condition failed or it conflicted (nothing was
    written). Raises ValueError for more than :data:`MAX_ACTIONS` actions (check with
    :func:`fits`); any other error of the store (throttling past botocore's retries, a network
    failure) propagates."""
    try:
        t.transact(actions)
    except t.TransactionCancelled as exc:
        return Outcome(False, tuple(exc.reasons))
    return COMMITTED


def apply(actions: list[dict[str, Any]]) -> None:
    """One TransactWriteItems that is expected to commit. Raises
    ``relaynet.store.table.TransactionCancelled`` when it did not (nobody in the domain catches
    it: the handler answers 500), ValueError for more than :data:`MAX_ACTIONS` actions."""
    t.transact(actions)


def fits(*parts: Sequence[Any], spare: int = 0) -> bool:
    """Whether the actions of ``parts`` together fit one transaction (at most :data:`MAX_ACTIONS`),
    leaving ``spare`` actions free (1 for an Idempotency-Key record that may ride along)."""
    return sum(len(p) for p in parts) + spare <= MAX_ACTIONS


def backoff(retry: int) -> None:
    """Sleep before retry ``retry`` (0-based): uniform in ``[0, min(CAP_S, BASE_S * 2**retry)]`` seconds."""
    time.sleep(random.uniform(0, min(CAP_S, BASE_S * (2 ** min(retry, 16)))))


def attempts(limit: int) -> Iterator[int]:
    """``0 .. limit - 1``, sleeping :func:`backoff` before each after the first: the tries of
    one optimistic read-decide-commit loop. The loop's body ``continue``s after a lost race and
    leaves the loop (return, break) when it is done; after ``limit`` lost races the loop ends and
    the caller answers its own "busy" error."""
    for n in range(limit):
        if n:
            backoff(n - 1)
        yield n
