"""Arguments of the 12 ``network_*`` tools (PROTOCOL.md 4), camelCase as the protocol spells them."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from relaynet.models.common import (
    Body,
    ClaimId,
    Criterion,
    InstanceId,
    Name,
    Objective,
    Request,
    ResourceKey,
    Scope,
    Short,
    TaskId,
    ThreadId,
)

TaskStatus = Literal["accepted", "working", "blocked", "completed", "failed", "cancelled"]
ArtifactType = Literal["pull_request", "commit", "package", "test_report", "document", "file", "json", "other"]


class WhoamiRequest(Request):
    """network_whoami takes no arguments (PROTOCOL.md 4.1)."""


class DiscoverRequest(Request):
    """network_discover (PROTOCOL.md 4.2): with either argument, ``candidates`` are added."""

    resourceKey: Optional[ResourceKey] = Field(None, description="Only agents responsible for this resource")
    action: Optional[Annotated[str, Field(min_length=1, max_length=64)]] = Field(None, description="Only agents whose responsibilities list this action, e.g. implement or review")


class AskRequest(Request):
    """network_ask (PROTOCOL.md 4.3). ``toInstance`` wins over ``toAgent``."""

    body: Body
    toAgent: Optional[Name] = Field(None, description="An agent name or a group slug")
    toInstance: Optional[InstanceId] = None
    threadId: Optional[ThreadId] = None
    subject: Optional[Short] = None
    taskId: Optional[TaskId] = None
    resource: Optional[ResourceKey] = None


class InboxRequest(Request):
    """network_inbox takes no arguments (PROTOCOL.md 4.4)."""


class ReplyRequest(Request):
    """network_reply (PROTOCOL.md 4.5)."""

    threadId: ThreadId
    body: Body


class DelegateRequest(Request):
    """network_delegate (PROTOCOL.md 4.6). Without a target, ``resource`` is required."""

    objective: Objective
    title: Optional[Short] = None
    acceptanceCriteria: Optional[Annotated[list[Criterion], Field(max_length=20)]] = Field(None, description="At most 20 checks of 1 KiB each that define done")
    toAgent: Optional[Name] = Field(None, description="An agent name or a group slug")
    toInstance: Optional[InstanceId] = None
    resource: Optional[ResourceKey] = None


class TaskGetRequest(Request):
    """network_task_get (PROTOCOL.md 4.7)."""

    taskId: TaskId


class TaskUpdateRequest(Request):
    """network_task_update (PROTOCOL.md 4.8). ``reason`` is required for blocked, completed, failed."""

    taskId: TaskId
    status: TaskStatus
    reason: Optional[Annotated[str, Field(max_length=8192)]] = Field(None, description="Why; for completed, the evidence")


class ClaimRequest(Request):
    """network_claim (PROTOCOL.md 4.9)."""

    scope: Scope
    scopeType: Literal["path", "task", "resource"] = "path"
    resourceId: Optional[ResourceKey] = None
    taskId: Optional[TaskId] = None
    ttlSeconds: Annotated[int, Field(ge=1, le=86400)] = 3600


class ClaimsCheckRequest(Request):
    """``POST /v1/claims/check`` (docs/protocol.md 10.4): which of ``paths`` other instances' live
    path claims cover. Each path is relative to the claims' root (a repository's top level),
    without ``..``, control characters or a leading ``/`` (relaynet.claims.check: 400 naming it)."""

    paths: Annotated[list[Annotated[str, Field(max_length=1024)]], Field(min_length=1, max_length=1000)]
    resourceId: Optional[ResourceKey] = None


class ReleaseRequest(Request):
    """network_release (PROTOCOL.md 4.10)."""

    claimId: ClaimId


class PublishArtifactRequest(Request):
    """network_publish_artifact (PROTOCOL.md 4.11)."""

    uri: Annotated[str, Field(min_length=1, max_length=2048)]
    label: Optional[Short] = None
    type: ArtifactType = "other"
    taskId: Optional[TaskId] = None


class CapabilityDecl(Request):
    """One self-declared capability (PROTOCOL.md 4.12)."""

    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
    name: Annotated[str, Field(min_length=1, max_length=64)]
    description: Optional[Annotated[str, Field(max_length=500)]] = None


class RegisterCapabilitiesRequest(Request):
    """network_register_capabilities (PROTOCOL.md 4.12): replaces this instance's declaration."""

    capabilities: Annotated[list[CapabilityDecl], Field(max_length=20)]

    @field_validator("capabilities")
    @classmethod
    def _unique_ids(cls, caps: list[CapabilityDecl]) -> list[CapabilityDecl]:
        seen: set[str] = set()
        for cap in caps:
            if cap.id in seen:
                raise ValueError(f"duplicate capability id {cap.id!r}")
            seen.add(cap.id)
        return caps


class PushAuthentication(Request):
    """A2A's ``PushNotificationAuthenticationInfo``: how the hub authenticates to the receiver.
    The first scheme is sent as ``Authorization: <scheme> <credentials>`` (e.g. ``Bearer``)."""

    schemes: Annotated[list[Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,31}$")]],
                       Field(min_length=1, max_length=5)]
    credentials: Optional[Annotated[str, Field(min_length=1, max_length=2048)]] = None


class PushConfigRequest(Request):
    """``PUT /v1/push`` (docs/protocol.md 10.3): A2A's ``PushNotificationConfig`` shape. ``token``
    is the shared secret the hub signs every event with (HMAC-SHA256, ``X-Relaynet-Signature``);
    it is never sent, echoed or shown."""

    url: Annotated[str, Field(min_length=1, max_length=2048, description="Where the hub POSTs events: https "
                                                                         "(http only to a loopback host locally)")]
    token: Annotated[str, Field(min_length=16, max_length=256, description="The signing secret, 16 to 256 characters")]
    authentication: Optional[PushAuthentication] = None


class InboxWaitQuery(BaseModel):
    """``GET /v1/inbox/wait?timeout=S`` (docs/protocol.md 10.7): the query string, parsed from its
    text (``timeout=5``), so not strict as the JSON bodies are; an unknown parameter is a 400
    (relaynet.http.api)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    timeout: Annotated[int, Field(ge=0, le=86400, description="Seconds to wait for undelivered mail; the "
                                                              "server holds at most MaxWaitSeconds (20 by "
                                                              "default), then answers what there is")] = 20


class SupervisorLastRunReport(Request):
    """The last run a supervisor ended (``lastRun`` of :class:`SupervisorStateRequest`)."""

    number: Annotated[int, Field(ge=1)]
    exit: Optional[int] = None
    timedOut: bool = False
    endedAt: Annotated[str, Field(min_length=20, max_length=40, description="RFC 3339")]
    blocked: Annotated[list[TaskId], Field(max_length=100)] = []
    log: Annotated[str, Field(max_length=1024, description="The run's log file on the supervisor's machine")] = ""


class SupervisorStateRequest(Request):
    """``PUT /v1/supervisor`` (docs/protocol.md 10.8): what ``relaynet worker`` reports of the
    instance it supervises, at each change and as a heartbeat."""

    state: Literal["idle", "running", "stopping", "stopped"]
    activeRuns: Annotated[int, Field(ge=0, le=16)]
    maxRuns: Annotated[int, Field(ge=1, le=16)]
    runsStarted: Annotated[int, Field(ge=0)]
    lastRun: Optional[SupervisorLastRunReport] = None

    @model_validator(mode="after")
    def _runs_within_bound(self) -> "SupervisorStateRequest":
        if self.activeRuns > self.maxRuns:
            raise ValueError("activeRuns is more than maxRuns")
        return self
