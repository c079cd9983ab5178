"""A2A ListTasks on the update-ordered index (GSI4, docs/protocol.md 13.2): newest update first,
paged with tokens that neither repeat nor skip a task, also when several tasks share one
``updatedAt`` millisecond (the index orders ties in no defined way), and statusTimestampAfter
ends the walk at the first older task."""

from __future__ import annotations

import pytest

from relaynet import tasks
from relaynet.a2a import service, wire
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t


def _page_all(p, size: int, **filters) -> list[str]:
    seen, token = [], ""
    while True:
        page = service.list_tasks(p, "coder", wire.ListTasksParams(pageSize=size, pageToken=token or None, **filters))
        seen += [task["id"] for task in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            return seen


def _touch(demo, task_id: str, at: str) -> None:
    t.update(*k.task(demo.network_id, task_id), "SET updatedAt = :at", at=at)


def test_newest_update_first_and_ties_in_one_millisecond_neither_repeat_nor_skip(demo):
    planner = demo.principals["planner0"]
    ids = [tasks.delegate(planner, w.DelegateRequest(objective=f"list {n}", toAgent="coder"))["taskId"]
           for n in range(7)]
    stamps = ["2026-12-04T10:00:05.000Z"] * 3 + ["2026-12-04T10:00:03.000Z"] * 2 + ["2026-12-04T10:00:09.000Z"] * 2
    for task_id, at in zip(ids, stamps):
        _touch(demo, task_id, at)
    expected_order = [stamps[ids.index(i)] for i in ids]
    for size in (1, 2, 3, 7):
        listed = _page_all(planner, size)
        assert sorted(listed) == sorted(ids) and len(listed) == len(ids), size
        assert [stamps[ids.index(i)] for i in listed] == sorted(expected_order, reverse=True), size
    newer = _page_all(planner, 2, statusTimestampAfter="2026-12-04T10:00:04.000Z")
    assert sorted(newer) == sorted(ids[:3] + ids[5:])


def test_a_page_token_of_another_list_is_invalid_params(demo):
    planner = demo.principals["planner0"]
    for n in range(2):
        tasks.delegate(planner, w.DelegateRequest(objective=f"token {n}", toAgent="coder"))
    token = service.list_tasks(planner, "coder", wire.ListTasksParams(pageSize=1))["nextPageToken"]
    assert token
    with pytest.raises(wire.A2AError) as err:
        service.list_tasks(planner, "coder", wire.ListTasksParams(pageSize=1, pageToken=token, status="TASK_STATE_WORKING"))
    assert err.value.code == wire.INVALID_PARAMS
