"""A2A push notification configs' delivery (relaynet.a2a.push, docs/protocol.md 13.6): senders
racing on one change post it once (real threads on DynamoDB Local: the lease is a conditional
write on the config's ``seq``), a change made while another sender works is still sent, a
receiver that fails is listed for a retry and caught up by it, and a config's checks refuse
bad input before any read. The SDK client's view of it all: tests/e2e/test_a2a_push_e2e.py."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from relaynet import clock, tasks, webhooks
from relaynet.a2a import push, wire
from relaynet.a2a.wire import A2AError
from relaynet.config import settings
from relaynet.models import worker as w
from relaynet.store import a2a_push as store
from tests.conftest import apply
from tests.webhook_receiver import Receiver

SPEC = "network: pushers\nagents:\n  - {name: worker, instances: 1}\n  - {name: boss, instances: 1}\n"
TOKEN = "unit-push-token-0123456789"


def states(receiver: Receiver, seen: list[dict]) -> list[str]:
    """The Relaynet states of the status updates ``receiver`` was posted so far (each body
    checked with relaynet.webhooks.verify; ``seen`` keeps the bodies already taken)."""
    while not receiver.got.empty():
        _, headers, body, _ = receiver.got.get()
        seen.append(webhooks.verify(headers, body, TOKEN))
    return [b["statusUpdate"]["metadata"]["relaynet"]["state"] for b in seen if "statusUpdate" in b]


@pytest.fixture
def hook(monkeypatch):
    """A receiver on loopback, which the local stack's URL rules allow."""
    monkeypatch.setenv("RELAYNET_PUSH_ALLOW_LOOPBACK", "true")
    settings.cache_clear()
    r = Receiver()
    yield r
    r.server.shutdown()


def _task_with_config(net, hook) -> str:
    boss = net.principals["boss0"]
    task_id = tasks.delegate(boss, w.DelegateRequest(objective="push race", toAgent="worker"))["taskId"]
    push.create(boss, "worker", wire.PushConfigParams(taskId=task_id, url=f"{hook.url}/hook", token=TOKEN))
    assert tasks.load_task(net.network_id, task_id)["state"] == "offered"
    return task_id


def test_senders_racing_on_one_change_post_it_once(server_table, hook):
    net = apply(SPEC)
    task_id = _task_with_config(net, hook)
    worker = net.principals["worker0"]
    for state in ("accepted", "working", "blocked", "working"):
        extra = {"reason": "which one?"} if state == "blocked" else {}
        tasks.update(worker, w.TaskUpdateRequest(taskId=task_id, status=state, **extra))
        barrier = threading.Barrier(6)

        def go(_):
            barrier.wait()
            return push.dispatch(net.network_id, task_id)

        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(go, range(6)))
        assert sum(r.get("delivered", 0) for r in results) == 1, results
    assert states(hook, []) == ["accepted", "working", "blocked", "working"]


def test_a_sender_that_read_before_another_delivered_cannot_take_the_config(server_table, hook):
    """The lease is conditional on the ``seq`` the sender read: a sender whose read predates
    another's delivery (the stream path reading late, say) would post a change again."""
    net = apply(SPEC)
    task_id = _task_with_config(net, hook)
    tasks.update(net.principals["worker0"], w.TaskUpdateRequest(taskId=task_id, status="accepted"))
    [stale] = store.partition(net.network_id, task_id)[2]
    assert push.dispatch(net.network_id, task_id) == {"delivered": 1}
    now = clock.now_ms()
    assert not store.lease(stale, now, now + push.LEASE_MS)
    [fresh] = store.partition(net.network_id, task_id)[2]
    assert fresh["sent"]["state"] == "accepted" and store.lease(fresh, now, now + push.LEASE_MS)
    assert states(hook, []) == ["accepted"]


def test_a_failed_post_is_listed_for_a_retry_and_the_retry_catches_up(server_table, hook, monkeypatch):
    monkeypatch.setenv("RELAYNET_PUSH_RETRY_BASE_SECONDS", "0")
    settings.cache_clear()
    net = apply(SPEC)
    task_id = _task_with_config(net, hook)
    worker = net.principals["worker0"]
    hook.fail["/hook"] = 500
    tasks.update(worker, w.TaskUpdateRequest(taskId=task_id, status="accepted"))
    assert push.dispatch(net.network_id, task_id) == {"retrying": 1}
    [item] = store.partition(net.network_id, task_id)[2]
    assert item["attempts"] == 1 and item["lastStatus"] == 500 and item["GSI1PK"] == store.RETRY_PK
    hook.fail.pop("/hook")
    tasks.update(worker, w.TaskUpdateRequest(taskId=task_id, status="working"))  # a change while it is behind
    stats = push.retry_due()
    assert stats["due"] == 1 and stats["delivered"] == 1
    [item] = store.partition(net.network_id, task_id)[2]
    assert "GSI1PK" not in item and item["sent"]["state"] == "working"
    # the failed attempt and the catch-up carry the same event; the receiver now has the newest state
    assert states(hook, []) == ["accepted", "working"]
    assert push.retry_due() == {"due": 0}


@pytest.mark.parametrize("fields, field", [
    ({"url": "ftp://e.com/x", "token": TOKEN}, "url"),
    ({"url": "https://e.com/x", "token": "x" * 15}, "token"),
    ({"url": "https://e.com/x", "token": "x" * 257}, "token"),
    ({"url": "https://e.com/x", "token": TOKEN, "id": "a#b"}, "id"),
])
def test_a_bad_config_is_refused_before_any_read(fields, field):
    with pytest.raises(A2AError) as err:
        push.check(wire.PushConfigParams(taskId="task_1", **fields))
    assert err.value.code == -32602 and [f["field"] for f in err.value.data["fields"]] == [field]


def test_an_event_is_a_json_stream_response_and_its_delivery_id_is_stable():
    item = {"networkId": "n", "taskId": "t", "owner": "agent:a", "configId": "c"}
    status = {"statusUpdate": {"taskId": "t", "contextId": "x", "status": {"state": "TASK_STATE_WORKING"},
                               "metadata": {"relaynet": {"state": "working"}}}}
    assert push.delivery_id(item, status) == push.delivery_id(item, json.loads(json.dumps(status)))
    other = {**status, "statusUpdate": {**status["statusUpdate"], "metadata": {"relaynet": {"state": "accepted"}}}}
    assert push.delivery_id(item, status) != push.delivery_id(item, other)
