"""The unit of work (relaynet.store.unit_of_work, issue 29): one transaction answers an Outcome,
a lost race writes nothing, the 100-action limit is one check, and every optimistic loop backs off
with one policy."""

from __future__ import annotations

import pytest

from relaynet import ids
from relaynet.store import tasks as task_store
from relaynet.store import unit_of_work as uow
from relaynet.store.tasks import Before


def _task(net: str) -> dict:
    return {"id": ids.new_id("task"), "networkId": net, "title": "t", "state": "pending", "dueAt": 1}


def test_a_commit_answers_committed_and_a_lost_race_answers_why_and_writes_nothing(table):
    task = _task("net_uow")
    assert uow.commit([task_store.put(task, Before(None), 1)]) == uow.COMMITTED
    read = task_store.get("net_uow", task["id"])
    first = uow.commit([task_store.put({**read, "state": "offered", "offerExpiresAt": 9, "assignee": "i"},
                                       Before(read), 2)])
    assert first and first.reasons == ()
    lost = uow.commit([task_store.put({**read, "state": "cancelled"}, Before(read), 3)])  # read before `first`
    assert not lost and lost.refused_at(0) and not lost.refused_at(1) and not lost.refused_at(-5)
    assert task_store.get("net_uow", task["id"])["state"] == "offered"


def test_apply_lets_an_unexpected_cancellation_through_and_more_than_100_actions_is_refused(table):
    from relaynet.store.table import TransactionCancelled

    task = _task("net_uow")
    uow.apply([task_store.put(task, Before(None), 1)])
    with pytest.raises(TransactionCancelled):
        uow.apply([task_store.put(task, Before(None), 1)])  # created twice
    with pytest.raises(ValueError):
        uow.commit([task_store.put(_task("net_uow"), Before(None), 1) for _ in range(uow.MAX_ACTIONS + 1)])


def test_fits_counts_every_part_and_the_spare_slots():
    assert uow.fits([0] * 60, [0] * 40)
    assert not uow.fits([0] * 60, [0] * 41)
    assert uow.fits([0] * 99, spare=1) and not uow.fits([0] * 100, spare=1)


def test_attempts_back_off_before_each_retry_only(monkeypatch):
    pauses: list[int] = []
    monkeypatch.setattr(uow, "backoff", pauses.append)
    tries = []
    for n in uow.attempts(4):
        tries.append(n)
        assert pauses == list(range(n))  # no pause before the first try, one before each after it
    assert tries == [0, 1, 2, 3]
    pauses.clear()
    for n in uow.attempts(4):
        break  # won at once: no pause at all
    assert pauses == []


def test_the_backoff_is_full_jitter_under_an_exponential_bound_and_a_cap(monkeypatch):
    import time

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    for retry in range(12):
        for _ in range(50):
            uow.backoff(retry)
        bound = min(uow.CAP_S, uow.BASE_S * 2 ** retry)
        assert all(0 <= s <= bound for s in slept)
        assert max(slept) > bound / 2  # spread over the whole window, not pinned near 0
        slept.clear()
    uow.backoff(10_000)  # no overflow for a very long loop
    assert 0 <= slept[0] <= uow.CAP_S
