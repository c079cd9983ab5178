"""The A2A bridge's rules (docs/protocol.md 13.4, relaynet.a2a.bridge) on moto, with remotes on
loopback that answer what a test scripts: the ``a2a:`` entry of a spec, the member's tokenless
instance, and each way a remote can answer (a Message, a refusal, a forgotten task, a rejection,
an unreadable card). The SDK's own server drives the end-to-end path
(tests/e2e/test_a2a_bridge_e2e.py)."""

from __future__ import annotations

import json
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relaynet import admin, clock, tasks
from relaynet.a2a import bridge
from relaynet.errors import InvalidArgument
from relaynet.identity import authorize
from relaynet.models.worker import DelegateRequest, TaskGetRequest, TaskUpdateRequest
from relaynet.store import a2a as a2a_store
from relaynet.store import table as t
from relaynet_local import lambdas
from relaynet_local.streams import WriteNotifier
from relaynet_local.template import load_template
from tests.conftest import ROOT

SPEC = """\
network: bridged
agents:
  - name: planner
    instances: 1
  - name: remote
{extra}    a2a: {{url: "{url}", authentication: {{schemes: [Bearer], credentials: s3cret-credential}}}}
"""


class Scripted:
    """A remote on 127.0.0.1: its card at ``/card`` (``card_status`` 200 or not; ``card_extra``
    added to it) and JSON-RPC at ``/rpc``, answering each method with ``answers[method]`` (a
    result or ``{"error": ...}``), after ``delays[method]`` seconds and after running
    ``hooks[method](params)`` (the answer is the one scripted before the hook ran). ``seen`` holds
    every request's method, params and Authorization header."""

    def __init__(self):
        self.card_status = 200
        self.card_extra: dict = {}
        self.rpc_status = 200  # not 200: every JSON-RPC request gets it and no JSON-RPC answer
        self.answers: dict[str, dict] = {}
        self.delays: dict[str, float] = {}
        self.hooks: dict = {}
        self.seen: list[tuple[str, dict, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._json(outer.card_status, {"name": "scripted", "supportedInterfaces": [
                    {"url": f"{outer.base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                    **outer.card_extra})

            def do_POST(self):  # noqa: N802
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.seen.append((req["method"], req["params"], self.headers.get("Authorization")))
                if outer.rpc_status != 200:
                    return self._json(outer.rpc_status, {"error": "unauthorized"})
                answer = outer.answers[req["method"]]
                if req["method"] in outer.hooks:
                    outer.hooks[req["method"]](req["params"])
                if req["method"] in outer.delays:
                    stop.wait(outer.delays[req["method"]])
                key = "error" if "error" in answer else "result"
                self._json(200, {"jsonrpc": "2.0", "id": req["id"], key: answer.get("error", answer)})

            def log_message(self, *args):
                pass

        stop = threading.Event()  # never set: a wait on it is the scripted delay
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def remote(monkeypatch):
    monkeypatch.setenv("RELAYNET_PUSH_ALLOW_LOOPBACK", "true")  # what the local stack sets for loopback targets
    from relaynet.config import settings

    settings.cache_clear()
    scripted = Scripted()
    yield scripted
    scripted.server.shutdown()
    settings.cache_clear()


@pytest.fixture
def net(table, remote):
    tokens = admin.apply_spec(SPEC.format(extra="", url=f"{remote.base}/card"))
    return tokens["networks"]["bridged"]


def _planner(net):
    return authorize(net["instances"]["planner"][0]["token"])


def _delegate(net, objective="Fix the flaky test") -> str:
    return tasks.delegate(_planner(net), DelegateRequest(toAgent="remote", objective=objective))["taskId"]


def _task(net, task_id):
    return tasks.get(_planner(net), TaskGetRequest(taskId=task_id), lambda *_: [])["task"]


def _run(later_ms: int = 0) -> dict:
    return bridge.run(clock.now_ms() + later_ms)


@pytest.mark.parametrize("extra, message", [
    ("    launch: {command: [claude]}\n", "neither launch: nor instances above 1"),
    ("    instances: 2\n", "neither launch: nor instances above 1"),
])
def test_an_a2a_member_takes_no_launch_and_no_second_instance(extra, message):
    with pytest.raises(InvalidArgument) as err:
        admin.parse(SPEC.format(extra=extra, url="https://agents.example.com/card"), check_store=False)
    assert message in err.value.message


def test_an_a2a_url_follows_the_push_target_rules():
    with pytest.raises(InvalidArgument) as err:  # not the local stack: no http, no loopback
        admin.parse(SPEC.format(extra="", url="http://127.0.0.1:9/card"), check_store=False)
    assert err.value.details["fields"][0]["field"] == "bridged.agents[1].a2a.url"


def test_the_member_has_one_tokenless_instance_and_a_second_apply_adds_nothing(table, remote):
    spec = SPEC.format(extra="", url=f"{remote.base}/card")
    first = admin.apply_spec(spec)
    assert "remote" not in first["networks"]["bridged"]["instances"]
    (member,) = a2a_store.members()
    inst = t.get(f"NET#{member['networkId']}", f"INST#{member['instanceId']}")
    assert inst["bridge"] == "a2a" and "tokenHash" not in inst
    admin.apply_spec(spec)
    assert a2a_store.members() == [member]
    assert len(t.query(f"NET#{member['networkId']}", sk_prefix="INST#")) == 2  # planner's and the member's


def test_a_remote_answering_with_a_message_completes_the_task_with_its_text(net, remote):
    remote.answers["SendMessage"] = {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "It was a race."}]}}
    task_id = _delegate(net)
    assert _run()["sent"] == 1
    done = _task(net, task_id)
    assert done["state"] == "completed" and done["history"][-1]["reason"] == "It was a race."
    method, params, auth = remote.seen[0]
    assert (method, params["message"]["messageId"], auth) == ("SendMessage", task_id, "Bearer s3cret-credential")
    assert params["configuration"] == {"returnImmediately": True}
    assert a2a_store.remotes(net["networkId"], done["assignee"]) == []


def test_a_remote_refusing_the_task_fails_it_and_sends_nothing_again(net, remote):
    remote.answers["SendMessage"] = {"error": {"code": -32005, "message": "Content type not supported"}}
    task_id = _delegate(net)
    _run()
    failed = _task(net, task_id)
    assert failed["state"] == "failed" and "refused the task (-32005): Content type not supported" in failed["history"][-1]["reason"]
    _run(60_000)
    assert [m for m, *_ in remote.seen] == ["SendMessage"]


def test_a_task_the_remote_forgot_fails_saying_so(net, remote):
    remote.answers["SendMessage"] = {"task": {"id": "r1", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}
    task_id = _delegate(net)
    _run()
    assert _task(net, task_id)["state"] == "accepted"  # SUBMITTED: taken, not started
    remote.answers["GetTask"] = {"error": {"code": -32001, "message": "Task not found"}}
    _run(bridge.BASE_POLL_MS)
    failed = _task(net, task_id)
    assert failed["state"] == "failed" and "no longer knows task r1" in failed["history"][-1]["reason"]
    assert [m for m, *_ in remote.seen] == ["SendMessage", "GetTask"]


def test_polls_back_off_while_nothing_changes_and_a_rejection_fails_the_task(net, remote):
    remote.answers["SendMessage"] = {"task": {"id": "r1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}
    task_id = _delegate(net)
    start = clock.now_ms()
    bridge.run(start)
    assert _task(net, task_id)["state"] == "working"
    remote.answers["GetTask"] = remote.answers["SendMessage"]["task"]
    polls = []
    for at in range(start, start + 30_000, 500):  # a run every half second for 30 s
        if bridge.run(at)["polled"]:
            polls.append(at - start)
    assert polls == [2_000, 6_000, 14_000]  # 2 s, then doubling: the next is due at 30 s
    remote.answers["GetTask"] = {"id": "r1", "contextId": "c", "status": {
        "state": "TASK_STATE_REJECTED", "message": {"messageId": "x", "role": "ROLE_AGENT", "parts": [{"text": "Not my repo"}]}}}
    bridge.run(start + 60_000)
    failed = _task(net, task_id)
    assert failed["state"] == "failed" and failed["history"][-1]["reason"] == "Not my repo"


def test_an_unreadable_card_leaves_the_member_unrefreshed_and_says_why(net, remote):
    remote.card_status = 503
    (member,) = a2a_store.members()
    stats = _run(120_000)
    assert stats["unreachable"] == 1
    inst = t.get(f"NET#{member['networkId']}", f"INST#{member['instanceId']}")
    assert inst["a2a"]["ok"] is False and "HTTP 503" in inst["a2a"]["error"]
    remote.card_status = 200
    _run(180_000)
    assert t.get(f"NET#{member['networkId']}", f"INST#{member['instanceId']}")["a2a"]["ok"] is True


def test_an_offer_to_the_member_starts_the_bridge_at_its_write_and_only_for_that_member(net, remote):
    remote.answers["SendMessage"] = {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "Sent at once."}]}}
    template = load_template(ROOT / "template.yaml")
    calls: queue.SimpleQueue = queue.SimpleQueue()
    notifier = WriteNotifier(template, lambda fn, event: calls.put((fn.logical_id, event))).start()
    try:
        tasks.delegate(_planner(net), DelegateRequest(toAgent="planner", objective="Not for the bridge"))
        task_id = _delegate(net)  # offered to the member at the delegation's write
        seen: list[tuple[str, dict]] = []
        while not any(fn == "A2aBridgeFunction" for fn, _ in seen):
            seen.append(calls.get(timeout=10))
    finally:
        notifier.stop()
    (event,) = [event for fn, event in seen if fn == "A2aBridgeFunction"]
    (record,) = event["Records"]  # the member's offer only: the planner's went to the webhook notifier alone
    assert record["dynamodb"]["NewImage"]["taskId"]["S"] == task_id
    fn = template.functions["A2aBridgeFunction"]
    assert lambdas.invoke(fn.code_uri, fn.handler, event, function_name=fn.logical_id, timeout=120) == {
        "batchItemFailures": []}
    assert _task(net, task_id)["state"] == "completed"
    assert [m for m, *_ in remote.seen] == ["SendMessage"]
    other = {"Records": [{**record, "dynamodb": {**record["dynamodb"], "NewImage": {
        **record["dynamodb"]["NewImage"], "PK": {"S": "NET#elsewhere#MBOX#I#inst_x"}}}}]}
    lambdas.invoke(fn.code_uri, fn.handler, other, function_name=fn.logical_id, timeout=120)
    assert [m for m, *_ in remote.seen] == ["SendMessage"]  # no member owns that mailbox: nothing sent


def test_a_cancel_reaches_the_remote_at_the_next_run_not_the_next_poll(net, remote):
    remote.answers["SendMessage"] = {"task": {"id": "r1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}
    remote.answers["CancelTask"] = {"id": "r1", "contextId": "c", "status": {"state": "TASK_STATE_CANCELED"}}
    task_id = _delegate(net)
    start = clock.now_ms()
    bridge.run(start)  # sent; the first poll is due in 2 s
    tasks.update(_planner(net), TaskUpdateRequest(taskId=task_id, status="cancelled", reason="not needed"))
    assert bridge.run(start + 500)["cancelled"] == 1
    assert [m for m, *_ in remote.seen] == ["SendMessage", "CancelTask"]
    assert remote.seen[1][1] == {"id": "r1"}


def test_a_remote_refusing_the_credentials_fails_the_task_saying_so_and_is_not_retried(net, remote):
    remote.rpc_status = 401  # the card is public, the JSON-RPC URL wants other credentials
    task_id = _delegate(net)
    _run()
    failed = _task(net, task_id)
    assert failed["state"] == "failed"
    assert "HTTP 401: the remote refused the credentials" in failed["history"][-1]["reason"]
    _run(120_000)
    assert [m for m, *_ in remote.seen] == ["SendMessage"]


WORKING = {"id": "r1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
COMPLETED = {"id": "r1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
             "artifacts": [{"artifactId": "a1", "name": "out", "parts": [{"url": "https://example.com/out/r1.txt"}]}]}


@pytest.fixture
def pushing(remote, monkeypatch):
    """The hub reachable (RELAYNET_PUBLIC_URL) and a remote whose card takes push configs."""
    from relaynet.config import settings

    monkeypatch.setenv("RELAYNET_PUBLIC_URL", "https://hub.example.com")
    settings.cache_clear()
    remote.card_extra = {"capabilities": {"pushNotifications": True}}
    return remote


def test_a_notification_while_another_run_follows_the_task_is_followed_once_that_run_lets_go(net, pushing):
    remote = pushing
    remote.answers["SendMessage"] = {"task": WORKING}
    task_id = _delegate(net)
    start = clock.now_ms()
    bridge.run(start)
    token = remote.seen[0][1]["configuration"]["taskPushNotificationConfig"]["token"]
    inst = _task(net, task_id)["assignee"]
    remote.answers["GetTask"] = WORKING
    pushed_run: dict = {}

    def completes_and_notifies(params):  # while the scheduled run waits for GetTask's WORKING
        del remote.hooks["GetTask"]
        remote.answers["GetTask"] = COMPLETED
        bridge.receive_push(net["networkId"], inst, task_id, token)
        pushed_run.update(bridge.run(pushed=[a2a_store.receipt(net["networkId"], inst, task_id)]))

    remote.hooks["GetTask"] = completes_and_notifies
    scheduled = bridge.run(start + bridge.BASE_POLL_MS)
    assert (pushed_run["polled"], pushed_run["pushed"]) == (0, 0)  # the task's lease was held: it gave up
    assert (scheduled["polled"], scheduled["pushed"]) == (2, 1)  # the holder read the receipt once it let go
    done = _task(net, task_id)
    assert done["state"] == "completed" and len(done["artifacts"]) == 1
    assert a2a_store.remotes(net["networkId"], inst) == [] and a2a_store.receipt(net["networkId"], inst, task_id) is None


@pytest.fixture
def net_on_store(server_table, remote):
    """The network of ``net`` on DynamoDB Local, for races between real threads."""
    return admin.apply_spec(SPEC.format(extra="", url=f"{remote.base}/card"))["networks"]["bridged"]


def test_overlapping_runs_mirror_a_completed_remote_task_once(net_on_store, remote):
    net = net_on_store
    remote.answers["SendMessage"] = {"task": WORKING}
    task_id = _delegate(net)
    start = clock.now_ms()
    bridge.run(start)
    remote.answers["GetTask"], remote.delays["GetTask"] = COMPLETED, 0.3  # every run reads COMPLETED if let
    runs = 6
    barrier = threading.Barrier(runs)

    def scheduled_run(_):
        barrier.wait()
        return bridge.run(start + 60_000)

    with ThreadPoolExecutor(runs) as pool:
        stats = list(pool.map(scheduled_run, range(runs)))
    done = _task(net, task_id)
    assert done["state"] == "completed" and len(done["artifacts"]) == 1
    assert [m for m, *_ in remote.seen].count("GetTask") == 1 and sum(s["errors"] for s in stats) == 0
