"""Webhooks end to end (docs/protocol.md 10.3) against `relaynet serve`: the local stack runs the
template's notifier from the store's DynamoDB stream and the push retries on its schedule. A
receiver on loopback gets a correctly signed event within 2 s of an ask, a delegate offer and a
wake; a failing receiver is retried with backoff, then the delivery is marked failed where a
representative sees it (control_list_agents)."""

from __future__ import annotations

import json
import queue
import time

import httpx
import pytest

from relaynet import webhooks
from tests.e2e.conftest import start_hub, stop_hub, tool
from tests.webhook_receiver import receiver  # noqa: F401 - a fixture

SECRET = "s3cret-signing-token-for-coder0"
FAILING_SECRET = "another-signing-token-reviewer"
# A short backoff through the product's own settings: first retry after 0.2 s, doubling, for 1.5 s.
BACKOFF = {"RELAYNET_PUSH_RETRY_BASE_SECONDS": "0.2", "RELAYNET_PUSH_RETRY_WINDOW_SECONDS": "1.5"}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = start_hub(tmp_path_factory.mktemp("webhooks"), "--sweep-interval", "0.2", env=BACKOFF)
    yield h
    stop_hub(h)


def set_push(hub, token: str, url: str, secret: str) -> httpx.Response:
    return httpx.put(f"{hub.url}/v1/push", json={"url": url, "token": secret}, headers={"Authorization": f"Bearer {token}"},
                     timeout=10)


@pytest.fixture(scope="module")
def coder0(hub, receiver):
    r = set_push(hub, hub.token("coder", 0), f"{receiver.url}/coder0", SECRET)
    assert r.status_code == 200, r.text
    assert r.json() == {"push": {"url": f"{receiver.url}/coder0"}, "source": "instance"}  # never the token
    return hub.instance("coder", 0)


def received(receiver, path: str, secret: str) -> dict:
    # how soon is benchmarks/bench_push.py's business (issue 26: the first POST's p50); here: that it comes
    headers, body, _ = receiver.next(path, timeout=15)
    event = webhooks.verify(headers, body, secret)
    assert headers["Content-Type"] == "application/json" and headers["X-Relaynet-Event"] == event["event"]
    assert headers["X-Relaynet-Delivery"] == event["deliveryId"]
    return event


def test_an_ask_reaches_the_receiver_signed_and_never_carries_the_body(hub, receiver, coder0):
    sent = tool(hub, "network_ask", {"toAgent": "coder", "body": "the secret plan is in PR 9"}, hub.token("planner"))
    headers, body, _ = receiver.next("/coder0", timeout=15)  # how soon: benchmarks/bench_push.py (issue 26)
    event = webhooks.verify(headers, body, SECRET)
    assert b"secret plan" not in body
    assert set(event) == {"event", "networkId", "instanceId", "messageId", "kind", "createdAt", "deliveryId"}
    assert event["event"] == "message" and event["kind"] == "ask"
    assert event["instanceId"] == coder0 and event["messageId"] == sent["messageId"]
    assert event["networkId"] == hub.tokens["networks"]["demo"]["networkId"]
    # the event says what to fetch; network_inbox delivers it
    inbox = tool(hub, "network_inbox", {}, hub.token("coder", 0))["messages"]
    assert [m["id"] for m in inbox] == [sent["messageId"]] and inbox[0]["createdAt"] == event["createdAt"]


def test_a_delegate_offer_reaches_the_receiver_as_a_task_offer(hub, receiver, coder0):
    task = tool(hub, "network_delegate", {"toInstance": coder0, "objective": "Add GET /health"}, hub.token("planner"))
    event = received(receiver, "/coder0", SECRET)
    assert event["event"] == "task_offer" and event["kind"] == "task_offer"
    assert event["taskId"] == task["taskId"] and event["instanceId"] == coder0
    tool(hub, "network_inbox", {}, hub.token("coder", 0))


def test_control_wake_agent_sends_a_wake_event(hub, receiver, coder0):
    rep = hub.tokens["representatives"]["ops"]
    woken = tool(hub, "control_wake_agent", {"toInstance": coder0, "reason": "deploy window"}, rep)
    event = received(receiver, "/coder0", SECRET)
    assert event["event"] == "wake" and event["kind"] == "notice" and event["messageId"] == woken["messageId"]
    tool(hub, "network_inbox", {}, hub.token("coder", 0))


def test_a_failing_receiver_is_retried_with_backoff_then_marked_failed_for_the_representative(hub, receiver):
    path = "/reviewer-down"
    receiver.fail[path] = 503
    reviewer = hub.instance("reviewer", 0)
    assert set_push(hub, hub.token("reviewer", 0), f"{receiver.url}{path}", FAILING_SECRET).status_code == 200
    rep = hub.tokens["representatives"]["ops"]

    def push_status() -> dict:
        agents = tool(hub, "control_list_agents", {}, rep)["agents"]
        (inst,) = [i for a in agents for i in a["instances"] if i["id"] == reviewer]
        return inst["push"]

    assert push_status()["failures"] == 0
    sent_at = time.monotonic()
    tool(hub, "network_ask", {"toAgent": "reviewer", "body": "ping"}, hub.token("planner"))
    deadline = time.monotonic() + 15
    while push_status()["failures"] == 0:
        assert time.monotonic() < deadline, "the delivery was never marked failed"
        time.sleep(0.2)
    status = push_status()
    assert status["lastStatus"] == 503 and status["lastError"] == "HTTP 503" and status["lastDeliveredAt"] is None
    assert status["url"] == f"{receiver.url}{path}" and status["source"] == "instance"

    attempts = []
    while True:
        try:
            got_path, headers, body, at = receiver.got.get(timeout=1.0)
        except queue.Empty:
            break
        if got_path == path:
            attempts.append((headers, body, at))
    assert len(attempts) >= 3, f"only {len(attempts)} attempts"
    events = [webhooks.verify(h, b, FAILING_SECRET) for h, b, _ in attempts]  # each attempt freshly signed
    assert len({e["deliveryId"] for e in events}) == 1 and events[0]["event"] == "message"
    gaps = [b[2] - a[2] for a, b in zip(attempts, attempts[1:])]
    assert gaps == sorted(gaps) or max(gaps) > 0.35, f"no backoff: {gaps}"  # waits grow (sweep ticks are 0.2 s)
    assert attempts[-1][2] - sent_at >= 1.5  # retried for the whole window before giving up

    # the receiver is back: the next message is delivered and recorded
    receiver.fail.pop(path)
    tool(hub, "network_ask", {"toAgent": "reviewer", "body": "ping again"}, hub.token("planner"))
    deadline = time.monotonic() + 5
    while push_status()["lastDeliveredAt"] is None:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert push_status()["lastStatus"] == 204 and push_status()["failures"] == 1


def test_the_sdk_sets_reads_and_removes_a_push_endpoint(hub, receiver):
    from relaynet.client import ApiError, RelaynetClient

    with RelaynetClient(hub.url, hub.token("planner")) as planner:
        assert planner.inbox_summary()["undelivered"] >= 0
        set_ = planner.set_push(f"{receiver.url}/planner", "planner-signing-secret-123",
                                {"schemes": ["Bearer"], "credentials": "xyz"})
        assert set_ == {"push": {"url": f"{receiver.url}/planner", "authentication": {"schemes": ["Bearer"]}},
                        "source": "instance"}
        tool(hub, "network_ask", {"toAgent": "planner", "body": "hi"}, hub.token("reviewer"))
        headers, body, _ = receiver.next("/planner", timeout=15)
        assert headers["Authorization"] == "Bearer xyz"
        webhooks.verify(headers, body, "planner-signing-secret-123")
        assert planner.delete_push() == {"removed": True}
        try:
            planner.set_push("http://hooks.example.com/x", "planner-signing-secret-123")
        except ApiError as exc:
            assert exc.status == 400 and exc.code == "invalid_argument"
        else:
            raise AssertionError("http to a non-loopback host was accepted")
