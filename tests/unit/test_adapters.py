"""The four channel adapters as pure functions (PROTOCOL.md 5.1), with workflow graphs made by
the real `ag2` package so the JSON is AG2's own format."""

from __future__ import annotations

import pytest
from ag2.network.transitions import (
    AgentTarget,
    ContextEquals,
    FromSpeaker,
    StayTarget,
    TerminateTarget,
    ToolCalled,
    Transition,
    TransitionGraph,
)

from relaynet.adapters import AdapterError, Send, adapter

NOW = 1_000_000


def run(kind, participants, sends, knobs=None):
    """Apply ``sends`` in order; returns the list of decisions and the final state."""
    a = adapter(kind)
    state = a.initial_state(participants, knobs or {})
    decisions = []
    for send in sends:
        d = a.decide(state, send, NOW)
        decisions.append(d)
        if d.accepted:
            state = d.state
    return decisions, state


def say(who):
    return Send(sender=who, tool="say")


def handoff(who, **kw):
    return Send(sender=who, tool="handoff", **kw)


# conversation -------------------------------------------------------------------------------

def test_either_side_of_a_conversation_may_say_at_any_time():
    decisions, _ = run("conversation", ["a", "b"], [say("a"), say("a"), say("b"), say("a")])
    assert all(d.accepted and d.close_reason is None for d in decisions)


def test_a_conversation_has_exactly_two_participants_and_no_handoff():
    with pytest.raises(AdapterError):
        adapter("conversation").initial_state(["a", "b", "c"], {})
    (d,), _ = run("conversation", ["a", "b"], [handoff("a")])
    assert d.refusal == "wrong_tool"


# discussion ---------------------------------------------------------------------------------

def test_a_discussion_goes_round_robin_opener_first():
    decisions, state = run("discussion", ["a", "b", "c"], [say("b"), say("a"), say("a"), say("b"), say("c"), say("a")])
    assert [d.refusal for d in decisions] == ["not_your_turn", None, "not_your_turn", None, None, None]
    assert adapter("discussion").next_speaker(state) == "b"
    assert adapter("discussion").your_tools(state, "b") == ["say"] and adapter("discussion").your_tools(state, "a") == []


def test_a_discussion_only_orders_round_robin():
    with pytest.raises(AdapterError) as err:
        adapter("discussion").initial_state(["a", "b"], {"ordering": "random"})
    assert err.value.field == "knobs.ordering"


# consulting ---------------------------------------------------------------------------------

def test_a_consult_is_one_prompt_then_one_reply_which_closes_it():
    decisions, state = run("consulting", ["asker", "expert"], [say("expert"), say("asker"), say("asker"), say("expert")])
    assert [d.refusal for d in decisions] == ["not_your_turn", None, "not_your_turn", None]
    assert decisions[1].state["reply_due_ms"] == NOW + 600_000
    assert decisions[-1].close_reason == "consulting_complete"


# workflow -----------------------------------------------------------------------------------

def test_writer_then_reviewer_then_finish_with_approved():
    graph = TransitionGraph.sequence(["writer", "reviewer"]).to_dict()
    decisions, state = run("workflow", ["writer", "reviewer"], [
        handoff("reviewer"), say("writer"), handoff("writer"),
        handoff("writer"), handoff("reviewer", finish="LGTM", reason="approved"),
    ], {"graph": graph})
    assert [d.refusal for d in decisions] == ["not_your_turn", "wrong_tool", None, "not_your_turn", None]
    assert decisions[2].state["expected"] == "reviewer"
    assert decisions[-1].close_reason == "approved"


def test_a_sequence_ends_with_its_terminate_reason_before_max_turns():
    graph = TransitionGraph.sequence(["writer", "reviewer"]).to_dict()
    decisions, _ = run("workflow", ["writer", "reviewer"], [handoff("writer"), handoff("reviewer")], {"graph": graph})
    assert decisions[-1].close_reason == "sequence_complete"


def test_round_robin_closes_at_max_turns():
    graph = TransitionGraph.round_robin(["a", "b", "c"], max_turns=4).to_dict()
    decisions, state = run("workflow", ["a", "b", "c"], [handoff(x) for x in "abca"], {"graph": graph})
    assert [d.close_reason for d in decisions] == [None, None, None, "max_turns"]


def test_tool_called_and_context_equals_route_by_priority():
    graph = TransitionGraph(
        initial_speaker="triage",
        transitions=[
            Transition(when=ContextEquals(key="severity", value="high"), then=AgentTarget("oncall"), priority=0),
            Transition(when=ToolCalled("escalate"), then=AgentTarget("lead"), priority=1),
            Transition(when=FromSpeaker("triage"), then=StayTarget(), priority=2),
        ],
        default_target=TerminateTarget(reason="handled"),
    ).to_dict()
    people = ["triage", "oncall", "lead"]
    d, _ = run("workflow", people, [handoff("triage", context={"severity": "high"}, routing_tool="escalate")], {"graph": graph})
    assert d[0].state["expected"] == "oncall"
    d, _ = run("workflow", people, [handoff("triage", routing_tool="escalate")], {"graph": graph})
    assert d[0].state["expected"] == "lead"
    d, _ = run("workflow", people, [handoff("triage")], {"graph": graph})
    assert d[0].state["expected"] == "triage"
    d, _ = run("workflow", people, [handoff("triage", target="oncall"), handoff("oncall")], {"graph": graph})
    assert d[0].state["expected"] == "oncall" and d[1].close_reason == "handled"


def test_an_invalid_graph_or_foreign_initial_speaker_is_refused():
    good = TransitionGraph.sequence(["writer", "reviewer"]).to_dict()
    with pytest.raises(AdapterError) as err:
        adapter("workflow").initial_state(["writer", "editor"], {"graph": good})
    assert "reviewer" in err.value.message
    with pytest.raises(AdapterError) as err:
        adapter("workflow").initial_state(["x", "writer"], {"graph": {**good, "initial_speaker": "ghost"}})
    assert err.value.field == "knobs.graph.initial_speaker"
    bad = {**good, "transitions": [{"when": {"name": "sometimes", "args": {}}, "then": {"name": "stay", "args": {}}}]}
    with pytest.raises(AdapterError):
        adapter("workflow").initial_state(["writer", "reviewer"], {"graph": bad})
    with pytest.raises(AdapterError):
        adapter("workflow").initial_state(["writer", "reviewer"], {})
