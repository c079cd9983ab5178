"""The worker surface's results (PROTOCOL.md 4) and the endpoints beside it (docs/protocol.md)."""

from __future__ import annotations

from pydantic import Field

from relaynet.models.results.common import (Address, Candidate, Capability, Delegated, Entity, Envelope, PushConfigView,
                                            PushStatus, Released, Responsibility, Result, Sent, SupervisorStatus,
                                            TaskResult)


class InstanceView(Entity):
    """An instance as it sees itself or an operator sees it."""

    id: str
    status: str
    availability: str
    capabilities: list[Capability]
    createdAt: str
    lastSeenAt: str | None
    push: PushStatus | None = None
    supervisor: SupervisorStatus | None = None


class AgentView(Entity):
    """An agent definition: operator-set capabilities, groups and responsibilities."""

    name: str
    description: str
    capabilities: list[Capability]
    groups: list[str]
    responsibilities: list[Responsibility]
    push: PushConfigView | None = None


class NetworkRef(Entity):
    id: str
    name: str


class NetworkWhoamiResult(Result):
    """network_whoami: this instance, its agent definition and the network."""

    instance: InstanceView
    agent: AgentView
    network: NetworkRef


class DirectoryInstance(Entity):
    id: str
    availability: str
    lastSeenAt: str | None


class DirectoryAgent(Entity):
    name: str
    description: str
    groups: list[str]
    capabilities: list[Capability]
    instances: list[DirectoryInstance]


class Group(Entity):
    slug: str
    members: list[str]


class ResourceHolder(Entity):
    agent: str
    actions: list[str]
    priority: int


class Resource(Entity):
    key: str
    responsibilities: list[ResourceHolder]


class NetworkDiscoverResult(Result):
    """network_discover: agents, groups, resources, recent tasks; ranked candidates when asked."""

    agents: list[DirectoryAgent]
    groups: list[Group]
    resources: list[Resource]
    recentTasks: list[dict[str, object]]
    candidates: list[Candidate] | None = None


class NetworkAskResult(Sent):
    """network_ask: the message, its thread and its recipients."""


class Message(Entity):
    """A delivered message (PROTOCOL.md 4.4): kind, addresses, text and the instructions to act."""

    id: str
    kind: str
    from_: Address = Field(alias="from")
    to: Address
    subject: str
    createdAt: str
    instructions: str
    threadId: str | None = None
    body: str | None = None
    resource: str | None = None
    channelId: str | None = None
    envelope: Envelope | None = None
    taskId: str | None = None
    state: str | None = None


class NetworkInboxResult(Result):
    """network_inbox: at most 100 messages, oldest first; ``more``: call again."""

    messages: list[Message]
    more: bool


class NetworkReplyResult(Sent):
    """network_reply: the reply, its thread and its recipient."""


class NetworkDelegateResult(Delegated):
    """network_delegate: the new task."""


class NetworkTaskGetResult(TaskResult):
    """network_task_get: the task with history, progress, artifacts and active claims."""


class NetworkTaskUpdateResult(TaskResult):
    """network_task_update: the task after the move."""


class NetworkClaimResult(Result):
    """network_claim: the claim taken (or renewed) and its fencing token."""

    claimId: str
    scopeType: str
    scope: str
    resourceId: str | None
    taskId: str | None
    expiresAt: str
    fencingToken: int


class NetworkReleaseResult(Released):
    """network_release."""


class NetworkPublishArtifactResult(Result):
    """network_publish_artifact: the artifact recorded."""

    artifactId: str
    uri: str
    label: str
    type: str
    taskId: str | None
    ref: str


class NetworkRegisterCapabilitiesResult(Result):
    """network_register_capabilities: the declaration now in force."""

    registered: list[Capability]
    count: int


class PathConflict(Entity):
    """Another instance's live claim covering a checked path."""

    claimId: str
    scope: str
    holder: Address
    expiresAt: str
    taskId: str | None


class PathCheck(Entity):
    """One checked path and the claims of other instances that cover it (none: free to change)."""

    path: str
    conflicts: list[PathConflict]


class ClaimsCheckResult(Result):
    """claims_check: each path in the order given, and how many of them conflict."""

    results: list[PathCheck]
    conflicting: int


class InboxSummaryResult(Result):
    """inbox_summary: undelivered messages by kind, and the oldest one's createdAt."""

    undelivered: int
    byKind: dict[str, int]
    oldestCreatedAt: str | None
    complete: bool


class PushConfigSetResult(Result):
    """push_config_set: the config in force (its token never echoed) and where it comes from."""

    push: PushConfigView
    source: str


class SupervisorStateSetResult(Result):
    """supervisor_state_set: the run state as stored, as control_list_agents shows it."""

    supervisor: SupervisorStatus


class PushConfigDeleteResult(Result):
    """push_config_delete: whether there was one to remove."""

    removed: bool


