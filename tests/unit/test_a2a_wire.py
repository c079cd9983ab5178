"""The mapping of a Relaynet task onto A2A 1.0's Task (docs/protocol.md 13.3), checked against the
SDK's own protobuf types: what we write parses as ``a2a.types.Task`` with the state we mean."""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.proto_utils import parse_lenient
from google.protobuf import json_format

from relaynet.a2a import wire
from relaynet.a2a.wire import belongs
from relaynet.taskstate import TERMINAL

EXPECTED = {"pending": pb.TASK_STATE_SUBMITTED, "offered": pb.TASK_STATE_SUBMITTED,
            "accepted": pb.TASK_STATE_WORKING, "working": pb.TASK_STATE_WORKING,
            "blocked": pb.TASK_STATE_INPUT_REQUIRED, "completed": pb.TASK_STATE_COMPLETED,
            "failed": pb.TASK_STATE_FAILED, "cancelled": pb.TASK_STATE_CANCELED}


def task(state: str, reason: str | None = None, **extra) -> dict:
    history = [{"state": "pending", "actor": {"agent": "planner", "instanceId": "inst_p"}, "at": "2026-12-04T10:00:00.000Z"}]
    if state != "pending":
        entry = {"state": state, "actor": {"agent": "coder", "instanceId": "inst_c"}, "at": "2026-12-04T10:01:00.000Z"}
        if reason:
            entry["reason"] = reason
        history.append(entry)
    return {"id": "task_1", "threadId": "thr_1", "state": state, "objective": "Fix it", "title": "Fix it",
            "acceptanceCriteria": ["tests pass"], "creator": {"agent": "planner", "instanceId": "inst_p"},
            "target": {"agent": "coder"}, "updatedAt": "2026-12-04T10:01:00.000Z", "history": history, **extra}


def as_proto(view: dict) -> pb.Task:
    return parse_lenient(view, pb.Task())


@pytest.mark.parametrize("state", sorted(EXPECTED))
def test_every_relaynet_state_maps_to_its_a2a_state_and_parses_as_the_sdks_task(state):
    parsed = as_proto(wire.task_view(task(state), [], [], None))
    assert parsed.status.state == EXPECTED[state]
    assert parsed.id == "task_1" and parsed.context_id == "thr_1"
    assert set(EXPECTED) == set(wire.STATES) and TERMINAL <= set(wire.STATES)


def test_the_status_filter_maps_back_to_exactly_the_states_it_stands_for():
    for a2a_state, relaynet_states in wire.RELAYNET_STATES.items():
        assert {s for s, mapped in wire.STATES.items() if mapped == a2a_state} == set(relaynet_states)
    assert set(wire.RELAYNET_STATES) <= set(wire.TASK_STATES)


def test_the_newest_transitions_reason_is_the_status_message_and_only_then():
    blocked = as_proto(wire.task_view(task("blocked", "which timezone?"), None, None, None))
    assert blocked.status.message.parts[0].text == "which timezone?"
    assert blocked.status.message.role == pb.ROLE_AGENT
    assert not as_proto(wire.task_view(task("working"), None, None, None)).status.HasField("message")
    # a reason of an older transition is not the current status
    older = task("working")
    older["history"].insert(1, {"state": "blocked", "reason": "old question", "actor": {"agent": "coder"}})
    assert not as_proto(wire.task_view(older, None, None, None)).status.HasField("message")


def test_history_starts_with_the_objective_and_history_length_keeps_the_newest():
    messages = [{"id": f"msg_{n}", "from": {"agent": "planner" if n % 2 else "coder"}, "body": f"m{n}"} for n in range(4)]
    full = as_proto(wire.task_view(task("working"), None, messages, None))
    assert [m.parts[0].text for m in full.history] == ["Fix it\n- tests pass", "m0", "m1", "m2", "m3"]
    assert [m.role for m in full.history] == [pb.ROLE_USER, pb.ROLE_AGENT, pb.ROLE_USER, pb.ROLE_AGENT, pb.ROLE_USER]
    assert [m.parts[0].text for m in as_proto(wire.task_view(task("working"), None, messages, 2)).history] == ["m2", "m3"]
    assert list(as_proto(wire.task_view(task("working"), None, messages, 0)).history) == []
    assert len(as_proto(wire.task_view(task("working"), None, messages, 50)).history) == 5
    assert "history" not in wire.task_view(task("working"), None, None, None)


def test_an_artifact_is_a_url_part_with_relaynets_type_in_metadata():
    item = {"artifactId": "art_1", "uri": "https://example.com/pr/7", "label": "PR 7", "type": "pull_request",
            "publisher": {"agent": "coder"}, "createdAt": "2026-12-04T10:02:00.000Z"}
    parsed = as_proto(wire.task_view(task("completed", "done"), [item], None, None))
    (art,) = parsed.artifacts
    assert (art.artifact_id, art.name, art.parts[0].url) == ("art_1", "PR 7", "https://example.com/pr/7")
    assert json_format.MessageToDict(art.metadata)["relaynet"]["type"] == "pull_request"


def test_a_task_belongs_to_the_agent_it_was_delegated_to_or_that_took_it():
    assert belongs(task("pending"), "coder")
    group_task = task("accepted", target={"group": "devs"})
    assert belongs(group_task, "coder") and not belongs(group_task, "reviewer")
    assert not belongs(task("pending", target={"resource": "repo"}), "coder")
