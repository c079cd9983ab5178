"""What an A2A stream carries (relaynet.a2a.stream, docs/protocol.md 13.5), decided from Task
views, and the Lambda path that cannot stream: its card says so and its function refuses the
streaming methods with UnsupportedOperationError. The streams themselves run on the local stack:
tests/e2e/test_a2a_streaming_e2e.py."""

from __future__ import annotations

import json

import pytest

from relaynet.a2a import card, stream, wire
from relaynet.config import settings
from relaynet.http import a2a as http_a2a


def view(state: str, *, reason: str | None = None, artifacts: tuple[str, ...] = (), at: str = "2026-12-04T10:00:00Z"):
    history = [{"state": state, "at": at, **({"reason": reason} if reason else {})}]
    task = {"id": "task_1", "threadId": "thr_1", "state": state, "updatedAt": at, "objective": "o", "history": history}
    arts = [{"artifactId": a, "uri": f"https://e.com/{a}", "type": "link"} for a in artifacts]
    return wire.task_view(task, arts, None, None)


def kinds(events):
    return [next(iter(e)) for e in events]


def test_a_new_artifact_comes_before_the_status_that_completes_the_task_and_only_once():
    sent = set()
    events = stream.updates(stream.signature(view("working")), view("completed", reason="done", artifacts=("a1",)), sent)
    assert kinds(events) == ["artifactUpdate", "statusUpdate"]
    assert events[0]["artifactUpdate"]["artifact"]["parts"] == [{"url": "https://e.com/a1"}]
    assert events[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert events[1]["statusUpdate"]["status"]["message"]["parts"] == [{"text": "done"}]
    assert stream.updates(stream.signature(view("completed", reason="done", artifacts=("a1",))),
                          view("completed", reason="done", artifacts=("a1",)), sent) == []


def test_a_relaynet_transition_inside_one_a2a_state_is_a_status_update_and_a_touch_is_not():
    events = stream.updates(stream.signature(view("accepted")), view("working", at="2026-12-04T10:00:05Z"), set())
    assert kinds(events) == ["statusUpdate"]
    assert events[0]["statusUpdate"]["metadata"]["relaynet"]["state"] == "working"
    assert stream.updates(stream.signature(view("working")), view("working", at="2026-12-04T10:00:09Z"), set()) == []


@pytest.mark.parametrize("state, final", [("pending", False), ("offered", False), ("accepted", False),
                                          ("working", False), ("blocked", True), ("completed", True),
                                          ("failed", True), ("cancelled", True)])
def test_a_stream_ends_at_a_terminal_or_interrupted_state(state, final):
    assert stream.is_final(view(state)) is final
    assert (stream.subscribe_refusal(view(state)) is not None) is (final and state != "blocked")


def test_the_opening_request_is_the_non_streaming_method_with_the_same_params():
    send = {"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage", "params": {"message": {"messageId": "m"}}}
    assert stream.opening_request(send) == {**send, "method": "SendMessage"}
    sub = {"jsonrpc": "2.0", "id": 4, "method": "SubscribeToTask", "params": {"id": "task_1", "historyLength": 2}}
    assert stream.opening_request(sub) == {"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": "task_1"}}


def test_without_a_streaming_transport_the_card_says_so_and_the_function_refuses(monkeypatch):
    monkeypatch.delenv("RELAYNET_A2A_STREAMING", raising=False)
    settings.cache_clear()
    try:
        assert card.card("https://hub", "demo", {"name": "coder"})["capabilities"]["streaming"] is False
        for method in stream.OPENING:
            event = {"body": json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": {"id": "t"}}),
                     "headers": {"a2a-version": "1.0"}, "pathParameters": {"network": "demo", "agent": "coder"},
                     "requestContext": {"authorizer": {"lambda": {"kind": "instance", "networkId": "net_1",
                                                                  "instanceId": "inst_1", "agent": "planner"}}}}
            answer = json.loads(http_a2a.rpc(event, None)["body"])
            assert answer["id"] == 9 and answer["error"]["code"] == wire.UNSUPPORTED_OPERATION
            assert "capabilities.streaming false" in answer["error"]["message"] or "poll GetTask" in answer["error"]["message"]
        monkeypatch.setenv("RELAYNET_A2A_STREAMING", "true")
        settings.cache_clear()
        assert card.card("https://hub", "demo", {"name": "coder"})["capabilities"]["streaming"] is True
    finally:
        settings.cache_clear()
