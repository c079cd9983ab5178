"""A2A 1.0's JSON shapes (the ProtoJSON mapping of ``a2a.proto``: camelCase fields, enums as
their names) as Relaynet reads and writes them, and the mapping of a Relaynet task onto an A2A
``Task`` (docs/protocol.md 13.3).

Requests are validated with pydantic models of the fields Relaynet acts on; fields it does not
act on are accepted and ignored, as a ProtoJSON reader of a newer minor version would. Errors are
:class:`A2AError` with the JSON-RPC codes of A2A 1.0 (section 9 of the specification; the SDK's
``a2a.utils.errors.JSON_RPC_ERROR_CODE_MAP`` lists the same).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from relaynet import clock
from relaynet.models.common import NAME_PATTERN

PROTOCOL_VERSION = "1.0"

#: Relaynet task state -> A2A TaskState (docs/protocol.md 13.3).
STATES = {
    "pending": "TASK_STATE_SUBMITTED", "offered": "TASK_STATE_SUBMITTED",
    "accepted": "TASK_STATE_WORKING", "working": "TASK_STATE_WORKING",
    "blocked": "TASK_STATE_INPUT_REQUIRED", "completed": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED", "cancelled": "TASK_STATE_CANCELED",
}
#: A2A TaskState -> the Relaynet states it stands for (ListTasks' ``status`` filter).
RELAYNET_STATES: dict[str, frozenset[str]] = {
    a2a: frozenset(s for s, mapped in STATES.items() if mapped == a2a) for a2a in set(STATES.values())
}
TASK_STATES = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
               "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED",
               "TASK_STATE_AUTH_REQUIRED")


class A2AError(Exception):
    """An A2A JSON-RPC error: ``code`` (int), ``message``, optional ``data`` (JSON)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def body(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


JSON_PARSE = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
EXTENDED_CARD_NOT_CONFIGURED = -32007
VERSION_NOT_SUPPORTED = -32009


#: The JSON-RPC methods Relaynet serves (relaynet.http.a2a maps each to relaynet.a2a.service).
SERVED = ("SendMessage", "GetTask", "ListTasks", "CancelTask", "CreateTaskPushNotificationConfig",
          "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig")
#: A2A 1.0 methods this function does not serve, and the error each answers (the card says so).
REFUSED: dict[str, tuple[int, str]] = {
    # API Gateway's HTTP API cannot stream; the local stack streams before its function is asked
    # (relaynet_local.a2a_stream, docs/protocol.md 13.5)
    "SendStreamingMessage": (UNSUPPORTED_OPERATION, "streaming is not served here (the agent card says "
                             "capabilities.streaming false): use SendMessage, then GetTask"),
    "SubscribeToTask": (UNSUPPORTED_OPERATION, "streaming is not served here: poll GetTask"),
    "GetExtendedAgentCard": (EXTENDED_CARD_NOT_CONFIGURED, "this agent has no extended card"),
}


_NAME = re.compile(NAME_PATTERN)


def is_name(value: str) -> bool:
    """Whether ``value`` can be a network or agent name (PROTOCOL.md 9's pattern): a path segment
    that is not cannot name anything, so it is a 404 before any read (a key over DynamoDB's
    2048 bytes would otherwise fail the read itself)."""
    return bool(_NAME.fullmatch(value))


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class Part(_Lenient):
    """A message part: exactly one of ``text``, ``raw``, ``url``, ``data`` (a2a.proto's oneof);
    Relaynet tasks take ``text`` parts only (others: ContentTypeNotSupported)."""

    text: Optional[str] = None
    raw: Optional[str] = None
    url: Optional[str] = None
    data: Any = None
    mediaType: Optional[str] = None
    filename: Optional[str] = None

    @model_validator(mode="after")
    def _one_content(self) -> "Part":
        given = [name for name in ("text", "raw", "url", "data") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"a part holds one of text, raw, url, data, not {' and '.join(given)}")
        return self


class Message(_Lenient):
    """A2A ``Message``: ``messageId`` (the idempotency key of SendMessage), ``taskId`` (a follow-up),
    ``contextId``, ``role`` (``ROLE_USER``: a client sends to the agent), ``parts`` (1..21)."""

    messageId: Annotated[str, Field(min_length=1, max_length=255)]
    role: Literal["ROLE_USER"]
    parts: Annotated[list[Part], Field(min_length=1, max_length=21)]
    taskId: Optional[str] = None
    contextId: Optional[str] = None


class AuthenticationInfo(_Lenient):
    """A2A ``AuthenticationInfo``: ``scheme`` (e.g. ``Bearer``) and ``credentials``."""

    scheme: str = Field(min_length=1, max_length=64)
    credentials: Optional[str] = Field(None, max_length=4096)


class PushConfig(_Lenient):
    """A2A ``TaskPushNotificationConfig`` without its task: what SendMessage's
    ``configuration.taskPushNotificationConfig`` carries (its task is the message's). The
    checks that are not shapes (the URL rules, the token's length) are relaynet.a2a.push.check's."""

    id: Optional[str] = None
    url: str = Field(min_length=1, max_length=2048)
    token: Optional[str] = None
    authentication: Optional[AuthenticationInfo] = None


class PushConfigParams(PushConfig):
    """CreateTaskPushNotificationConfig's params: a ``TaskPushNotificationConfig``."""

    taskId: str = Field(min_length=1)


class PushConfigRef(_Lenient):
    """Get/DeleteTaskPushNotificationConfig's params: the task and the config id."""

    taskId: str = Field(min_length=1)
    id: str = Field(min_length=1)


class ListPushConfigsParams(_Lenient):
    """ListTaskPushNotificationConfigs' params (a task's configs fit one page)."""

    taskId: str = Field(min_length=1)
    pageSize: Optional[int] = Field(None, ge=1, le=100)
    pageToken: Optional[str] = None


class SendConfiguration(_Lenient):
    historyLength: Optional[Annotated[int, Field(ge=0)]] = None
    returnImmediately: Optional[bool] = None
    taskPushNotificationConfig: Optional[PushConfig] = None


class SendMessageParams(_Lenient):
    message: Message
    configuration: Optional[SendConfiguration] = None


class GetTaskParams(_Lenient):
    id: Annotated[str, Field(min_length=1)]
    historyLength: Optional[Annotated[int, Field(ge=0)]] = None


class CancelTaskParams(_Lenient):
    id: Annotated[str, Field(min_length=1)]


class ListTasksParams(_Lenient):
    contextId: Optional[str] = None
    status: Optional[str] = None
    pageSize: Annotated[int, Field(ge=1, le=100)] = 50
    pageToken: Optional[str] = None
    historyLength: Optional[Annotated[int, Field(ge=0)]] = None
    statusTimestampAfter: Optional[str] = None
    includeArtifacts: bool = False


def belongs(task: dict[str, Any], agent: str) -> bool:
    """Whether the endpoint of ``agent`` shows ``task`` (docs/protocol.md 13.2): it was delegated
    to that agent by name, or an instance of it took part in its history."""
    if (task.get("target") or {}).get("agent") == agent:
        return True
    return any((h.get("actor") or {}).get("agent") == agent for h in task.get("history") or [])


def task_not_found(task_id: str, agent: str) -> A2AError:
    """TaskNotFoundError for a task the endpoint of ``agent`` does not show (:func:`belongs`)."""
    return A2AError(TASK_NOT_FOUND, f"no task {task_id!r} of agent {agent!r}", {"taskId": task_id})


def _text_message(message_id: str, role: str, text: str, task: dict[str, Any]) -> dict[str, Any]:
    return {"messageId": message_id, "role": role, "parts": [{"text": text}], "taskId": task["id"],
            "contextId": task["threadId"]}


def _status_message(task: dict[str, Any]) -> dict[str, Any] | None:
    """The newest history entry's reason (a blocked reason, a completion's evidence, a failure's
    cause) as an agent message, or None."""
    history = task.get("history") or []
    last = history[-1] if history else {}
    if not last.get("reason") or last.get("state") != task["state"]:
        return None
    return _text_message(f"{task['id']}:status:{len(history) + int(task.get('historyDropped') or 0)}",
                         "ROLE_AGENT", last["reason"], task)


def artifact(item: dict[str, Any]) -> dict[str, Any]:
    """A Relaynet artifact (relaynet.tasks.artifact_view) as an A2A ``Artifact``: its URI as a
    ``url`` part, the label as ``name``, Relaynet's type and ref in ``metadata.relaynet``."""
    out: dict[str, Any] = {"artifactId": item["artifactId"], "parts": [{"url": item["uri"]}],
                           "metadata": {"relaynet": {k: item[k] for k in ("type", "ref", "publisher", "createdAt")
                                                     if item.get(k) is not None}}}
    if item.get("label"):
        out["name"] = item["label"]
    return out


def history(task: dict[str, Any], messages: list[dict[str, Any]], length: int | None) -> list[dict[str, Any]]:
    """A2A ``Task.history``: the objective (with the acceptance criteria) as the first user
    message, then the task thread's messages oldest first (the creator's as ``ROLE_USER``, the
    rest as ``ROLE_AGENT``); the newest ``length`` of them when given (0: none)."""
    creator = task.get("creator") or {}
    first = "\n".join([task["objective"], *(f"- {c}" for c in task.get("acceptanceCriteria") or [])])
    out = [_text_message(f"{task['id']}:objective", "ROLE_USER", first, task)]
    for m in messages:
        sender = m.get("from") or {}
        mine = (sender.get("agent") and sender.get("agent") == creator.get("agent")) or \
            (sender.get("representative") and sender.get("representative") == creator.get("representative"))
        out.append(_text_message(m["id"], "ROLE_USER" if mine else "ROLE_AGENT", m.get("body") or "", task))
    if length is None:
        return out
    return out[len(out) - length:] if length else []


def task_view(task: dict[str, Any], artifacts: list[dict[str, Any]] | None,
              messages: list[dict[str, Any]] | None, history_length: int | None) -> dict[str, Any]:
    """A stored Relaynet task as an A2A ``Task`` (docs/protocol.md 13.3): ``id`` the task id,
    ``contextId`` its thread, ``status`` {state, timestamp (updatedAt), message (the reason of
    the newest transition, if any)}, ``artifacts`` (omitted when ``artifacts`` is None),
    ``history`` (omitted when ``messages`` is None), ``metadata.relaynet`` {state, assignee,
    acceptanceCriteria, title}."""
    status: dict[str, Any] = {"state": STATES[task["state"]], "timestamp": task["updatedAt"]}
    message = _status_message(task)
    if message is not None:
        status["message"] = message
    out: dict[str, Any] = {
        "id": task["id"], "contextId": task["threadId"], "status": status,
        "metadata": {"relaynet": {"state": task["state"], "title": task.get("title"),
                                  "assignee": task.get("assignee"),
                                  "acceptanceCriteria": task.get("acceptanceCriteria") or []}},
    }
    if artifacts is not None:
        out["artifacts"] = [artifact(a) for a in artifacts]
    if messages is not None:
        out["history"] = history(task, messages, history_length)
    return out

