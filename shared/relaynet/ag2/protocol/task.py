"""A task's lifecycle record, which AG2's hub observes and Relaynet stores (AG2 1.2.1
``ag2/task.py``: ``TaskState``, ``TERMINAL_TASK_STATES``, ``TaskSpec``, ``TaskMetadata``).
``from_dict`` is AG2's, defensive as AG2's is for legacy payloads: a missing or malformed
``spec`` becomes ``TaskSpec(title="")``, ``created_at`` and ``error`` are made strings, a
missing ``state`` is ``created``; a missing ``task_id``/``owner_id`` raises ``KeyError`` and an
unknown state ``ValueError``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field

from relaynet.ag2.protocol.base import WireModel, enum_field

__all__ = ("TERMINAL_TASK_STATES", "TaskMetadata", "TaskSpec", "TaskState")


class TaskState(str, Enum):
    CREATED = "created"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


#: States a task never leaves.
TERMINAL_TASK_STATES: frozenset[TaskState] = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.EXPIRED,
                                                        TaskState.CANCELLED})


class TaskSpec(WireModel):
    """What the task does; ``capability`` names the resume capability its outcome counts for."""

    title: str
    description: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    capability: str | None = None


class TaskMetadata(WireModel):
    """One task: times are ISO strings (or None), ``progress`` an object merged by updates,
    ``result`` any JSON value, ``error`` a string."""

    task_id: str
    owner_id: str
    spec: TaskSpec
    state: enum_field(TaskState)
    created_at: str = ""
    started_at: str | None = None
    completed_at: str | None = None
    expires_at: str | None = None
    last_progress_at: str | None = None
    progress: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: str = ""
    channel_id: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskMetadata:
        """AG2's defensive reading (module docstring); other fields are validated as typed."""
        spec_data = data.get("spec")
        if isinstance(spec_data, dict):
            capability = spec_data.get("capability")
            spec = TaskSpec(title=str(spec_data.get("title", "")), description=str(spec_data.get("description", "")),
                            payload=dict(spec_data.get("payload") or {}),
                            capability=capability if isinstance(capability, str) else None)
        else:
            spec = TaskSpec(title="")
        state = data.get("state", TaskState.CREATED.value)
        return cls(task_id=str(data["task_id"]), owner_id=str(data["owner_id"]), spec=spec,
                   state=TaskState(state) if isinstance(state, str) else state,
                   created_at=str(data.get("created_at", "")), started_at=data.get("started_at"),
                   completed_at=data.get("completed_at"), expires_at=data.get("expires_at"),
                   last_progress_at=data.get("last_progress_at"), progress=dict(data.get("progress") or {}),
                   result=data.get("result"), error=str(data.get("error", "")), channel_id=data.get("channel_id"))
