"""The control surface's results (PROTOCOL.md 6): what a representative reads and changes."""

from __future__ import annotations

from pydantic import Field

from relaynet.models.results.common import (Address, Candidate, Claim, Delegated, Entity, Released, Result, Sent,
                                            TaskResult, Task)
from relaynet.models.results.worker import AgentView, InstanceView


class Representative(Entity):
    id: str
    name: str


class Grant(Entity):
    """A network the representative holds a grant on, and the grant level."""

    networkId: str
    name: str
    grant: str


class ControlWhoamiResult(Result):
    """control_whoami: the representative, its grants and the active network."""

    representative: Representative
    grants: list[Grant]
    activeNetwork: str | None


class ControlListNetworksResult(Result):
    """control_list_networks: one page of grants."""

    networks: list[Grant]
    nextCursor: str | None


class ControlUseNetworkResult(Result):
    activeNetwork: str


class InstanceCounts(Entity):
    available: int
    working: int
    offline: int
    stopped: int


class TaskCounts(Entity):
    pending: int
    offered: int
    accepted: int
    working: int
    blocked: int
    completed: int
    failed: int
    cancelled: int


class OpenChannel(Entity):
    channel_id: str
    type: str
    participants: list[str]
    next_speaker: str | None
    intent: str | None
    created_at: str
    expires_at: str


class ControlNetworkStatusResult(Result):
    """control_network_status: counts, live claims and open channels."""

    networkId: str
    agents: int
    instances: InstanceCounts
    tasks: TaskCounts
    activeClaims: int
    openChannels: int
    claims: list[Claim]
    channels: list[OpenChannel]


class AgentWithInstances(AgentView):
    instances: list[InstanceView]


class ControlListAgentsResult(Result):
    """control_list_agents: one page of agent definitions with their instances."""

    agents: list[AgentWithInstances]
    nextCursor: str | None


class ControlFindAgentsResult(Result):
    candidates: list[Candidate]


class ControlListTasksResult(Result):
    """control_list_tasks: one page of tasks, newest first."""

    tasks: list[Task]
    nextCursor: str | None


class ControlTaskStatusResult(TaskResult):
    """control_task_status: one task in full."""


class StuckTask(Task):
    """A task that is not moving: ``why`` is ``blocked`` (with the blocking ``reason``) or
    ``no_eligible_instance`` (pending, and nobody may take it)."""

    why: str
    reason: str | None = None


class StuckInstance(Entity):
    """An offline instance that holds tasks (their ids)."""

    instanceId: str
    agent: str
    lastSeenAt: str
    tasks: list[str]


class ControlListBlockedResult(Result):
    """control_list_blocked: blocked or unroutable tasks, and offline instances holding tasks."""

    tasks: list[StuckTask]
    instances: list[StuckInstance]


class Event(Entity):
    """One event of the network's history; the ids present depend on ``kind``."""

    id: str
    kind: str
    actor: Address | None
    summary: str
    at: str
    claimId: str | None = None
    scope: str | None = None  #: a claim's scope (claim events written since issue 26's claim_released)
    state: str | None = None
    taskId: str | None = None
    instanceId: str | None = None
    messageId: str | None = None
    threadId: str | None = None
    fromAgent: str | None = None
    toName: str | None = None
    recipients: list[str] | None = None
    channelId: str | None = None


class ControlGetHistoryResult(Result):
    events: list[Event]
    nextCursor: str | None


class Thread(Entity):
    id: str
    subject: str
    taskId: str | None
    resource: str | None
    createdAt: str
    participants: list[str]


class ThreadMessage(Entity):
    id: str
    threadId: str
    kind: str
    from_: Address = Field(alias="from")
    to: Address
    subject: str
    body: str
    createdAt: str


class ControlGetThreadResult(Result):
    thread: Thread
    messages: list[ThreadMessage]


class Node(Entity):
    id: str
    kind: str
    label: str
    availability: str | None = None


class Edge(Entity):
    from_: str = Field(alias="from")
    to: str
    kind: str
    label: str | None = None


class ControlGetGraphResult(Result):
    """control_get_graph: agents, instances, groups and resources; delegations, asks, claims, membership."""

    nodes: list[Node]
    edges: list[Edge]


class ControlAskResult(Sent):
    """control_ask."""


class ControlReplyResult(Sent):
    """control_reply."""


class ControlDelegateResult(Delegated):
    """control_delegate."""


class ControlWakeAgentResult(Result):
    """control_wake_agent: the notice sent."""

    messageId: str
    threadId: str
    to: Address


class ControlLaunchAgentResult(Result):
    """control_launch_agent: the new instance and its token (shown once)."""

    instanceId: str
    token: str


class TwoStepResult(Result):
    """First call: ``confirmationId`` and ``expiresAt``; second: ``action`` done on ``instanceId``."""

    instanceId: str
    confirmationId: str | None = None
    expiresAt: str | None = None
    action: str | None = None


class ControlStopAgentResult(TwoStepResult):
    """control_stop_agent: done, the instance's status, claims released and tasks requeued."""

    status: str | None = None
    releasedClaims: int | None = None
    requeuedTasks: list[str] | None = None


class ControlRestartAgentResult(TwoStepResult):
    """control_restart_agent: done, the new token (shown once)."""

    token: str | None = None


class ControlReleaseClaimResult(Released):
    """control_release_claim."""


class ControlCancelTaskResult(TaskResult):
    """control_cancel_task: the task, cancelled."""


class ControlChannelSendResult(Result):
    messageId: str
    conversationId: str


class OwnerMessage(Entity):
    id: str
    conversationId: str
    from_: Address = Field(alias="from")
    body: str
    createdAt: str


class ControlChannelHistoryResult(Result):
    """control_channel_history: the conversation with the owner, oldest first."""

    messages: list[OwnerMessage]
    nextCursor: str | None
