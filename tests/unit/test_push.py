"""Webhooks (docs/protocol.md 10.3) below the stream: the receiver's `verify`, the URL rules, the
push config endpoints and views, definition-level configs, and who gets an event. The stream,
the schedule and real deliveries end to end: tests/e2e/test_webhooks_e2e.py."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relaynet import admin, messaging, push, webhooks
from relaynet.errors import InvalidArgument
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.api.conftest import call
from tests.conftest import DEMO_SPEC, apply

SECRET = "a-signing-secret-of-32-characters"
EVENT = {"event": "message", "networkId": "net_1", "instanceId": "inst_1", "messageId": "msg_1", "kind": "ask",
         "createdAt": "2026-12-01T10:00:00.000Z", "deliveryId": "dlv_1"}


def signed(body: bytes, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    stamp = int(time.time() if at is None else at)
    return {"X-Relaynet-Timestamp": str(stamp), "X-Relaynet-Signature": webhooks.sign(secret, stamp, body)}


# --------------------------------------------------------------------------- verify

def test_verify_accepts_a_genuine_event_whatever_the_header_case():
    body = json.dumps(EVENT).encode()
    headers = {name.lower(): value for name, value in signed(body).items()}
    assert webhooks.verify(headers, body, SECRET) == EVENT
    assert webhooks.verify(signed(body), body.decode(), SECRET.encode()) == EVENT  # str body, bytes secret


@pytest.mark.parametrize("case", ["forged with another secret", "body tampered", "signature missing",
                                  "timestamp missing", "not hex", "other scheme", "timestamp changed"])
def test_verify_rejects_a_forged_or_altered_request(case):
    body = json.dumps(EVENT).encode()
    headers = signed(body)
    if case == "forged with another secret":
        headers = signed(body, secret="not-the-secret-of-this-receiver!")
    elif case == "body tampered":
        body = body.replace(b"msg_1", b"msg_2")
    elif case == "signature missing":
        del headers["X-Relaynet-Signature"]
    elif case == "timestamp missing":
        del headers["X-Relaynet-Timestamp"]
    elif case == "not hex":
        headers["X-Relaynet-Signature"] = "v1=zzzz"
    elif case == "other scheme":
        headers["X-Relaynet-Signature"] = headers["X-Relaynet-Signature"].replace("v1=", "v0=")
    elif case == "timestamp changed":  # the signature covers the timestamp: moving it breaks it
        headers["X-Relaynet-Timestamp"] = str(int(headers["X-Relaynet-Timestamp"]) + 1)
    with pytest.raises(webhooks.InvalidSignature):
        webhooks.verify(headers, body, SECRET)


def test_verify_rejects_a_replay_outside_the_5_minute_window():
    body = json.dumps(EVENT).encode()
    sent = time.time() - 301
    headers = signed(body, at=sent)  # correctly signed, but captured and sent again too late
    with pytest.raises(webhooks.InvalidSignature, match="replay window"):
        webhooks.verify(headers, body, SECRET)
    assert webhooks.verify(headers, body, SECRET, now=sent + 299) == EVENT  # in time, it was fine
    with pytest.raises(webhooks.InvalidSignature):  # nor from the future
        webhooks.verify(signed(body, at=time.time() + 301), body, SECRET)


def test_verify_accepts_one_good_signature_among_several():
    body = json.dumps(EVENT).encode()
    headers = signed(body)
    headers["X-Relaynet-Signature"] = "v1=" + "0" * 64 + ", " + headers["X-Relaynet-Signature"]
    assert webhooks.verify(headers, body, SECRET)["messageId"] == "msg_1"


# --------------------------------------------------------------------------- URL rules

@pytest.mark.parametrize("url", ["https://hooks.example.com/relaynet", "https://1.1.1.1:8443/x"])
def test_public_https_urls_are_allowed_in_aws(url):
    assert push.check_url(url) == url


@pytest.mark.parametrize("url,why", [
    ("http://hooks.example.com/x", "must be https"),
    ("ftp://hooks.example.com/x", "absolute https"),
    ("hooks.example.com/x", "absolute https"),
    ("https://user:pw@hooks.example.com/x", "user info"),
    ("https://127.0.0.1/x", "loopback"), ("https://localhost:8080/x", "loopback"), ("https://LOCALHOST./x", "loopback"),
    ("https://[::1]/x", "loopback"), ("https://10.1.2.3/x", "private"), ("https://192.168.0.7/x", "private"),
    ("https://169.254.169.254/latest/meta-data", "link-local"), ("https://[fd00::1]/x", "private"),
    ("https://100.64.0.1/x", "reserved"), ("https://203.0.113.9/x", "reserved"), ("https://hooks.example.com:99999/x", "port"),
])
def test_aws_refuses_plain_http_and_private_targets(url, why):
    with pytest.raises(InvalidArgument) as err:
        push.check_url(url)
    assert err.value.details["fields"][0]["field"] == "url"
    assert why.split()[0] in err.value.message or why in err.value.message


def test_a_name_resolving_to_a_private_address_is_refused_before_connecting():
    host = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)}
    except OSError:
        pytest.skip(f"{host} does not resolve here")
    if not any(not __import__("ipaddress").ip_address(a).is_global for a in addresses):
        pytest.skip(f"{host} resolves to public addresses only here")
    url = f"https://{host}/hook"
    assert push.check_url(url) == url  # a name passes the literal check
    assert "non-public address" in push.target_error(url)
    assert push.post({"url": url, "token": SECRET}, EVENT) == (0, push.target_error(url))


def test_the_local_stack_allows_loopback_http(monkeypatch):
    monkeypatch.setenv("RELAYNET_PUSH_ALLOW_LOOPBACK", "true")
    assert push.check_url("http://127.0.0.1:9/x") and push.check_url("http://localhost:9/x")
    assert push.check_url("https://10.0.0.2/x")
    with pytest.raises(InvalidArgument, match="loopback"):
        push.check_url("http://hooks.example.com/x")


# --------------------------------------------------------------------------- configs

def test_put_push_stores_a_config_that_is_never_shown_and_delete_removes_it(demo):
    token = demo.token("coder0")
    body = {"url": "https://hooks.example.com/coder", "token": SECRET,
            "authentication": {"schemes": ["Bearer"], "credentials": "receiver-credential"}}
    status, out, _ = call("push_config_set", body, token)
    assert status == 200 and out == {"push": {"url": body["url"], "authentication": {"schemes": ["Bearer"]}},
                                     "source": "instance"}
    me = call("network_whoami", {}, token)[1]["instance"]
    assert me["push"]["url"] == body["url"] and me["push"]["source"] == "instance" and me["push"]["failures"] == 0
    listed = call("control_list_agents", {}, demo.tokens["representatives"]["ops"])[1]
    text = json.dumps(listed)
    assert body["url"] in text and SECRET not in text and "receiver-credential" not in text
    assert call("push_config_delete", None, token)[1] == {"removed": True}
    assert call("push_config_delete", None, token)[1] == {"removed": False}
    assert "push" not in call("network_whoami", {}, token)[1]["instance"]


@pytest.mark.parametrize("body,field", [
    ({"url": "http://hooks.example.com/x", "token": SECRET}, "url"),
    ({"url": "https://10.0.0.1/x", "token": SECRET}, "url"),
    ({"url": "https://hooks.example.com/x", "token": "short"}, "token"),
    ({"url": "https://hooks.example.com/x"}, "token"),
    ({"url": "https://hooks.example.com/x", "token": SECRET, "secret": "x"}, "secret"),
    ({"url": "https://hooks.example.com/x", "token": SECRET, "authentication": {"schemes": []}}, "authentication.schemes"),
])
def test_a_bad_push_config_is_400_and_changes_nothing(demo, body, field):
    token = demo.token("coder0")
    status, out, _ = call("push_config_set", body, token)
    assert status == 400 and out["error"]["code"] == "invalid_argument"
    assert field in [f["field"] for f in out["error"]["details"]["fields"]]
    assert "push" not in t.get(*k.instance(demo.network_id, demo.principals["coder0"].instance_id))


def test_push_endpoints_need_an_instance_token(demo):
    rep = demo.tokens["representatives"]["ops"]
    assert call("push_config_set", {"url": "https://h.example.com/x", "token": SECRET}, rep)[0] == 403
    assert call("push_config_delete", None, rep)[0] == 403


SPEC_WITH_PUSH = DEMO_SPEC.replace(
    "  - name: reviewer\n",
    "  - name: reviewer\n    push: {url: 'https://hooks.example.com/reviewers', token: " + SECRET + "}\n")


def test_a_definition_push_config_from_the_spec_applies_to_its_instances(table):
    net = apply(SPEC_WITH_PUSH)
    reviewer = call("network_whoami", {}, net.token("reviewer0"))[1]
    assert reviewer["agent"]["push"] == {"url": "https://hooks.example.com/reviewers"}
    assert reviewer["instance"]["push"]["source"] == "definition"
    assert SECRET not in json.dumps(reviewer)
    assert t.get(*k.network(net.network_id))["pushState"] == "some"  # marked before the definition


def test_a_spec_with_a_private_push_url_is_refused(table):
    with pytest.raises(InvalidArgument) as err:
        admin.apply_spec(SPEC_WITH_PUSH.replace("https://hooks.example.com/reviewers", "https://10.0.0.3/x"))
    assert err.value.details["fields"][0]["field"] == "demo.agents[2].push.url"


# --------------------------------------------------------------------------- who gets an event

class Receiver:
    def __init__(self):
        self.got: list[tuple[str, dict, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                outer.got.append((self.path, dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver(monkeypatch):
    monkeypatch.setenv("RELAYNET_PUSH_ALLOW_LOOPBACK", "true")
    r = Receiver()
    yield r
    r.server.shutdown()


def _entries(net_id: str, address: dict) -> list[dict]:
    return t.query(k.mailbox_pk(net_id, address), sk_prefix="MSG#")


def test_agent_mail_notifies_each_live_instance_but_the_sender_with_the_definition_or_own_config(table, receiver):
    spec = DEMO_SPEC.replace("  - name: coder\n", "  - name: coder\n    push: {url: '" + receiver.url
                             + "/coders', token: " + SECRET + "}\n")
    net = apply(spec)
    coder0, coder1 = net.principals["coder0"], net.principals["coder1"]
    call("push_config_set", {"url": f"{receiver.url}/own", "token": "own-secret-of-coder1-1234"}, net.token("coder1"))
    sent = call("network_ask", {"toAgent": "coder", "body": "hello"}, net.token("planner0"))[1]
    (entry,) = _entries(net.network_id, {"agent": "coder"})
    assert push.notify(entry) == {"delivered": 2}
    by_path = {path: (headers, body) for path, headers, body in receiver.got}
    assert set(by_path) == {"/coders", "/own"}  # coder0: its definition's; coder1: its own
    assert webhooks.verify(*by_path["/coders"], SECRET)["instanceId"] == coder0.instance_id
    own = webhooks.verify(*by_path["/own"], "own-secret-of-coder1-1234")
    assert own["instanceId"] == coder1.instance_id and own["messageId"] == sent["messageId"]

    receiver.got.clear()  # a coder's own message to its agent: only the other instance hears
    call("network_ask", {"toAgent": "coder", "body": "note to self"}, net.token("coder0"))
    newest = max(_entries(net.network_id, {"agent": "coder"}), key=lambda e: e["SK"])
    assert push.notify(newest) == {"delivered": 1} and [p for p, _, _ in receiver.got] == ["/own"]


def test_a_long_task_offer_points_at_its_thread_and_still_names_its_task(table, receiver):
    net = apply(DEMO_SPEC)
    coder0 = net.principals["coder0"]
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    task = call("network_delegate", {"toInstance": coder0.instance_id, "objective": "x" * 4000},
                net.token("planner0"))[1]
    (entry,) = _entries(net.network_id, {"instanceId": coder0.instance_id})
    assert entry.get("ref") == "thread"  # over 1 KB: a pointer entry
    assert push.notify(entry) == {"delivered": 1}
    event = webhooks.verify(receiver.got[0][1], receiver.got[0][2], SECRET)
    assert event["event"] == "task_offer" and event["taskId"] == task["taskId"]
    assert b"xxxx" not in receiver.got[0][2]


def test_entries_that_are_not_mailbox_entries_notify_nobody(table, receiver):
    net = apply(DEMO_SPEC)
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    sent = call("network_ask", {"toAgent": "coder", "body": "hi"}, net.token("planner0"))[1]
    copy = t.get(*k.thread_message(net.network_id, sent["threadId"], sent["messageId"]))
    assert push.notify(copy) == {} and receiver.got == []
    assert messaging.mailbox_item  # the writer of mailbox entries is the one place that sets GSI3PK


def test_a_network_without_push_configs_notifies_nobody_and_reads_no_directory(table, receiver, monkeypatch):
    net = apply(DEMO_SPEC)
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    call("network_ask", {"toInstance": net.principals["coder0"].instance_id, "body": "one"}, net.token("planner0"))
    assert call("push_config_delete", None, net.token("coder0"))[1] == {"removed": True}
    call("network_ask", {"toInstance": net.principals["coder0"].instance_id, "body": "two"}, net.token("planner0"))
    first, second = sorted(_entries(net.network_id, {"instanceId": net.principals["coder0"].instance_id}),
                           key=lambda e: e["SK"])
    loads = []
    real_partition = push.dir_store.partition
    monkeypatch.setattr(push.dir_store, "partition", lambda n: loads.append(n) or real_partition(n))
    assert push.notify(second) == {} and receiver.got == [] and loads == []  # the one config is gone
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    assert push.notify(first) == {"delivered": 1} and loads == [net.network_id]


def _push_state(net_id: str):
    return t.get(*k.network(net_id)).get("pushState")


def test_a_network_that_never_had_a_push_config_is_answered_from_its_network_item(table, receiver, monkeypatch):
    """has_push_config: a network created without webhooks says so on its item (one GetItem, no
    Query of the directory); the first push config marks it before it is written, for good."""
    net = apply(DEMO_SPEC)
    assert _push_state(net.network_id) == "none"
    call("network_ask", {"toInstance": net.principals["coder0"].instance_id, "body": "one"}, net.token("planner0"))
    (entry,) = _entries(net.network_id, {"instanceId": net.principals["coder0"].instance_id})
    queries = []
    real_query = push.dir_store.t.query
    with monkeypatch.context() as m:
        m.setattr(push.dir_store.t, "query", lambda *a, **kw: queries.append(a) or real_query(*a, **kw))
        assert push.notify(entry) == {} and queries == []
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    assert _push_state(net.network_id) == "some"
    assert push.notify(entry) == {"delivered": 1}
    assert call("push_config_delete", None, net.token("coder0"))[1] == {"removed": True}
    assert _push_state(net.network_id) == "some"  # only ever "look": the Query answers exactly
    assert push.dir_store.has_push_config(net.network_id) is False


def test_a_network_from_before_the_mark_is_looked_at_once_then_marked(table):
    net = apply(DEMO_SPEC)
    t.update(*k.network(net.network_id), "REMOVE pushState")  # a network written before pushState
    assert push.dir_store.has_push_config(net.network_id) is False
    assert _push_state(net.network_id) == "none"
    t.update(*k.network(net.network_id), "REMOVE pushState")
    t.update(*k.instance(net.network_id, net.principals["coder0"].instance_id), "SET push = :p",
             p={"url": "https://hooks.example.com/x", "token": SECRET})  # a config written before the mark
    assert push.dir_store.has_push_config(net.network_id) is True
    assert _push_state(net.network_id) is None  # not marked "none": it has one


def test_a_none_mark_never_hides_a_config_written_meanwhile(table):
    """The look that finds nothing marks "none" only if nobody marked the network meanwhile: a
    config whose mark landed between that look's Query and its mark is not hidden."""
    net = apply(DEMO_SPEC)
    t.update(*k.network(net.network_id), "REMOVE pushState")
    real_query = push.dir_store.t.query

    def query_then_a_config_arrives(*a, **kw):
        found = real_query(*a, **kw)
        push.dir_store.mark_push_configured(net.network_id)  # PUT /v1/push: the mark, then the config
        t.update(*k.instance(net.network_id, net.principals["coder0"].instance_id), "SET push = :p",
                 p={"url": "https://hooks.example.com/x", "token": SECRET})
        return found

    with pytest.MonkeyPatch.context() as m:
        m.setattr(push.dir_store.t, "query", query_then_a_config_arrives)
        assert push.dir_store.has_push_config(net.network_id) is False  # nothing yet when it looked
    assert _push_state(net.network_id) == "some"
    assert push.dir_store.has_push_config(net.network_id) is True


# --------------------------------------------------------------------------- one first attempt, two paths

def test_the_second_path_to_reach_an_entry_sends_nothing_and_a_delivered_marker_stays(table, receiver):
    """Push at the write and the stream both hand over every mailbox entry (docs/architecture.md
    "Push at the write"): whichever comes second finds the delivery item and posts nothing."""
    net = apply(DEMO_SPEC)
    coder0 = net.principals["coder0"].instance_id
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    call("network_ask", {"toInstance": coder0, "body": "once"}, net.token("planner0"))
    (entry,) = _entries(net.network_id, {"instanceId": coder0})
    assert push.notify(entry) == {"delivered": 1}
    assert push.notify(entry) == {"duplicate": 1} and len(receiver.got) == 1
    event = webhooks.verify(receiver.got[0][1], receiver.got[0][2], SECRET)
    marker = t.get(*k.push_delivery(net.network_id, coder0, event["deliveryId"]))
    assert marker["state"] == "delivered" and marker["attempts"] == 0 and "GSI1PK" not in marker
    assert marker["ttl"] - time.time() > push.DELIVERED_KEEP_SECONDS - 60  # outlives the stream's 24 h
    assert push.retry_due() == {"due": 0, "delivered": 0, "retrying": 0, "failed": 0, "dropped": 0}


def test_a_first_attempt_whose_taker_died_is_made_once_by_the_retry_run(table, receiver, monkeypatch):
    """A taker that put its lease and died before posting (a Lambda timeout, a killed hub) leaves
    the delivery due in LEASE_MS: the scheduled retry run sends it, and nobody sends it again."""
    net = apply(DEMO_SPEC)
    coder0 = net.principals["coder0"].instance_id
    call("push_config_set", {"url": f"{receiver.url}/c0", "token": SECRET}, net.token("coder0"))
    call("network_ask", {"toInstance": coder0, "body": "orphaned"}, net.token("planner0"))
    (entry,) = _entries(net.network_id, {"instanceId": coder0})
    event = push.event_for(net.network_id, entry, coder0)
    now = push.clock.now_ms()
    assert push.take_first_attempt(net.network_id, coder0, event, now) is True
    assert push.take_first_attempt(net.network_id, coder0, event, now) is False  # one taker only
    assert push.notify(entry) == {"duplicate": 1} and receiver.got == []
    assert push.retry_due()["due"] == 0  # the lease is not due yet
    monkeypatch.setattr(push.clock, "now_ms", lambda: now + push.LEASE_MS + 1)
    assert push.retry_due() == {"due": 1, "delivered": 1, "retrying": 0, "failed": 0, "dropped": 0}
    assert [webhooks.verify(h, b, SECRET)["deliveryId"] for _, h, b in receiver.got] == [event["deliveryId"]]
    assert push.retry_due()["due"] == 0 and push.notify(entry) == {"duplicate": 1} and len(receiver.got) == 1
