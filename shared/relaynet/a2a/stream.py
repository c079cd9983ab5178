"""A2A 1.0 streaming as Relaynet serves it where it can stream (docs/protocol.md 13.5): what a
``SendStreamingMessage`` or ``SubscribeToTask`` stream carries, decided from the ``Task`` views
GetTask answers (relaynet.a2a.wire.task_view); the transport (Server-Sent Events on the local
stack, relaynet_local.a2a_stream) only reads the task again when it may have changed.

A stream is a sequence of JSON-RPC responses, each with the request's ``id`` and a
``StreamResponse`` as ``result``:

1. ``{"task": Task}``: the task as it is when the stream opens (for SendStreamingMessage, the task
   the message created or continued);
2. then, each time the task is read again and differs: one ``{"artifactUpdate": ...}`` per
   artifact not sent yet (before the status, so a client has a completed task's artifacts when it
   sees COMPLETED), and one ``{"statusUpdate": ...}`` when the Relaynet state or the status
   message changed;
3. the stream ends after the event that puts the task in a terminal state (COMPLETED, FAILED,
   CANCELED) or an interrupted one (INPUT_REQUIRED: the agent waits for the client; a follow-up
   SendStreamingMessage with the ``taskId`` opens the next stream), as A2A 1.0 says a stream does.
"""

from __future__ import annotations

from typing import Any

from relaynet.a2a import wire

#: The streaming methods, and the method each one's opening answer comes from.
OPENING = {"SendStreamingMessage": "SendMessage", "SubscribeToTask": "GetTask"}
#: A2A states after which a stream ends (terminal, or interrupted: the client must act).
FINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED",
                   "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})


def opening_request(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC request whose answer opens the stream of ``request`` (a parsed
    SendStreamingMessage or SubscribeToTask request): SendMessage with the same params (the same
    checks, idempotency and writes), or GetTask of ``params.id`` with its whole history. Any other
    method is returned as it is."""
    method = request.get("method")
    if method not in OPENING:
        return request
    params = request.get("params")
    if method == "SubscribeToTask" and isinstance(params, dict):
        params = {key: v for key, v in params.items() if key != "historyLength"}
    return {**request, "method": OPENING[method], "params": params}


def opening_task(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """The ``Task`` of the opening answer (SendMessage answers ``{task}``, GetTask a Task)."""
    return result["task"] if method == "SendStreamingMessage" else result


def is_final(task: dict[str, Any]) -> bool:
    """Whether a stream ends once ``task`` (an A2A Task view) was sent (module docstring, 3)."""
    return task["status"]["state"] in FINAL


def subscribe_refusal(task: dict[str, Any]) -> wire.A2AError | None:
    """SubscribeToTask on a task already in a terminal state is UnsupportedOperationError (A2A
    1.0: there is nothing left to stream); None otherwise."""
    if task["status"]["state"] not in TERMINAL:
        return None
    return wire.A2AError(wire.UNSUPPORTED_OPERATION, f"task {task['id']!r} is {task['status']['state']}: a "
                         "terminal task has no updates to stream; use GetTask", {"taskId": task["id"]})


def signature(task: dict[str, Any]) -> dict[str, Any]:
    """What a client has seen of a Task view's status: ``{state, messageId}``, the Relaynet
    state (the A2A state follows from it) and the status message's id. A status update is due
    when it changes."""
    return {"state": ((task.get("metadata") or {}).get("relaynet") or {}).get("state"),
            "messageId": (task["status"].get("message") or {}).get("messageId")}


def updates(sent: dict[str, Any], now: dict[str, Any], artifacts_sent: set[str]) -> list[dict[str, Any]]:
    """The StreamResponses that take a client from ``sent`` (the :func:`signature` of what it was
    last sent) to ``now`` (a fresh Task view): the new artifacts (their ids are added to
    ``artifacts_sent``), then a status update if the signature changed. Empty when nothing a
    client sees changed."""
    out: list[dict[str, Any]] = []
    for artifact in now.get("artifacts") or []:
        if artifact["artifactId"] not in artifacts_sent:
            artifacts_sent.add(artifact["artifactId"])
            out.append({"artifactUpdate": {"taskId": now["id"], "contextId": now["contextId"], "artifact": artifact,
                                           "append": False, "lastChunk": True}})
    if signature(now) != {key: sent.get(key) for key in ("state", "messageId")}:
        out.append({"statusUpdate": {"taskId": now["id"], "contextId": now["contextId"], "status": now["status"],
                                     "metadata": now.get("metadata") or {}}})
    return out
