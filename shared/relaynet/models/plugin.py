"""Arguments of the plugin surface (PROTOCOL.md 5), snake_case as AG2's network plugin spells them.

Arguments that only some actions take are optional here; the domain answers 400 naming the
field when an action misses one it needs (:func:`require`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field

from relaynet.errors import InvalidArgument
from relaynet.models.common import Body, Name, Request, Short

ChannelType = Literal["conversation", "discussion", "consulting", "workflow"]
Limit = Annotated[int, Field(ge=1, le=100, description="Items per page, at most 100")]
Cursor = Optional[Annotated[str, Field(min_length=1, max_length=2048, description="nextCursor of the previous page")]]
Timeout = Annotated[int, Field(ge=0, le=86400, description="Seconds to wait in all; the server holds at most 20 s per request")]


def require(request: Request, *fields: str) -> None:
    """400 naming every field in ``fields`` that ``request`` lacks (for action-dependent arguments)."""
    missing = [f for f in fields if getattr(request, f) in (None, "")]
    if missing:
        action = getattr(request, "action", None)
        raise InvalidArgument("; ".join(f"{f}: required for action {action!r}" for f in missing),
                              [{"field": f, "message": f"required for action {action!r}"} for f in missing])


class SayRequest(Request):
    """say (PROTOCOL.md 5.2): a text envelope, if the channel's adapter allows it."""

    content: Body
    channel_id: Annotated[str, Field(min_length=1, max_length=64)]
    audience: Optional[Annotated[list[Name], Field(min_length=1, max_length=64)]] = Field(None, description="Only these participants see it")


class HandoffRequest(Request):
    """handoff (PROTOCOL.md 5.3): a workflow packet; finish closes, target picks, else the graph."""

    channel_id: Annotated[str, Field(min_length=1, max_length=64)]
    content: Optional[Annotated[str, Field(max_length=32768)]] = None
    target: Optional[Name] = Field(None, description="The participant who speaks next")
    finish: Optional[Annotated[str, Field(min_length=1, max_length=32768)]] = Field(None, description="A summary; closes the workflow")
    reason: Optional[Short] = Field(None, description="The close reason with finish (default 'finished')")
    context: Optional[dict[str, Any]] = Field(None, description="Channel variables to set first")
    tool: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = Field(None, description="The routing tool you called, for tool_called conditions")


class ConsultRequest(Request):
    """delegate (PROTOCOL.md 5.4): a one-shot consult that waits for the reply."""

    target: Annotated[Name, Field(description="The agent to consult (an agent name, not a group)")]
    prompt: Body
    capability: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    timeout: Timeout = 300


class PeersRequest(Request):
    """peers (PROTOCOL.md 5.5): ``find`` or ``describe``."""

    action: Literal["find", "describe"]
    query: Optional[Annotated[str, Field(max_length=200)]] = None
    capability: Optional[Annotated[str, Field(max_length=64)]] = None
    sort_by: Optional[Literal["name", "cost", "track_record"]] = None
    limit: Limit = 20
    cursor: Cursor = None
    name: Optional[Name] = None


class ChannelsRequest(Request):
    """channels (PROTOCOL.md 5.6): ``list``, ``open``, ``info`` or ``close``."""

    action: Literal["list", "open", "info", "close"]
    state: Optional[Literal["active", "all"]] = None
    type: Optional[ChannelType] = None
    target: Optional[Union[Name, Annotated[list[Name], Field(min_length=1, max_length=32)]]] = None
    knobs: Optional[dict[str, Any]] = None
    intent: Optional[Annotated[str, Field(max_length=2000)]] = None
    ttl: Optional[Annotated[int, Field(ge=1, le=7 * 86400)]] = None
    message: Optional[Body] = None
    channel_id: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    limit: Limit = 20
    cursor: Cursor = None


class TasksRequest(Request):
    """tasks (PROTOCOL.md 5.7) over the same tasks as the worker surface."""

    action: Literal["progress", "complete", "list", "status", "wait", "cancel"]
    task_id: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    payload: Optional[Union[dict[str, Any], Annotated[str, Field(min_length=1, max_length=32768)]]] = None
    result: Optional[Annotated[str, Field(max_length=32768)]] = None
    reason: Optional[Annotated[str, Field(max_length=8192)]] = None
    scope: Optional[Literal["own", "all"]] = None
    state: Optional[Literal["active", "all"]] = None
    limit: Limit = 20
    cursor: Cursor = None
    timeout: Timeout = 300


class ContextRequest(Request):
    """context (PROTOCOL.md 5.8): ``search`` or ``quote`` over what the caller may see."""

    action: Literal["search", "quote"]
    query: Optional[Annotated[str, Field(min_length=1, max_length=200)]] = None
    scope: Optional[Literal["channel", "knowledge"]] = None
    channel_id: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    thread_id: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    speaker: Optional[Name] = None
    recent_n: Annotated[int, Field(ge=1, le=100)] = 1
    limit: Limit = 10
    cursor: Cursor = None
