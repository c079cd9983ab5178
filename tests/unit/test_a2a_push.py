"""A2A push notification configs' delivery (relaynet.a2a.push, docs/protocol.md 13.6): senders
racing on one change post it once (real threads on DynamoDB Local: the lease is a conditional
write on the config's ``seq``), a change made while another sender works is still sent, a
receiver that fails is listed for a retry and caught up by it, and a config's checks refuse
bad input before any read. The SDK client's view of it all: tests/e2e/test_a2a_push_e2e.py."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relaynet import tasks, webhooks
from relaynet.a2a import push
from relaynet.a2a.wire import A2AError
from relaynet.config import settings
from relaynet.models import worker as w
from relaynet.store import a2a_push as store
from tests.conftest import apply

SPEC = "network: pushers\nagents:\n  - {name: worker, instances: 1}\n  - {name: boss, instances: 1}\n"
TOKEN = "unit-push-token-0123456789"


class Receiver:
    """Counts POSTs on 127.0.0.1 (bodies checked with relaynet.webhooks.verify); ``status`` is
    what it answers."""

    def __init__(self):
        self.bodies: list[dict] = []
        self.status = 204
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    outer.bodies.append(webhooks.verify(dict(self.headers), body, TOKEN))
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def states(self) -> list[str]:
        return [b["statusUpdate"]["metadata"]["relaynet"]["state"] for b in self.bodies if "statusUpdate" in b]


@pytest.fixture
def receiver(monkeypatch):
    monkeypatch.setenv("RELAYNET_PUSH_ALLOW_LOOPBACK", "true")
    monkeypatch.setenv("RELAYNET_PUSH_AT_WRITE", "false")
    settings.cache_clear()
    r = Receiver()
    yield r
    r.server.shutdown()


def _task_with_config(net, receiver) -> str:
    boss, worker = net.principals["boss0"], net.principals["worker0"]
    task_id = tasks.delegate(boss, w.DelegateRequest(objective="push race", toAgent="worker"))["taskId"]
    push.create(boss, "worker", push.ConfigParams(taskId=task_id, url=receiver.url, token=TOKEN))
    if tasks.load_task(net.network_id, task_id)["state"] != "offered":
        pytest.fail("the worker should have been offered the task")
    assert worker is not None
    return task_id


def test_senders_racing_on_one_change_post_it_once(server_table, receiver):
    net = apply(SPEC)
    task_id = _task_with_config(net, receiver)
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
    assert receiver.states() == ["accepted", "working", "blocked", "working"]


def test_a_failed_post_is_listed_for_a_retry_and_the_retry_catches_up(server_table, receiver, monkeypatch):
    monkeypatch.setenv("RELAYNET_PUSH_RETRY_BASE_SECONDS", "0")
    settings.cache_clear()
    net = apply(SPEC)
    task_id = _task_with_config(net, receiver)
    worker = net.principals["worker0"]
    receiver.status = 500
    tasks.update(worker, w.TaskUpdateRequest(taskId=task_id, status="accepted"))
    assert push.dispatch(net.network_id, task_id) == {"retrying": 1}
    [item] = store.partition(net.network_id, task_id)[2]
    assert item["attempts"] == 1 and item["lastStatus"] == 500 and item["GSI1PK"] == store.RETRY_PK
    receiver.status = 204
    tasks.update(worker, w.TaskUpdateRequest(taskId=task_id, status="working"))  # a change while it is behind
    stats = push.retry_due()
    assert stats["due"] == 1 and stats["delivered"] == 1
    [item] = store.partition(net.network_id, task_id)[2]
    assert "GSI1PK" not in item and item["sent"]["state"] == "working"
    # the failed attempt and the catch-up carry the same event; the receiver now has the newest state
    assert receiver.states() == ["accepted", "working"]
    assert push.retry_due() == {"due": 0}


@pytest.mark.parametrize("fields, field", [
    ({"url": "ftp://e.com/x", "token": TOKEN}, "url"),
    ({"url": "https://e.com/x", "token": "x" * 15}, "token"),
    ({"url": "https://e.com/x", "token": "x" * 257}, "token"),
    ({"url": "https://e.com/x", "token": TOKEN, "id": "a#b"}, "id"),
])
def test_a_bad_config_is_refused_before_any_read(fields, field):
    with pytest.raises(A2AError) as err:
        push.check(push.ConfigParams(taskId="task_1", **fields))
    assert err.value.code == -32602 and [f["field"] for f in err.value.data["fields"]] == [field]


def test_an_event_is_a_json_stream_response_and_its_delivery_id_is_stable():
    item = {"networkId": "n", "taskId": "t", "owner": "agent:a", "configId": "c"}
    status = {"statusUpdate": {"taskId": "t", "contextId": "x", "status": {"state": "TASK_STATE_WORKING"},
                               "metadata": {"relaynet": {"state": "working"}}}}
    assert push.delivery_id(item, status) == push.delivery_id(item, json.loads(json.dumps(status)))
    other = {**status, "statusUpdate": {**status["statusUpdate"], "metadata": {"relaynet": {"state": "accepted"}}}}
    assert push.delivery_id(item, status) != push.delivery_id(item, other)
