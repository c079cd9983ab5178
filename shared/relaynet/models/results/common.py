"""Entities that several tools answer with (addresses, tasks, claims, artifacts, channels), and
the bases of every result model.

Results are open for additive change (PROTOCOL.md 2: clients ignore fields they do not know), so
the models allow extra fields; tests/api/conftest.py refuses any field a model does not declare,
which keeps these models complete.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Entity(BaseModel):
    """Base of the objects inside a result."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)


class Result(Entity):
    """Base of a tool's or endpoint's 200 body."""


class Address(Entity):
    """Who sent, receives or acted (PROTOCOL.md 3): an agent (and one of its instances), a group,
    a representative or the hub itself (``system``)."""

    agent: str | None = None
    instanceId: str | None = None
    group: str | None = None
    representative: str | None = None
    system: str | None = None


class TaskTarget(Entity):
    """Whom a task was delegated to (PROTOCOL.md 4.6, 4.7): an agent, a group, a pinned instance,
    or, for an untargeted task, the ``resource`` it is routed by."""

    agent: str | None = None
    group: str | None = None
    instanceId: str | None = None
    resource: str | None = None


class Capability(Entity):
    """A declared capability: ``id``, ``name``, ``description``; ``source`` says who declared it."""

    id: str
    name: str
    description: str | None = None
    source: str | None = None


class Responsibility(Entity):
    """An agent's responsibility for a resource (PROTOCOL.md 7): actions and priority."""

    resource: str
    actions: list[str]
    priority: int


class Candidate(Entity):
    """A ranked routing candidate for a resource and/or action (PROTOCOL.md 7)."""

    agent: str
    instanceId: str
    availability: str
    matchingActions: list[str]
    resourceMatch: str
    priority: int
    activeTasks: int


class HistoryEntry(Entity):
    """One task transition: the new state, who made it, when (ISO 8601) and why."""

    state: str
    actor: Address
    at: str
    reason: str | None = None


class Progress(Entity):
    """A progress report on a task (the plugin surface's ``tasks progress``)."""

    payload: dict[str, Any]
    at: str


class Claim(Entity):
    """A live claim (PROTOCOL.md 8): scope, expiry (ISO 8601) and the fencing token."""

    claimId: str
    scopeType: str
    scope: str
    resourceId: str | None
    taskId: str | None
    expiresAt: str
    fencingToken: int
    holder: Address | None = None


class Artifact(Entity):
    """Something an agent produced, by URI (PROTOCOL.md 4.11)."""

    artifactId: str
    uri: str
    label: str
    type: str
    taskId: str | None
    ref: str
    publisher: Address | None = None
    createdAt: str | None = None


class Task(Entity):
    """A task (PROTOCOL.md 4.6-4.8); the full view adds history, progress, artifacts and claims."""

    id: str
    title: str
    state: str
    creator: Address
    target: TaskTarget
    assignee: str | None = None
    createdAt: str
    updatedAt: str
    objective: str | None = None
    acceptanceCriteria: list[str] | None = None
    resource: str | None = None
    attempts: int | None = None
    history: list[HistoryEntry] | None = None
    progress: list[Progress] | None = None
    threadId: str | None = None
    offerExpiresAt: str | None = None
    artifacts: list[Artifact] | None = None
    claims: list[Claim] | None = None


class Envelope(Entity):
    """A channel envelope (PROTOCOL.md 5.6): AG2's fields, ``content`` any JSON value."""

    envelope_id: str
    seq: int
    channel_id: str
    event_type: str
    content: Any
    created_at: str
    sender: str | None = None
    audience: list[str] | None = None
    causation_id: str | None = None


class PushAuthenticationView(Entity):
    """The schemes of a push config's authentication (never its credentials)."""

    schemes: list[str]


class PushConfigView(Entity):
    """What may be shown of a push config: the url and the authentication schemes, never the token."""

    url: str
    authentication: PushAuthenticationView | None = None


class PushStatus(Entity):
    """An instance's push endpoint in force (``source``: ``instance`` | ``definition``) and its
    last delivery (docs/protocol.md 10.3)."""

    url: str | None
    source: str | None
    lastStatus: int | None  # the HTTP status of the last attempt (0: no answer came)
    lastAttemptAt: str | None
    lastDeliveredAt: str | None
    lastError: str | None
    failures: int


class SupervisorLastRun(Entity):
    """The last run a supervisor ended (relaynet.worker): its number, exit status (None: killed
    by a signal it did not record), whether it timed out, when it ended, the tasks its end
    blocked and its log file (a path on the supervisor's machine)."""

    number: int
    exit: int | None
    timedOut: bool
    endedAt: str
    blocked: list[str]
    log: str


class SupervisorStatus(Entity):
    """A supervised instance's run state (docs/protocol.md 10.8) as its supervisor last reported
    it: ``state`` idle | running | stopping | stopped, or ``lost`` when no report came before
    ``expiresAt`` (a supervisor killed or cut off)."""

    state: str
    activeRuns: int
    maxRuns: int
    runsStarted: int
    lastRun: SupervisorLastRun | None
    updatedAt: str
    expiresAt: str | None


class Participant(Entity):
    """A channel participant: agent, role and turn order."""

    agent: str
    role: str
    order: int


class Channel(Entity):
    """A channel (PROTOCOL.md 5.6): type, participants, state, knobs and its times (ISO 8601)."""

    channel_id: str
    type: str
    participants: list[Participant]
    state: str
    knobs: dict[str, Any]
    intent: str | None
    created_at: str
    expires_at: str
    closed_at: str | None
    close_reason: str | None


class Sent(Result):
    """A message sent (ask or reply): its id, its thread and who it went to."""

    messageId: str
    threadId: str
    recipients: list[Address]


class Delegated(Result):
    """A task created: its id, state and assignee (if routed already)."""

    taskId: str
    state: str
    assignee: str | None = None


class Released(Result):
    """A claim released (or why not)."""

    claimId: str
    released: bool
    reason: str | None = None


class TaskResult(Result):
    """One task in full."""

    task: Task
