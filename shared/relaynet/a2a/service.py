"""The A2A methods on Relaynet tasks (docs/protocol.md 13.2): each is the worker surface's domain
call (relaynet.tasks, relaynet.messaging) made as the caller, on the tasks of one agent
definition (the endpoint's).

A task *belongs* to the endpoint's agent when it was delegated to that agent by name or an
instance of it took it (a history entry by one of its instances). Other tasks, and tasks of other
networks, are ``TaskNotFoundError``: an A2A endpoint shows only its own agent's tasks.

The caller is bound to the endpoint's network first (:func:`bind`): an instance token only to
its own network, a representative token with the ``delegate`` grant on it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from relaynet import claims, clock, cursors, messaging, tasks
from relaynet.a2a import push, wire
from relaynet.a2a.wire import A2AError, belongs
from relaynet.control.grants import scope
from relaynet.errors import InvalidArgument, InvalidTransition, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.models.worker import AskRequest, DelegateRequest, TaskUpdateRequest
from relaynet.store import directory as dir_store
from relaynet.store import mailboxes as mail_store
from relaynet.store import tasks as task_store
from relaynet.taskstate import TERMINAL

CANCEL_REASON = "cancelled by an A2A client (CancelTask)"


def bind(principal: Principal, network: str, agent: str) -> Principal:
    """The caller as it acts on the endpoint ``/a2a/<network>/<agent>`` (names): an instance
    token of that network as itself, a representative bound to the network. Raises NotFound (no
    such network, agent, or not the instance's network; no grant on it) and PermissionDenied (a
    representative below ``delegate``: PROTOCOL.md 6)."""
    net = dir_store.network_id(network) if wire.is_name(network) else None
    if principal.kind == "instance":
        if net is None or net != principal.network_id:
            raise NotFound(f"no network {network[:64]!r} for this token")
        bound = principal
    else:
        if net is None:
            raise NotFound(f"no network {network[:64]!r} for this representative")
        _, bound = scope(principal, net, "delegate")
    if not wire.is_name(agent) or dir_store.agent(bound.network_id, agent) is None:
        raise NotFound(f"no agent {agent[:64]!r} in network {network!r}")
    return bound


def _texts(message: wire.Message) -> list[str]:
    texts = []
    for n, part in enumerate(message.parts):
        if part.text is None:
            kind = "a file" if part.raw is not None or part.url is not None else "a data" if part.data is not None else "an empty"
            raise A2AError(wire.CONTENT_TYPE_NOT_SUPPORTED,
                           f"message.parts[{n}] is {kind} part: Relaynet tasks take text parts (text/plain)",
                           {"field": f"message.parts[{n}]"})
        texts.append(part.text)
    return texts


def _part_field(loc: tuple) -> str:
    """Where in the message a DelegateRequest/AskRequest field came from: the objective and the
    body are the first text part, criterion ``i`` the part ``i + 1``."""
    if loc[:1] == ("acceptanceCriteria",) and len(loc) > 1 and isinstance(loc[1], int):
        return f"message.parts[{loc[1] + 1}]"
    if loc[:1] in (("objective",), ("body",)):
        return "message.parts[0]"
    return "message.parts"


def _invalid(exc: ValidationError) -> A2AError:
    fields = [{"field": _part_field(tuple(e["loc"])), "message": e["msg"]} for e in exc.errors()]
    return A2AError(wire.INVALID_PARAMS, "invalid params: " + "; ".join(f"{f['field']}: {f['message']}" for f in fields),
                    {"fields": fields})


def _task(net: str, task_id: str, agent: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    task, artifacts = task_store.with_artifacts(net, task_id)
    if task is None or not belongs(task, agent):
        raise wire.task_not_found(task_id, agent)
    return task, artifacts


def _view(net: str, task: dict[str, Any], artifacts: list[dict[str, Any]] | None, history_length: int | None) -> dict[str, Any]:
    messages = None
    if history_length != 0:
        messages = mail_store.thread_messages(net, task["threadId"])
    return wire.task_view(task, [tasks.artifact_view(a) for a in artifacts] if artifacts is not None else None,
                          messages, history_length)


_PUSH_FIELD = "configuration.taskPushNotificationConfig."


def send_message(p: Principal, agent: str, params: wire.SendMessageParams) -> dict[str, Any]:
    """SendMessage: ``{"task": Task}``. Without ``message.taskId`` it delegates a new task to
    ``agent`` (the first text part is the objective, each further one an acceptance criterion);
    with it, the text is an ask in that task's thread, to its assignee (or the agent while nobody
    holds it). ``configuration.taskPushNotificationConfig`` sets a push config on the task
    (relaynet.a2a.push.create), checked before anything is written. Raises A2AError
    (ContentTypeNotSupported: a non-text part; InvalidParams: an objective, criterion or push
    config out of bounds; TaskNotFound; UnsupportedOperation: the task is terminal) and the domain's errors (PermissionDenied: not a participant of the task's thread)."""
    texts = _texts(params.message)
    history_length = params.configuration.historyLength if params.configuration else None
    net = p.network_id
    push_config = params.configuration.taskPushNotificationConfig if params.configuration else None
    if push_config is not None:  # checked before anything is written
        push.check(push_config, _PUSH_FIELD)
    if not params.message.taskId:
        try:
            req = DelegateRequest(objective=texts[0], acceptanceCriteria=texts[1:] or None, toAgent=agent)
        except ValidationError as exc:
            raise _invalid(exc) from None
        task_id = tasks.delegate(p, req)["taskId"]
        if push_config is not None:
            push.create(p, agent, wire.PushConfigParams(taskId=task_id, **push_config.model_dump()))
        task, artifacts = _task(net, task_id, agent)
        return {"task": _view(net, task, artifacts, history_length)}
    task, _ = _task(net, params.message.taskId, agent)
    if task["state"] in TERMINAL:
        raise A2AError(wire.UNSUPPORTED_OPERATION, f"task {task['id']!r} is {task['state']}: it takes no more messages; "
                       "send one without taskId to start a new task", {"taskId": task["id"], "state": task["state"]})
    to = {"toInstance": task["assignee"]} if task.get("assignee") else {"toAgent": agent}
    try:
        req = AskRequest(body="\n\n".join(texts), threadId=task["threadId"], taskId=task["id"], **to)
    except ValidationError as exc:
        raise _invalid(exc) from None
    messaging.ask(p, req)
    if push_config is not None:
        push.create(p, agent, wire.PushConfigParams(taskId=task["id"], **push_config.model_dump()))
    task, artifacts = _task(net, task["id"], agent)
    return {"task": _view(net, task, artifacts, history_length)}


def get_task(p: Principal, agent: str, params: wire.GetTaskParams) -> dict[str, Any]:
    """GetTask: the ``Task`` with its artifacts and the newest ``historyLength`` messages (all
    when absent). Raises A2AError TaskNotFound."""
    task, artifacts = _task(p.network_id, params.id, agent)
    return _view(p.network_id, task, artifacts, params.historyLength)


def _creator_is(task: dict[str, Any], p: Principal) -> bool:
    creator = task.get("creator") or {}
    if p.kind == "instance":
        return creator.get("agent") == p.agent
    return creator.get("representative") == p.rep


def list_tasks(p: Principal, agent: str, params: wire.ListTasksParams, max_read: int = 1000) -> dict[str, Any]:
    """ListTasks: the tasks the caller (its agent; a representative: itself) created for
    ``agent``, newest *update* first (GSI4, docs/protocol.md 13.2), filtered by ``contextId``,
    ``status`` and ``statusTimestampAfter`` (the walk stops at the first task updated at or
    before it); ``pageSize`` per page, ``nextPageToken`` "" at the end. A task updated while a
    client pages moves to the front, as A2A's order says. Artifacts only with
    ``includeArtifacts`` (a Query per task); history only with ``historyLength`` > 0. Raises
    A2AError InvalidParams (bad status, timestamp or page token)."""
    if params.status is not None and params.status not in wire.TASK_STATES:
        raise A2AError(wire.INVALID_PARAMS, f"status must be one of {', '.join(wire.TASK_STATES)}",
                       {"fields": [{"field": "status", "message": "unknown TaskState"}]})
    after_ms = None
    if params.statusTimestampAfter is not None:
        try:
            after_ms = clock.parse_iso(params.statusTimestampAfter)
        except ValueError:
            raise A2AError(wire.INVALID_PARAMS, "statusTimestampAfter must be an RFC 3339 timestamp",
                           {"fields": [{"field": "statusTimestampAfter", "message": "not a timestamp"}]}) from None
    wanted = wire.RELAYNET_STATES.get(params.status, frozenset()) if params.status else None
    listing = cursors.Listing("a2a.ListTasks.byUpdate", p, agent=agent, status=params.status,
                              contextId=params.contextId, after=params.statusTimestampAfter)
    try:
        start = listing.position(params.pageToken or None)  # [updatedAt, [ids already listed at it]]
    except InvalidArgument:
        raise A2AError(wire.INVALID_PARAMS, "pageToken is not a token this list gave",
                       {"fields": [{"field": "pageToken", "message": "unknown page token"}]}) from None

    def accept(task: dict[str, Any]) -> bool:
        return (_creator_is(task, p) and belongs(task, agent)
                and (wanted is None or task["state"] in wanted)
                and (params.contextId is None or task.get("threadId") == params.contextId))

    def candidates() -> Any:
        listed = set(start[1]) if start else set()
        for task in task_store.walk_recent(p.network_id, start[0] if start else None, min(max_read, 100)):
            if after_ms is not None and clock.parse_iso(task["updatedAt"]) <= after_ms:
                return  # newest update first: every further task is older
            if start and task["updatedAt"] == start[0] and task["id"] in listed:
                continue  # listed on an earlier page (same millisecond as its last task)
            yield task

    run: dict[str, Any] = {"at": start[0] if start else None, "ids": list(start[1]) if start else []}
    memo: dict[str, list[Any]] = {}

    def position(task: dict[str, Any]) -> list[Any]:
        """Where the list goes on after ``task``: its ``updatedAt`` and every task id of that
        millisecond walked so far (ties have no defined order in the index)."""
        if task["id"] not in memo:
            if task["updatedAt"] != run["at"]:
                run["at"], run["ids"] = task["updatedAt"], []
            run["ids"].append(task["id"])
            memo[task["id"]] = [run["at"], list(run["ids"])]
        return memo[task["id"]]

    page, last = cursors.page_scan(candidates(), position, accept, params.pageSize, max_read)
    length = params.historyLength or 0
    out = []
    for task in page:
        artifacts = task_store.with_artifacts(p.network_id, task["id"])[1] if params.includeArtifacts else None
        out.append(_view(p.network_id, task, artifacts, length))
    return {"tasks": out, "nextPageToken": listing.next_cursor(last) or "", "pageSize": params.pageSize}


def cancel_task(p: Principal, agent: str, params: wire.CancelTaskParams) -> dict[str, Any]:
    """CancelTask: the creator's cancel (network_task_update ``cancelled``), releasing the task's
    claims; an already cancelled task is answered as it is (idempotent). Raises A2AError
    TaskNotFound, TaskNotCancelable (completed or failed; the caller is not the creator)."""
    net = p.network_id
    task, artifacts = _task(net, params.id, agent)
    if task["state"] != "cancelled":
        if task["state"] in TERMINAL:
            raise A2AError(wire.TASK_NOT_CANCELABLE, f"task {task['id']!r} is {task['state']}",
                           {"taskId": task["id"], "state": task["state"]})
        try:
            tasks.update(p, TaskUpdateRequest(taskId=task["id"], status="cancelled", reason=CANCEL_REASON),
                         on_terminal=claims.release_for_task)
        except PermissionDenied as exc:
            raise A2AError(wire.TASK_NOT_CANCELABLE, f"task {task['id']!r}: {exc.message}", {"taskId": task["id"]}) from None
        except InvalidTransition:
            pass  # it turned terminal meanwhile: answered below as it now is
        task, artifacts = _task(net, task["id"], agent)
        if task["state"] != "cancelled":
            raise A2AError(wire.TASK_NOT_CANCELABLE, f"task {task['id']!r} is {task['state']}",
                           {"taskId": task["id"], "state": task["state"]})
    return _view(net, task, artifacts, None)
