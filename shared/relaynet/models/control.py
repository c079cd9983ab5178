"""Arguments of the control surface (PROTOCOL.md 6), camelCase like the worker surface.

Every control tool takes ``networkId?``; without it the representative's active network is used.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field

from relaynet.models import worker
from relaynet.models.common import Body, ClaimId, InstanceId, Name, Request, ResourceKey, Short, TaskId, ThreadId

NetworkId = Optional[Annotated[str, Field(min_length=1, max_length=64, description="A network id (net_...); default: your active network")]]
TaskState = Literal["pending", "offered", "accepted", "working", "blocked", "completed", "failed", "cancelled"]


class ControlRequest(Request):
    """Base of every control tool: the optional ``networkId``."""

    networkId: NetworkId = None


class NoArgs(ControlRequest):
    """A control tool that takes only ``networkId?``."""


Limit = Annotated[int, Field(ge=1, le=100, description="Items per page, at most 100")]
Cursor = Optional[Annotated[str, Field(min_length=1, max_length=2048, description="nextCursor of the previous page")]]


class ListNetworksRequest(ControlRequest):
    """control_list_networks: the networks the representative holds a grant on, in grant order."""

    limit: Limit = 50
    cursor: Cursor = None


class ListAgentsRequest(ControlRequest):
    """control_list_agents: agent definitions with their instances, by name."""

    limit: Limit = 50
    cursor: Cursor = None


class UseNetworkRequest(Request):
    """control_use_network."""

    networkId: Annotated[str, Field(min_length=1, max_length=64)]


class FindAgentsRequest(ControlRequest):
    """control_find_agents: candidates as in network_discover."""

    resourceKey: Optional[ResourceKey] = None
    action: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None


class ListTasksRequest(ControlRequest):
    """control_list_tasks: newest first."""

    status: Optional[TaskState] = None
    limit: Limit = 50
    cursor: Cursor = None


class TaskRequest(ControlRequest):
    """control_task_status."""

    taskId: TaskId


class HistoryRequest(ControlRequest):
    """control_get_history: recent events, newest first."""

    limit: Limit = 50
    cursor: Cursor = None


class ThreadRequest(ControlRequest):
    """control_get_thread."""

    threadId: ThreadId


class ControlAskRequest(worker.AskRequest):
    """control_ask: network_ask's arguments plus ``networkId?``, sent by the representative."""

    networkId: NetworkId = None


class ControlReplyRequest(worker.ReplyRequest):
    """control_reply: network_reply's arguments plus ``networkId?``."""

    networkId: NetworkId = None


class ControlDelegateRequest(worker.DelegateRequest):
    """control_delegate: network_delegate's arguments plus ``networkId?``."""

    networkId: NetworkId = None


class WakeRequest(ControlRequest):
    """control_wake_agent: a notice (and the instance's webhook, if any)."""

    toAgent: Optional[Name] = None
    toInstance: Optional[InstanceId] = None
    reason: Optional[Short] = None


class LaunchRequest(ControlRequest):
    """control_launch_agent."""

    agentName: Name


class TwoStepRequest(ControlRequest):
    """control_stop_agent / control_restart_agent: without ``confirmationId`` step one, with it step two."""

    instanceId: InstanceId
    confirmationId: Optional[Annotated[str, Field(min_length=1, max_length=80)]] = None


class ReleaseClaimRequest(ControlRequest):
    """control_release_claim."""

    claimId: ClaimId


class CancelTaskRequest(ControlRequest):
    """control_cancel_task."""

    taskId: TaskId
    reason: Optional[Annotated[str, Field(max_length=8192)]] = None


class ChannelSendRequest(ControlRequest):
    """control_channel_send: into the representative's conversation with its owner."""

    body: Body
    conversationId: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None


class ChannelHistoryRequest(ControlRequest):
    """control_channel_history."""

    conversationId: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = None
    limit: Limit = 100
    cursor: Cursor = None
