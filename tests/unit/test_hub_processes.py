"""The parts that make several hub processes one hub (relaynet_local.workers, issue 31): the
shared token generation behind the authorizer caches, the bus that relays commits and token
writes, the commit feed, and the AG2 connection ids that name their process. Real Unix sockets
and real files; the processes themselves are exercised by tests/e2e/test_workers_e2e.py."""

from __future__ import annotations

import base64
import threading
import time

import pytest

from relaynet_local import commits
from relaynet_local.ag2_ws import Ag2Gateway, owner_index
from relaynet_local.authorizer_cache import AuthorizerCache, SharedGeneration
from relaynet_local.workers import Bus, BusClient, Shared, new_authkey


def _poll(predicate, what: str, seconds: float = 5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError(f"not within {seconds} s: {what}")


def test_shared_generation_counts_every_bump_of_every_process(tmp_path):
    path = tmp_path / "tokens"
    a, b = SharedGeneration(path), SharedGeneration(path)  # two mappings of one file, as two processes
    assert a.value() == b.value() == 0
    threads = [threading.Thread(target=lambda g=g: [g.bump() for _ in range(200)]) for g in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert a.value() == b.value() == 800
    a.close()
    assert SharedGeneration(path).value() == 800  # on disk, for a process that maps it later


def test_a_token_write_in_one_process_empties_the_cache_of_another(tmp_path):
    asked = {"one": 0, "two": 0}

    def ask(name):
        def answer():
            asked[name] += 1
            return {"isAuthorized": True, "context": {"n": asked[name]}}
        return answer

    one, two = AuthorizerCache(10), AuthorizerCache(10)
    one.share(SharedGeneration(tmp_path / "g"))
    two.share(SharedGeneration(tmp_path / "g"))
    assert two.answer("Bearer t", ask("two"))["context"] == {"n": 1}
    assert two.answer("Bearer t", ask("two"))["context"] == {"n": 1}  # cached
    one.clear()  # process one writes a token item (a revocation)
    assert two.answer("Bearer t", ask("two"))["context"] == {"n": 2}  # asked again at once
    assert two.answer("Bearer t", ask("two"))["context"] == {"n": 2}


def test_an_answer_asked_while_another_process_wrote_a_token_is_not_kept(tmp_path):
    one, two = AuthorizerCache(10), AuthorizerCache(10)
    one.share(SharedGeneration(tmp_path / "g"))
    two.share(SharedGeneration(tmp_path / "g"))
    calls = []

    def slow_answer():
        calls.append(1)
        if len(calls) == 1:
            one.clear()  # the revocation lands while process two's authorizer runs
        return {"isAuthorized": True, "context": {}}

    two.answer("Bearer t", slow_answer)
    two.answer("Bearer t", slow_answer)
    assert len(calls) == 2  # the first answer predates the write: not cached


def test_without_sharing_a_cache_ignores_other_processes(tmp_path):
    """The control: the generation is what carries the write across."""
    one, two = AuthorizerCache(10), AuthorizerCache(10)
    one.share(SharedGeneration(tmp_path / "g"))
    n = []
    two.answer("Bearer t", lambda: n.append(1) or {"isAuthorized": True})
    one.clear()
    two.answer("Bearer t", lambda: n.append(1) or {"isAuthorized": True})
    assert len(n) == 1


@pytest.fixture
def bus(tmp_path):
    shared = Shared(tmp_path)
    key = new_authkey()
    got = {"primary": [], "tokens": 0, "pushed": []}
    primary = Bus(shared.bus, key, got["primary"].append,
                  lambda: got.__setitem__("tokens", got["tokens"] + 1),
                  lambda function_id, digests: got["pushed"].append((function_id, digests))).start()
    clients, lost = [], []
    received: dict[int, list] = {1: [], 2: []}
    tokens: dict[int, int] = {1: 0, 2: 0}
    for index in (1, 2):
        clients.append(BusClient(shared.bus, key, index, received[index].append,
                                 lambda i=index: tokens.__setitem__(i, tokens[i] + 1), lambda i=index: lost.append(i)))
    _poll(lambda: primary.connected() == [1, 2], "both workers on the bus")
    yield primary, clients, got, received, tokens, lost
    for c in clients:
        c.close()
    primary.close()


def test_the_bus_relays_a_commit_to_every_other_process_once(bus):
    primary, (one, two), got, received, _, _ = bus
    one.publish_commit([{"PK": {"S": "A"}}])
    _poll(lambda: got["primary"] and received[2], "the commit relayed")
    primary.publish_commit([{"PK": {"S": "B"}}])
    _poll(lambda: len(received[1]) == 1 and len(received[2]) == 2, "the primary's commit relayed")
    assert got["primary"] == [[{"PK": {"S": "A"}}]]
    assert received[1] == [[{"PK": {"S": "B"}}]]  # never its own
    assert received[2] == [[{"PK": {"S": "A"}}], [{"PK": {"S": "B"}}]]  # in order


def test_the_bus_relays_token_writes(bus):
    primary, (one, two), got, _, tokens, _ = bus
    two.publish_tokens()
    _poll(lambda: got["tokens"] == 1 and tokens[1] == 1, "the token write relayed")
    primary.publish_tokens()
    _poll(lambda: tokens == {1: 2, 2: 1}, "the primary's token write relayed")


def test_what_a_worker_pushed_at_the_write_reaches_the_primary_alone(bus):
    primary, (one, two), got, received, _, _ = bus
    one.publish_pushed("NotifierFunction", ["d1", "d2"])
    one.publish_commit([{"PK": {"S": "after"}}])  # sent after it on the same connection
    _poll(lambda: received[2], "the commit after it relayed")
    assert got["pushed"] == [("NotifierFunction", ["d1", "d2"])]
    assert received[2] == [[{"PK": {"S": "after"}}]]  # the other worker heard no "pushed"


def test_a_worker_hears_when_the_primary_is_gone(bus):
    primary, _, _, _, _, lost = bus
    primary.close()
    _poll(lambda: sorted(lost) == [1, 2], "both workers told")


def test_the_bus_refuses_a_client_without_the_key(tmp_path):
    from multiprocessing import AuthenticationError

    shared = Shared(tmp_path)
    primary = Bus(shared.bus, new_authkey(), lambda _: None, lambda: None).start()
    try:
        with pytest.raises(AuthenticationError):
            BusClient(shared.bus, new_authkey(), 1, lambda _: None, lambda: None, lambda: None)
        assert primary.connected() == []
    finally:
        primary.close()


def test_the_commit_feed_gives_local_and_remote_commits_and_forwards_only_local(monkeypatch):
    from relaynet.store import table

    seen, forwarded = [], []
    remove = commits.subscribe(seen.append)
    commits.forward_to(forwarded.append)
    try:
        table._committed([{"PK": {"S": "local"}}])  # as a Put of this process commits
        commits.deliver_remote([{"PK": {"S": "remote"}}])
        assert seen == [[{"PK": {"S": "local"}}], [{"PK": {"S": "remote"}}]]
        assert forwarded == [[{"PK": {"S": "local"}}]]  # a remote commit is not sent back
    finally:
        remove()
        commits.forward_to(None)


def test_ag2_connection_ids_name_their_process():
    gateway = Ag2Gateway({"Resources": {}}, lambda *_: None)
    try:
        for index in (0, 1, 7):
            raw = bytes([index]) + b"\x00" * 9
            assert owner_index(base64.b64encode(raw).decode()) == index
        assert owner_index("not base64!") is None
        assert owner_index(base64.b64encode(b"short").decode()) is None
        gateway.index = 3
        gateway.peer_url = lambda i, fresh: None  # the owner has not published an address: Gone
        status, _ = gateway.manage("POST", base64.b64encode(bytes([1]) + b"\x01" * 9).decode(), b"x")
        assert status == 410
    finally:
        gateway.stop()


def test_a_post_to_this_process_management_api_is_served_in_process():
    """relaynet.ag2.post's postToConnection to the URL this process serves reaches the gateway's
    socket without an HTTP request (the URL's port is bound and never listening: a request
    would be refused); an unknown connection is Gone, as over HTTP; a stopped gateway no
    longer answers, so the call goes to the network (and is refused there)."""
    import socket

    from botocore.exceptions import EndpointConnectionError

    from relaynet.ag2 import post

    class Socket:  # the websockets connection the gateway holds: what it was sent
        def __init__(self):
            self.sent = []

        def send(self, text):
            self.sent.append(text)

    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{dead.getsockname()[1]}/ag2"
        gateway = Ag2Gateway({"Resources": {}}, lambda *_: None)
        held = Socket()
        cid = base64.b64encode(b"\x00+/=" + b"\x03" * 6).decode()  # quoted in the URL: + / =
        gateway.connections[cid] = held
        gateway.serve_in_process(url)
        try:
            post.post(url, cid, b'{"kind":"notify"}')
            assert held.sent == ['{"kind":"notify"}']
            with pytest.raises(post.Gone):
                post.post(url, base64.b64encode(b"\x00" + b"\x04" * 9).decode(), b"{}")
        finally:
            gateway.stop()
        with pytest.raises(EndpointConnectionError):
            post.post(url, cid, b"{}")
        assert held.sent == ['{"kind":"notify"}']
        post.close_clients()


def test_a_peer_address_is_read_once_and_again_on_request(tmp_path):
    shared = Shared(tmp_path)
    assert shared.peer_url(1) is None
    shared.publish_peer(1, "http://127.0.0.1:1111")
    assert shared.peer_url(1) == "http://127.0.0.1:1111"
    shared.publish_peer(1, "http://127.0.0.1:2222")  # the worker restarted on another port
    assert shared.peer_url(1) == "http://127.0.0.1:1111"  # as read
    assert shared.peer_url(1, fresh=True) == "http://127.0.0.1:2222"
    assert shared.peer_url(1) == "http://127.0.0.1:2222"


def test_a_management_call_follows_a_restarted_owner_to_its_new_port():
    """The owner's old port refuses; the gateway reads the address again and the call lands."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import socket

    got = []

    class Owner(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            got.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{dead.getsockname()[1]}"  # bound, never listening: refused
        owner = ThreadingHTTPServer(("127.0.0.1", 0), Owner)
        threading.Thread(target=owner.serve_forever, daemon=True).start()
        live_url = f"http://127.0.0.1:{owner.server_address[1]}"
        asked = []
        gateway = Ag2Gateway({"Resources": {}}, lambda *_: None)
        gateway.peer_url = lambda index, fresh: asked.append(fresh) or (live_url if fresh else dead_url)
        try:
            cid = base64.b64encode(bytes([1]) + b"\x02" * 9).decode()
            status, _ = gateway.manage("POST", cid, b'{"kind":"notify"}')
            assert status == 200
            assert asked == [False, True]
            assert got and got[0][1] == b'{"kind":"notify"}' and got[0][0].endswith(cid.replace("/", "%2F").replace("+", "%2B").replace("=", "%3D"))
        finally:
            gateway.stop()
            owner.shutdown()
            owner.server_close()


def _record(image: dict, event: str = "INSERT", seq: str = "1") -> dict:
    return {"eventID": seq, "eventName": event, "dynamodb": {"Keys": {"PK": image["PK"]}, "NewImage": image,
                                                             "SequenceNumber": seq}}


def test_the_stream_skips_each_record_the_write_path_handled_once():
    from relaynet_local.streams import PushedAtWrite, digest

    pushed = PushedAtWrite()
    image = {"PK": {"S": "NET#n#MB#i"}, "SK": {"S": "MSG#1"}, "body": {"M": {"b": {"S": "x"}, "a": {"N": "1"}}}}
    same = {"SK": {"S": "MSG#1"}, "body": {"M": {"a": {"N": "1"}, "b": {"S": "x"}}}, "PK": {"S": "NET#n#MB#i"}}
    assert digest(_record(image, seq="w1")) == digest(_record(same, seq="shard-7"))  # ids and key order aside
    pushed.add("NotifierFunction", [digest(_record(image))])
    assert not pushed.take("Ag2NotifierFunction", _record(image))  # another function did not handle it
    assert not pushed.take("NotifierFunction", _record(image, event="MODIFY"))  # not what it was handed
    assert not pushed.take("NotifierFunction", _record({**image, "SK": {"S": "MSG#2"}}))
    assert pushed.take("NotifierFunction", _record(same))
    assert not pushed.take("NotifierFunction", _record(same))  # once: a second commit of it is the stream's


def test_the_stream_hands_over_only_what_the_write_did_not_push_and_counts_it():
    """StreamRunner._dispatch: a record the write pushed is not handed to that function again, a
    record another function's filter does not match goes nowhere, and the count it returns
    (what paces the polls) is of the records handed over."""
    from relaynet_local.streams import PushedAtWrite, StreamRunner, StreamSource, digest
    from relaynet_local.template import Function

    handed: list[tuple[str, list[str]]] = []
    runner = StreamRunner.__new__(StreamRunner)
    runner.pushed = PushedAtWrite()
    runner.invoke = lambda fn, event: handed.append((fn.logical_id, [r["eventID"] for r in event["Records"]]))
    runner.sources = [StreamSource(Function("Notifier", "/", "notifier.handler"), 10, 0, []),
                      StreamSource(Function("Bridge", "/", "bridge.handler"), 10, 0, [{"eventName": ["MODIFY"]}])]
    pushed = _record({"PK": {"S": "NET#n#MB#i"}, "SK": {"S": "MSG#1"}}, seq="a")
    runner.pushed.add("Notifier", [digest(pushed)])
    assert runner._dispatch([pushed]) == 0 and handed == []
    fresh = _record({"PK": {"S": "NET#n#MB#i"}, "SK": {"S": "MSG#2"}}, seq="b")
    assert runner._dispatch([fresh]) == 1 and handed == [("Notifier", ["b"])]


def test_the_skip_list_is_bounded_oldest_first():
    from relaynet_local.streams import PushedAtWrite, digest

    pushed = PushedAtWrite(limit=3)
    records = [_record({"PK": {"S": f"P{i}"}}) for i in range(5)]
    for r in records:
        pushed.add("F", [digest(r)])
    assert [pushed.take("F", r) for r in records] == [False, False, True, True, True]


def test_an_idle_stream_is_polled_less_often_and_a_busy_one_at_once(monkeypatch):
    """StreamRunner's pause between polls: doubling from poll_seconds to IDLE_POLL_SECONDS while
    GetRecords finds nothing to hand over (no record, or only records the write pushed already),
    back to poll_seconds once it hands a record over. The streams client here answers from a
    script (no store: only the pacing is under test)."""
    from relaynet_local import streams

    answers = [[], [], [], [], [], [], [{"eventID": "1"}], [], [{"eventID": "pushed"}], []]
    pauses: list[float] = []

    class Stop:
        def wait(self, pause: float) -> bool:
            pauses.append(pause)
            return not answers

        def is_set(self) -> bool:
            return not answers

    class Streams:
        def get_records(self, ShardIterator: str, Limit: int) -> dict:  # noqa: N803 - boto3's names
            return {"Records": answers.pop(0), "NextShardIterator": ShardIterator}

    runner = streams.StreamRunner.__new__(streams.StreamRunner)
    runner.poll_seconds, runner._stop, runner._streams = 0.1, Stop(), Streams()
    runner._iterators, runner._shards = {"shard-1": "it"}, lambda: [{"ShardId": "shard-1"}]
    dispatched: list = []

    def dispatch(records: list) -> int:  # what _dispatch returns: the records handed over
        dispatched.append(records)
        return sum(r["eventID"] != "pushed" for r in records)

    runner._dispatch = dispatch
    monkeypatch.setattr(streams, "lambda_record", lambda record, arn, region: record)
    runner.stream_arn, runner.region = "arn", "us-east-1"
    runner._loop()
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 0.1, 0.2, 0.4, 0.8]
    assert dispatched == [[{"eventID": "1"}], [{"eventID": "pushed"}]]
