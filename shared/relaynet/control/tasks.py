"""The control tools on tasks (PROTOCOL.md 6): list_tasks and task_status (``observe``), delegate
and cancel_task (``delegate``), each the worker surface's domain call under the representative."""

from __future__ import annotations

from typing import Any

from relaynet import claims, cursors, tasks
from relaynet.control.grants import objects, scope, worker_request
from relaynet.identity import Principal
from relaynet.models.worker import DelegateRequest, TaskGetRequest, TaskUpdateRequest
from relaynet.store import tasks as task_store


def list_tasks(principal: Principal, network_id: str | None, status: str | None, limit: int,
               cursor: str | None) -> dict[str, Any]:
    """control_list_tasks: ``{tasks, nextCursor}``, task summaries newest first, optionally of
    one ``status`` (PROTOCOL.md 2 "Lists"; a page reads at most 1,000 tasks of the listing index;
    a bad cursor is InvalidArgument)."""
    _, p = scope(principal, network_id, "observe")
    listing = cursors.Listing("control_list_tasks", p, status=status)
    after = listing.position(cursor)
    walk = task_store.walk_newest(p.network_id, after, 100)
    page, last = cursors.page_scan(walk, lambda task: task["id"], lambda task: status is None or task["state"] == status,
                                   limit)
    return {"tasks": [tasks.summary(i) for i in page], "nextCursor": listing.next_cursor(last)}


def task_status(principal: Principal, network_id: str | None, task_id: str) -> dict[str, Any]:
    """control_task_status: one task as network_task_get shows it."""
    _, p = scope(principal, network_id, "observe")
    return tasks.get(p, TaskGetRequest(taskId=task_id), claims.active_for_task)


def cancel_task(principal: Principal, network_id: str | None, task_id: str, reason: str | None) -> dict[str, Any]:
    """control_cancel_task: ``{task}`` after cancelling a non-terminal task (409 when terminal)."""
    _, p = scope(principal, network_id, "delegate", objects(task_id=task_id), call_checks=True)
    return tasks.update(p, TaskUpdateRequest(taskId=task_id, status="cancelled", reason=reason),
                        on_terminal=claims.release_for_task)


def delegate(principal: Principal, req) -> dict[str, Any]:
    """control_delegate: as network_delegate, created by the representative (needs delegate)."""
    tasks.delegate_arguments(req)  # 400 before 404 and 403 (PROTOCOL.md 2)
    to = {} if req.toInstance else {"name": req.toAgent}
    _, p = scope(principal, req.networkId, "delegate", objects(instance_id=req.toInstance, **to),
                 call_checks=True)
    return tasks.delegate(p, worker_request(DelegateRequest, req))
