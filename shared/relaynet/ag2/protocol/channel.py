"""A channel as AG2 sees it (AG2 1.2.1 ``ag2/network/channel.py``): ``ChannelMetadata`` with the
manifest snapshot of its type, its participants and its lifecycle state, and the manifests of
AG2's four built-in adapters (``ag2/network/adapters/{consulting,conversation,discussion,
workflow}.py``, ``__init__``), which Relaynet's channel types are (relaynet.adapters decides
the turns; relaynet.ag2.turns reads them the way AG2's adapters do).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field

from relaynet.ag2.protocol.base import WireModel, enum_field

__all__ = ("CHANNEL_TYPES", "ChannelManifest", "ChannelMetadata", "ChannelState", "Expectation", "Participant",
           "ParticipantRole", "ParticipantSchema", "is_terminal_channel_state", "manifest")


class ChannelState(str, Enum):
    """``pending`` (invites wait for acks), ``active``, ``closing``, ``closed``, ``expired``."""

    PENDING = "pending"
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"
    EXPIRED = "expired"


def is_terminal_channel_state(state: ChannelState) -> bool:
    """True for ``closed`` and ``expired``: nothing more is accepted."""
    return state in (ChannelState.CLOSED, ChannelState.EXPIRED)


class ParticipantRole(str, Enum):
    """``initiator`` (the creator), ``respondent`` (the other of two), ``participant`` (of more)."""

    INITIATOR = "initiator"
    RESPONDENT = "respondent"
    PARTICIPANT = "participant"


class ParticipantSchema(WireModel):
    """Participant count bounds (inclusive; ``max`` None: unbounded) and role names."""

    min: int
    max: int | None = None
    roles: list[str] = Field(default_factory=list)


class Expectation(WireModel):
    """A protocol-shape contract (``acks_within``, ``reply_within``, ``max_silence``,
    ``turn_within``) and what a violation does. Declared, for the client; Relaynet's hub enforces
    its own (the sweep's reply window, the 30 s invite-ack timeout)."""

    name: str
    on_violation: str
    params: dict[str, Any] = Field(default_factory=dict)
    applies_to: list[str] | None = None


class ChannelManifest(WireModel):
    """A channel type's declaration: ``type`` (the adapter's key), ``version``, participant
    bounds, knobs (name -> type hint), the default view policy's name, expectations."""

    type: str
    version: int = 1
    participants: ParticipantSchema = Field(default_factory=lambda: ParticipantSchema(min=2))
    knobs_schema: dict[str, str] = Field(default_factory=dict)
    default_view_policy: str = "full_transcript"
    expectations: list[Expectation] = Field(default_factory=list)


class Participant(WireModel):
    """One participant: agent id (Relaynet's agent name), role, ``order`` (0: the initiator)."""

    agent_id: str
    role: enum_field(ParticipantRole)
    order: int
    joined_at: str = ""


class ChannelMetadata(WireModel):
    """A channel's lifecycle record, as ``get_channel``/``create_channel`` answer it. Times are
    ISO-Z strings; ``labels`` holds ``intent`` when the channel has one; ``pending_acks`` the
    invitees still to ack while ``state`` is ``pending``."""

    channel_id: str
    manifest: ChannelManifest
    creator_id: str
    participants: list[Participant]
    state: enum_field(ChannelState)
    created_at: str
    expires_at: str | None = None
    closed_at: str | None = None
    close_reason: str = ""
    parent_channel_id: str | None = None
    knobs: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, Any] = Field(default_factory=dict)  # AG2: dict[str, str]; a client's label is kept as sent

    required_acks: int | None = None
    pending_acks: list[str] = Field(default_factory=list)
    rejected_by: list[str] = Field(default_factory=list)

    def participant_ids(self) -> list[str]:
        return [p.agent_id for p in self.participants]

    def is_terminal(self) -> bool:
        return is_terminal_channel_state(self.state)


#: The channel types: AG2's four built-in adapters', which are Relaynet's four (relaynet.adapters.TYPES).
CHANNEL_TYPES = ("consulting", "conversation", "discussion", "workflow")

_TWO = ["initiator", "respondent"]
_DECLARED: dict[str, tuple[list[str] | None, dict[str, str], str, list[tuple[str, str, int]]]] = {
    "consulting": (_TWO, {}, "full_transcript", [("acks_within", "auto_close", 30), ("reply_within", "auto_close", 600)]),
    "conversation": (_TWO, {}, "windowed_summary", [("max_silence", "audit", 3600)]),
    "discussion": (None, {"ordering": "str"}, "named_windowed_summary",
                   [("turn_within", "warn", 120), ("turn_within", "hide", 600)]),
    "workflow": (None, {"graph": "TransitionGraph"}, "named_windowed_summary",
                 [("turn_within", "warn", 120), ("turn_within", "auto_close", 600)]),
}
_manifests: dict[str, ChannelManifest] = {}


def manifest(channel_type: str) -> ChannelManifest:
    """The manifest of ``channel_type`` (one of :data:`CHANNEL_TYPES`), as AG2's adapter of that
    type declares it: participant bounds and roles, knobs, default view, expectations. Built on
    first use. KeyError for another type."""
    if channel_type not in _manifests:
        roles, knobs, view, expectations = _DECLARED[channel_type]
        _manifests[channel_type] = ChannelManifest(
            type=channel_type, version=1,
            participants=ParticipantSchema(min=2, max=2, roles=roles) if roles else ParticipantSchema(min=2),
            knobs_schema=knobs, default_view_policy=view,
            expectations=[Expectation(name=n, on_violation=v, params={"seconds": s}) for n, v, s in expectations])
    return _manifests[channel_type].model_copy(deep=True)
