"""An agent's identity records (AG2 1.2.1 ``ag2/network/identity.py``): its ``Passport`` (name,
billing facts, the ``AuthBlock`` it authenticates with) and its ``Resume`` (claimed capabilities
and the hub's observed track record). Relaynet stores both as ``to_dict`` wrote them
(relaynet.store.ag2) and answers ``get_agent``/``get_resume`` with them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from relaynet.ag2.protocol.base import WireModel

__all__ = ("PASSPORT_KINDS", "AuthBlock", "CostProfile", "ObservedStat", "Passport", "PassportKind", "Resume",
           "ResumeExample")

PassportKind = Literal["agent", "human", "remote_agent"]
PASSPORT_KINDS: tuple[str, ...] = ("agent", "human", "remote_agent")

Number = int | float  # asdict keeps 3 as 3 and 3.5 as 3.5


class CostProfile(WireModel):
    """Billing hints (USD per million tokens; not validated by AG2 either)."""

    input_per_mtok: Number | None = None
    output_per_mtok: Number | None = None
    latency_tier: str | None = None  # "fast" | "balanced" | "deep"


class AuthBlock(WireModel):
    """How the hub authenticates the identity: Relaynet takes ``scheme="api_key"`` with
    ``claim={"token": <rn_inst_ token>}`` (relaynet.ag2.ops.authenticate)."""

    scheme: str = "none"
    issuer: str | None = None
    audience: str | None = None
    key_fingerprint: str | None = None
    claim: dict[str, Any] = Field(default_factory=dict)


class Passport(WireModel):
    """An identity: ``name`` (the address; Relaynet's agent name), ``agent_id`` and
    ``created_at`` (hub-stamped at ``register``). ``kind`` is ``agent`` | ``human`` |
    ``remote_agent`` | None (None reads as ``agent``); another value raises ``ValueError``, as
    AG2's ``__post_init__`` does."""

    name: str
    owner: str = ""
    provider: str | None = None
    model: str | None = None
    cost: CostProfile | None = None
    region: str | None = None
    auth: AuthBlock = Field(default_factory=AuthBlock)
    kind: str | None = None
    hub_id: str | None = None
    version: int = 1

    agent_id: str | None = None
    created_at: str = ""

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str | None) -> str | None:
        if kind is not None and kind not in PASSPORT_KINDS:
            raise ValueError(f"Passport.kind must be one of {PASSPORT_KINDS} or None; got {kind!r}")
        return kind

    @property
    def effective_kind(self) -> str:
        """``kind``, None read as ``agent``."""
        return self.kind or "agent"


class ResumeExample(WireModel):
    """A worked example on a resume."""

    title: str
    outcome: str = ""
    task_id: str | None = None
    channel_id: str | None = None
    when: str | None = None
    note: str = ""


class ObservedStat(WireModel):
    """The hub's count of one capability's finished tasks (``record_observation``)."""

    n: int = 0
    completed: int = 0
    failed: int = 0
    expired: int = 0
    p50_latency_ms: int | None = None


class Resume(WireModel):
    """Capability claims (the agent's word) and ``observed`` (the hub's, by capability);
    ``last_updated`` is hub-stamped (ISO-Z) on every change."""

    claimed_capabilities: list[str] = Field(default_factory=list)
    domains: list[str] = Field(default_factory=list)
    summary: str = ""
    examples: list[ResumeExample] = Field(default_factory=list)
    observed: dict[str, ObservedStat] = Field(default_factory=dict)
    version: int = 1
    last_updated: str = ""
