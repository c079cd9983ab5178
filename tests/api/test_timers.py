"""Timers (PROTOCOL.md 5.1, 5.7, 7) through the handlers: a channel past its ttl is ``expired``
on every read at once and the sweep tells each participant; channel messages say whose turn it
is and which tool to use; ``tasks wait`` answers the task summary."""

from __future__ import annotations

import threading
import time

import pytest

from relaynet import clock
from relaynet_local.lambdas import LambdaContext, load_handler
from tests.api.conftest import FUNCTIONS
from tests.conftest import apply

SPEC = """
network: timers
agents:
  - {name: alice, instances: 1}
  - {name: bob, instances: 1}
  - {name: carol, instances: 1}
"""
SUMMARY = {"id", "title", "state", "creator", "target", "assignee", "resource", "createdAt", "updatedAt"}


@pytest.fixture
def net(table):
    return apply(SPEC)


def sweep():
    return load_handler(FUNCTIONS, "sweep.handler")({}, LambdaContext("sweep", 60.0, 512))


def inbox(api, token):
    status, out, _ = api("network_inbox", {}, token)
    assert status == 200
    return out["messages"]


def _until_past(expires_at: str) -> None:
    """Poll the clock until ``expires_at`` (RFC 3339) has passed."""
    while clock.now_ms() <= clock.parse_iso(expires_at):
        time.sleep(0.01)


@pytest.mark.parametrize("first_look", ["info", "list", "say", "close", "sweep"])
def test_a_channel_past_its_ttl_is_shown_expired_only_with_its_expired_envelope(api, net, first_look):
    # PROTOCOL.md 7(3): past expires_at a channel becomes expired with an expired envelope; whichever
    # call looks first (issue 24), the state and the envelope with its mailbox copies are one write
    alice, bob = net.token("alice0"), net.token("bob0")
    ch = api("channels", {"action": "open", "type": "conversation", "target": "bob", "ttl": 1,
                          "message": "quick one"}, alice)[1]["channel_id"]
    inbox(api, bob)
    _until_past(api("channels", {"action": "info", "channel_id": ch}, alice)[1]["channel"]["expires_at"])
    if first_look == "info":
        info = api("channels", {"action": "info", "channel_id": ch}, bob)[1]
        assert info["channel"]["state"] == "expired" and info["your_tools"] == [] and info["next_speaker"] is None
        assert info["envelopes"][-1]["event_type"] == "expired"
    elif first_look == "list":
        assert api("channels", {"action": "list"}, alice)[1]["channels"] == []
    elif first_look == "say":
        status, err, _ = api("say", {"channel_id": ch, "content": "too late"}, bob)
        assert status == 409 and err["error"]["details"]["reason"] == "channel_closed"
    elif first_look == "close":
        closed = api("channels", {"action": "close", "channel_id": ch}, bob)[1]
        assert (closed["state"], closed["close_reason"]) == ("expired", "ttl")
    else:
        assert sweep()["channels_expired"] == 1
    info = api("channels", {"action": "info", "channel_id": ch}, alice)[1]
    assert info["channel"]["state"] == "expired" and info["channel"]["close_reason"] == "ttl"
    assert [e["event_type"] for e in info["envelopes"]] == ["opened", "text", "expired"]
    (listed,) = api("channels", {"action": "list", "state": "all"}, alice)[1]["channels"]
    assert listed["state"] == "expired"
    for token in (alice, bob):
        (msg,) = inbox(api, token)
        assert msg["kind"] == "channel" and msg["channelId"] == ch
        assert msg["envelope"]["event_type"] == "expired" and msg["envelope"]["content"] == {"reason": "ttl"}
        assert "closed" in msg["instructions"] or "expired" in msg["instructions"]
    assert sweep()["channels_expired"] == 0 and inbox(api, alice) == [] and inbox(api, bob) == []


def test_channel_messages_say_whose_turn_it_is_and_which_tool_to_use(api, net):
    alice, bob, carol = net.token("alice0"), net.token("bob0"), net.token("carol0")
    ch = api("channels", {"action": "open", "type": "discussion", "target": ["bob", "carol"],
                          "knobs": {"ordering": "round_robin"}, "message": "kick-off"}, alice)[1]["channel_id"]
    def texts(token):
        return [m for m in inbox(api, token) if m["envelope"]["event_type"] in ("text", "packet")]

    (to_bob,) = texts(bob)
    assert "your turn" in to_bob["instructions"] and f"say(channel_id='{ch}'" in to_bob["instructions"]
    (to_carol,) = texts(carol)
    assert "bob's turn" in to_carol["instructions"] and "wait for your turn" in to_carol["instructions"]
    graph = {"initial_speaker": "alice", "transitions": [
        {"when": {"name": "from_speaker", "args": {"agent_id": "alice"}},
         "then": {"name": "agent", "args": {"agent_id": "bob"}}, "priority": 0}],
        "default_target": {"name": "terminate", "args": {"reason": "done"}}, "max_turns": 4}
    wf = api("channels", {"action": "open", "type": "workflow", "target": "bob", "knobs": {"graph": graph},
                          "message": "spec attached"}, alice)[1]["channel_id"]
    (msg,) = texts(bob)
    assert "your turn" in msg["instructions"] and f"handoff(channel_id='{wf}'" in msg["instructions"]


def test_tasks_wait_answers_the_summary_of_a_terminal_task_at_once(api, net):
    alice, bob = net.token("alice0"), net.token("bob0")
    task = api("network_delegate", {"objective": "ship it", "toAgent": "bob"}, alice)[1]
    api("network_task_update", {"taskId": task["taskId"], "status": "cancelled"}, alice)
    started = time.monotonic()
    status, out, _ = api("tasks", {"action": "wait", "task_id": task["taskId"], "timeout": 10}, alice)
    assert status == 200 and time.monotonic() - started < 5
    assert SUMMARY <= set(out) and out["id"] == task["taskId"] and out["state"] == "cancelled" and out["done"] is True
    assert out["creator"]["agent"] == "alice" and out["target"] == {"agent": "bob"}


def test_tasks_wait_answers_the_summary_when_the_task_finishes(api, net):
    alice, bob = net.token("alice0"), net.token("bob0")
    task = api("network_delegate", {"objective": "ship it", "toAgent": "bob"}, alice)[1]
    api("network_task_update", {"taskId": task["taskId"], "status": "accepted"}, bob)
    api("network_task_update", {"taskId": task["taskId"], "status": "working"}, bob)
    assert api("tasks", {"action": "wait", "task_id": task["taskId"], "timeout": 0}, alice)[1] == {"done": False}

    def finish():
        time.sleep(1.0)
        api("tasks", {"action": "complete", "task_id": task["taskId"], "result": "shipped"}, bob)

    worker = threading.Thread(target=finish)
    worker.start()
    status, out, _ = api("tasks", {"action": "wait", "task_id": task["taskId"], "timeout": 15}, alice)
    worker.join()
    assert status == 200 and out["done"] is True and SUMMARY <= set(out)
    assert out["state"] == "completed" and out["assignee"] == task["assignee"]


def test_tasks_wait_on_an_unknown_task_is_404_at_once(api, net):
    started = time.monotonic()
    status, out, _ = api("tasks", {"action": "wait", "task_id": "task_01ABCDEFGHJKMNPQRSTVWXYZ0", "timeout": 30},
                         net.token("alice0"))
    assert status == 404 and out["error"]["code"] == "not_found" and time.monotonic() - started < 5
