"""Abuse limits (PROTOCOL.md 2 ``rate_limited``, relaynet.limits) through the handlers: a cap on
undelivered messages per mailbox and on recipients per fan-out, each 429 with ``Retry-After``,
and nothing written by a refused call."""

from __future__ import annotations

import pytest

from relaynet.config import settings
from relaynet.store import table as t
from tests.conftest import apply

SPEC = """
network: limits
agents:
  - {name: sender, instances: 1}
  - {name: busy, instances: 1, groups: [pair]}
  - {name: other, instances: 1, groups: [pair]}
"""


@pytest.fixture
def net(table, monkeypatch):
    monkeypatch.setenv("RELAYNET_MAILBOX_CAP", "3")
    settings.cache_clear()
    return apply(SPEC)


def scan() -> list[dict]:
    items = []
    for page in t.client().get_paginator("scan").paginate(TableName=t.table_name()):
        items += page["Items"]
    return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))


def refused(api, tool, body, token):
    before = scan()
    status, out, headers = api(tool, body, token)
    assert status == 429, out
    assert out["error"]["code"] == "rate_limited" and int(headers["retry-after"]) >= 1
    assert scan() == before, "a refused call wrote something"
    return out["error"]


def test_a_full_mailbox_refuses_asks_until_it_is_read(api, net):
    me, busy = net.token("sender0"), net.token("busy0")
    for n in range(3):
        assert api("network_ask", {"toAgent": "busy", "body": f"ping {n}"}, me)[0] == 200
    err = refused(api, "network_ask", {"toAgent": "busy", "body": "ping 3"}, me)
    assert err["details"] == {"mailbox": {"agent": "busy"}, "cap": 3}
    assert len(api("network_inbox", {}, busy)[1]["messages"]) == 3
    assert api("network_ask", {"toAgent": "busy", "body": "ping 4"}, me)[0] == 200


def test_a_full_instance_mailbox_refuses_too(api, net):
    me, inst = net.token("sender0"), net.principals["busy0"].instance_id
    for n in range(3):
        assert api("network_ask", {"toInstance": inst, "body": f"ping {n}"}, me)[0] == 200
    err = refused(api, "network_ask", {"toInstance": inst, "body": "again"}, me)
    assert err["details"]["mailbox"] == {"instanceId": inst}


def test_a_reply_and_a_channel_send_into_a_full_mailbox_are_refused(api, net):
    me, busy = net.token("sender0"), net.token("busy0")
    thread = api("network_ask", {"toAgent": "busy", "body": "question"}, me)[1]["threadId"]
    api("network_inbox", {}, busy)
    api("network_reply", {"threadId": thread, "body": "answer"}, busy)  # sender: 1 undelivered
    ch = api("channels", {"action": "open", "type": "conversation", "target": "sender"}, busy)[1]["channel_id"]
    api("say", {"channel_id": ch, "content": "one"}, busy)  # sender: opened + text = 3
    refused(api, "network_reply", {"threadId": thread, "body": "more"}, busy)
    refused(api, "say", {"channel_id": ch, "content": "two"}, busy)
    refused(api, "channels", {"action": "open", "type": "conversation", "target": "sender", "message": "hi"}, busy)
    assert len(api("network_inbox", {}, me)[1]["messages"]) == 3
    assert api("say", {"channel_id": ch, "content": "two"}, busy)[0] == 200


def test_system_messages_are_never_refused(api, net):
    me, busy = net.token("sender0"), net.principals["busy0"]
    for n in range(3):
        api("network_ask", {"toAgent": "busy", "body": f"ping {n}"}, me)
    status, task, _ = api("network_delegate", {"objective": "x", "toInstance": busy.instance_id}, me)
    assert status == 200 and task["state"] == "offered"  # the offer lands in the full mailbox's instance


def test_a_fan_out_over_the_cap_reaches_nobody(api, net, monkeypatch):
    monkeypatch.setenv("RELAYNET_MAX_FANOUT", "1")
    settings.cache_clear()
    err = refused(api, "network_ask", {"toAgent": "pair", "body": "all hands"}, net.token("sender0"))
    assert err["details"] == {"recipients": 2, "max": 1}
    assert api("network_ask", {"toAgent": "busy", "body": "just you"}, net.token("sender0"))[0] == 200
