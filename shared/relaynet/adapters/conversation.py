"""conversation: exactly 2 participants; either may ``say`` at any time; closes only by
``close`` or TTL (PROTOCOL.md 5.1)."""

from __future__ import annotations

from typing import Any

from relaynet.adapters.base import AdapterError, Decision, Send, exactly, wrong_tool


class Conversation:
    type = "conversation"
    tool = "say"

    def initial_state(self, participants: list[str], knobs: dict[str, Any]) -> dict[str, Any]:
        exactly(participants, 2, self.type)
        if knobs:
            raise AdapterError("knobs", f"a conversation takes no knobs, got {sorted(knobs)}")
        return {"participants": list(participants)}

    def decide(self, state: dict[str, Any], send: Send, now_ms: int) -> Decision:
        return wrong_tool(self, state, send) or Decision(state=state)

    def next_speaker(self, state: dict[str, Any]) -> str | None:
        return None

    def your_tools(self, state: dict[str, Any], agent: str) -> list[str]:
        return ["say"]
