"""The one small interface every channel adapter implements (PROTOCOL.md 5.1).

An adapter is pure: ``(state, envelope) -> Decision``. The hub stores the folded state on the
channel head and applies a decision with one conditional write on the head's ``seq``, so two
racing sends can't both pass a turn check. Adapters never do I/O.

State is a JSON-able dict (it lives in DynamoDB). Every state holds ``participants`` (names in
order, the opener first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

NOT_YOUR_TURN = "not_your_turn"
WRONG_TOOL = "wrong_tool"


class AdapterError(ValueError):
    """A channel that cannot be opened as asked (400): ``field`` names the bad argument."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Send:
    """One attempted send. ``tool`` is ``say`` or ``handoff``; for a handoff, ``target``,
    ``finish`` (a summary) with ``reason``, ``context`` (variables to set first) and ``routing_tool``
    (the routing tool the agent called, for ``tool_called`` conditions)."""

    sender: str
    tool: str
    target: str | None = None
    finish: str | None = None
    reason: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    routing_tool: str | None = None


@dataclass(frozen=True)
class Decision:
    """What the hub does with a send: refuse it (``refusal`` = ``not_your_turn`` | ``wrong_tool``)
    or accept it with the new ``state``, closing the channel when ``close_reason`` is set."""

    state: dict[str, Any]
    refusal: str | None = None
    message: str = ""
    close_reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.refusal is None


def refuse(state: dict[str, Any], refusal: str, message: str) -> Decision:
    """A refusal that leaves ``state`` unchanged."""
    return Decision(state=state, refusal=refusal, message=message)


class Adapter(Protocol):
    """The interface: create-time validation, the initial state, the decision, and the views
    ``channels info`` shows (``next_speaker``, ``your_tools``)."""

    type: str
    tool: str  # the channel-level tool this type offers: "say" or "handoff"

    def initial_state(self, participants: list[str], knobs: dict[str, Any]) -> dict[str, Any]:
        """Validate the participants and knobs (raise AdapterError) and return the folded state."""

    def decide(self, state: dict[str, Any], send: Send, now_ms: int) -> Decision:
        """Accept or refuse ``send`` in ``state``."""

    def next_speaker(self, state: dict[str, Any]) -> str | None:
        """Who is expected to send next (None: anyone, or nobody)."""

    def your_tools(self, state: dict[str, Any], agent: str) -> list[str]:
        """The channel-level tools ``agent`` may call now."""


def wrong_tool(adapter: Adapter, state: dict[str, Any], send: Send) -> Decision | None:
    """The shared ``wrong_tool`` check: ``say`` only where the type offers it, likewise ``handoff``."""
    if send.tool != adapter.tool:
        return refuse(state, WRONG_TOOL, f"a {adapter.type} channel takes `{adapter.tool}`, not `{send.tool}`")
    return None


def exactly(participants: list[str], n: int, kind: str) -> None:
    if len(participants) != n:
        raise AdapterError("target", f"a {kind} channel has exactly {n} participants, got {len(participants)}")


def at_least(participants: list[str], n: int, kind: str) -> None:
    if len(participants) < n:
        raise AdapterError("target", f"a {kind} channel has at least {n} participants, got {len(participants)}")
