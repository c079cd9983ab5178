"""consulting: exactly 2 participants; one ``say`` by the initiator (the prompt), then one by the
respondent (the reply), which closes the channel with ``consulting_complete``. The reply window
(``reply_within``) starts at the prompt; the sweep closes a channel whose respondent stayed
silent past ``reply_due_ms`` with ``expectation_violated:reply_within`` (PROTOCOL.md 5.1, 7)."""

from __future__ import annotations

from typing import Any

from relaynet.adapters.base import NOT_YOUR_TURN, AdapterError, Decision, Send, exactly, refuse, wrong_tool

COMPLETE = "consulting_complete"
REPLY_WITHIN_VIOLATED = "expectation_violated:reply_within"


class Consulting:
    type = "consulting"
    tool = "say"

    def __init__(self, reply_within_s: int = 600):
        self.reply_within_s = reply_within_s

    def initial_state(self, participants: list[str], knobs: dict[str, Any]) -> dict[str, Any]:
        exactly(participants, 2, self.type)
        if knobs:
            raise AdapterError("knobs", f"a consulting channel takes no knobs, got {sorted(knobs)}")
        return {"participants": list(participants), "phase": "prompt", "reply_within": self.reply_within_s}

    def decide(self, state: dict[str, Any], send: Send, now_ms: int) -> Decision:
        refused = wrong_tool(self, state, send)
        if refused:
            return refused
        expected = self.next_speaker(state)
        if send.sender != expected:
            return refuse(state, NOT_YOUR_TURN, f"it is {expected}'s turn" if expected else "the consult is answered")
        if state["phase"] == "prompt":
            return Decision(state={**state, "phase": "reply", "reply_due_ms": now_ms + state["reply_within"] * 1000})
        return Decision(state={**state, "phase": "done"}, close_reason=COMPLETE)

    def next_speaker(self, state: dict[str, Any]) -> str | None:
        initiator, respondent = state["participants"]
        return {"prompt": initiator, "reply": respondent}.get(state["phase"])

    def your_tools(self, state: dict[str, Any], agent: str) -> list[str]:
        return ["say"] if self.next_speaker(state) == agent else []
