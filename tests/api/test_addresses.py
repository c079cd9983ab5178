"""Addresses (PROTOCOL.md 2 "Common shapes", 4.3, 4.5, 6): ``recipients`` in the results of
ask, reply and their control twins is a list of address objects, one per mailbox reached."""

from __future__ import annotations


def test_an_ask_lists_its_recipients_as_addresses(api, demo):
    planner = demo.token("planner0")
    coder1 = demo.principals["coder1"].instance_id
    out = api("network_ask", {"toAgent": "coder", "body": "to the agent"}, planner)[1]
    assert out["recipients"] == [{"agent": "coder"}]
    out = api("network_ask", {"toAgent": "core", "body": "to the group"}, planner)[1]
    assert out["recipients"] == [{"agent": "coder"}]  # the group's members but the sender's own agent
    out = api("network_ask", {"toInstance": coder1, "body": "to one instance"}, planner)[1]
    assert out["recipients"] == [{"instanceId": coder1}]
    out = api("network_ask", {"body": "just a note in a new thread"}, planner)[1]
    assert out["recipients"] == []


def test_a_reply_lists_its_recipient_as_an_address(api, demo):
    planner, reviewer = demo.token("planner0"), demo.token("reviewer0")
    thread = api("network_ask", {"toAgent": "reviewers", "body": "review please"}, planner)[1]["threadId"]
    status, out, _ = api("network_reply", {"threadId": thread, "body": "on it"}, reviewer)
    assert status == 200 and out["recipients"] == [{"agent": "planner"}]


def test_control_ask_and_reply_list_addresses_too(api, demo):
    ops = demo.tokens["representatives"]["ops"]
    out = api("control_ask", {"toAgent": "reviewers", "body": "status?"}, ops)[1]
    assert out["recipients"] == [{"agent": "reviewer"}]
    api("network_reply", {"threadId": out["threadId"], "body": "all green"}, demo.token("reviewer0"))
    status, back, _ = api("control_reply", {"threadId": out["threadId"], "body": "thanks"}, ops)
    assert status == 200 and back["recipients"] == [{"agent": "reviewer"}]
