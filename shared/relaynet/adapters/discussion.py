"""discussion: 2 or more participants speak round robin by order, the opener first; knob
``ordering`` must be ``round_robin``; never closes by itself (PROTOCOL.md 5.1)."""

from __future__ import annotations

from typing import Any

from relaynet.adapters.base import NOT_YOUR_TURN, AdapterError, Decision, Send, at_least, refuse, wrong_tool


class Discussion:
    type = "discussion"
    tool = "say"

    def initial_state(self, participants: list[str], knobs: dict[str, Any]) -> dict[str, Any]:
        at_least(participants, 2, self.type)
        unknown = set(knobs) - {"ordering"}
        if unknown:
            raise AdapterError("knobs", f"unknown discussion knobs {sorted(unknown)}")
        if knobs.get("ordering", "round_robin") != "round_robin":
            raise AdapterError("knobs.ordering", "must be 'round_robin'")
        return {"participants": list(participants), "turn": 0}

    def decide(self, state: dict[str, Any], send: Send, now_ms: int) -> Decision:
        refused = wrong_tool(self, state, send)
        if refused:
            return refused
        expected = self.next_speaker(state)
        if send.sender != expected:
            return refuse(state, NOT_YOUR_TURN, f"it is {expected}'s turn")
        return Decision(state={**state, "turn": (state["turn"] + 1) % len(state["participants"])})

    def next_speaker(self, state: dict[str, Any]) -> str | None:
        return state["participants"][state["turn"]]

    def your_tools(self, state: dict[str, Any], agent: str) -> list[str]:
        return ["say"] if self.next_speaker(state) == agent else []
