"""The plugin surface's tasks tool (PROTOCOL.md 5.7): progress | complete | list | status | wait |
cancel on the worker surface's tasks, through relaynet.tasks."""

from __future__ import annotations

import time
from typing import Any

from relaynet import tasks
from relaynet.config import settings
from relaynet.identity import Principal
from relaynet.models import plugin as m
from relaynet.models.worker import TaskUpdateRequest
from relaynet.taskstate import TERMINAL

WAIT_POLL_SECONDS = 0.5


def tasks_tool(principal: Principal, req: m.TasksRequest, on_terminal=None) -> dict[str, Any]:
    """tasks ``progress`` | ``complete`` | ``list`` | ``status`` | ``wait`` | ``cancel`` on the
    worker surface's tasks. ``on_terminal`` releases a finished task's claims."""
    if req.action == "list":
        return tasks.list_for(principal, req.scope or "own", req.state or "active", req.limit, req.cursor)
    m.require(req, "task_id")
    if req.action == "progress":
        m.require(req, "payload")
        return tasks.progress(principal, req.task_id, req.payload)
    if req.action == "complete":
        update = TaskUpdateRequest(taskId=req.task_id, status="completed", reason=req.result or "completed")
        return tasks.update(principal, update, on_terminal=on_terminal)
    if req.action == "cancel":
        update = TaskUpdateRequest(taskId=req.task_id, status="cancelled", reason=req.reason)
        return tasks.update(principal, update, on_terminal=on_terminal)
    if req.action == "status":
        return {"task": tasks.summary(tasks.load_task(principal.network_id, req.task_id))}
    return wait(principal, req.task_id, req.timeout)


def wait(principal: Principal, task_id: str, timeout_s: int) -> dict[str, Any]:
    """tasks ``wait`` (PROTOCOL.md 5.7): once the task is terminal (at once if it already is), its
    summary ``{id, title, state, creator, target, assignee, resource, createdAt, updatedAt}`` with
    ``done: true``; ``{done: false}`` if it is not terminal after at most
    ``min(timeout, RELAYNET_MAX_WAIT_SECONDS)``. An unknown id is 404 at once."""
    deadline = time.monotonic() + min(timeout_s, settings().max_wait)
    while True:
        task = tasks.load_task(principal.network_id, task_id)
        if task["state"] in TERMINAL:
            return {**tasks.summary(task), "done": True}
        if time.monotonic() >= deadline:
            return {"done": False}
        time.sleep(min(WAIT_POLL_SECONDS, max(0.0, deadline - time.monotonic())))

