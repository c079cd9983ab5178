"""The AG2 notifier's order when the stream hands over one transaction's records out of order
(relaynet.ag2.ops.deliver, written_before): on DynamoDB Local, with a loopback HTTP server as
API Gateway's management API (``POST /@connections/{id}``), the real boto3 client posting to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from relaynet import channels, clock
from relaynet.adapters import Send
from relaynet.ag2 import ops
from relaynet.identity import hash_token
from relaynet.store import ag2 as ag2_store
from relaynet.store import channels as channel_store
from tests.conftest import apply

SPEC = "network: order\nagents:\n  - {name: alice, instances: 1}\n  - {name: bob, instances: 1}\n"


@pytest.fixture
def management_api():
    """A management API on 127.0.0.1 that answers 200 and keeps ``(connection id, frame)``."""
    posts: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            posts.append((self.path.rsplit("/", 1)[-1], json.loads(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", posts
    server.shutdown()


def _connect(net, agent: str) -> str:
    """An AG2 connection bound to ``agent``'s instance, as a hello binds it; its id."""
    conn, p = f"conn-{agent}", net.principals[f"{agent}0"]
    ag2_store.put_connection(conn, clock.now_ms())
    assert ag2_store.bind(conn, net.network_id, agent, p.instance_id, hash_token(net.token(f"{agent}0")), clock.now_ms())
    return conn


def _seen(posts: list[tuple[str, dict]], conn: str) -> list[str]:
    return [frame["envelope"]["envelope_id"] for c, frame in posts if c == conn and frame.get("kind") == "notify"]


def test_an_envelope_notified_before_the_one_written_with_it_goes_out_after_it(server_table, management_api):
    url, posts = management_api
    net = apply(SPEC)
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    to_alice, to_bob = _connect(net, "alice"), _connect(net, "bob")
    ch = channels.open_channel(alice, "consulting", ["bob"], None, None, None, "What is 2+2?")["channel_id"]
    opened, seed = (channel_store.get_envelope(net.network_id, ch, seq) for seq in (1, 2))
    assert opened["created_at"] == seed["created_at"]  # one transaction

    # the seed's record first: bob gets the opened, then the seed; the opened's own record adds nothing
    ops.deliver(net.network_id, ch, seed, url)
    assert _seen(posts, to_bob) == [opened["envelope_id"], seed["envelope_id"]]
    assert _seen(posts, to_alice) == [opened["envelope_id"]]  # the opener gets the channel's own events
    assert ops.deliver(net.network_id, ch, opened, url) == 0

    # the consultant's reply closes the consult in the same transaction: the closed's record first
    channels.send(bob, ch, Send(sender="bob", tool="say"), "4")
    reply, closed = (channel_store.get_envelope(net.network_id, ch, seq) for seq in (3, 4))
    assert closed["event_type"] == "closed" and closed["causation_id"] == reply["envelope_id"]
    ops.deliver(net.network_id, ch, closed, url)
    assert _seen(posts, to_alice)[1:] == [reply["envelope_id"], closed["envelope_id"]]
    assert _seen(posts, to_bob)[2:] == [closed["envelope_id"]]  # a sender is not sent its own text
    assert ops.deliver(net.network_id, ch, reply, url) == 0


def test_an_earlier_envelope_of_another_write_is_not_sent_again(server_table, management_api):
    # seq 2 of a channel opened without a seed is its own write: the opened is not its business
    url, posts = management_api
    net = apply(SPEC)
    alice = net.principals["alice0"]
    to_bob = _connect(net, "bob")
    ch = channels.open_channel(alice, "conversation", ["bob"], None, None, None, None)["channel_id"]
    opened_at = channel_store.get_envelope(net.network_id, ch, 1)["created_at"]
    while clock.iso(clock.now_ms()) == opened_at:  # a later millisecond than the open
        pass
    channels.send(alice, ch, Send(sender="alice", tool="say"), "hello")
    second = channel_store.get_envelope(net.network_id, ch, 2)
    assert ops.written_before(net.network_id, ch, second) is None
    ops.deliver(net.network_id, ch, second, url)
    assert _seen(posts, to_bob) == [second["envelope_id"]]


def test_the_opened_of_a_channel_waiting_for_acks_reaches_nobody_before_the_invite(server_table, management_api):
    """Push at the write may run the notifier before create_channel's own invite frames are
    posted: the opened is held until the last ack, as AG2's hub broadcasts it on quorum."""
    url, posts = management_api
    net = apply(SPEC)
    to_alice, to_bob = _connect(net, "alice"), _connect(net, "bob")
    alice = ops.Session(connection_id=to_alice, connection=ag2_store.get_connection(to_alice), request_id="req-1")
    assert ops.op_create_channel(alice, {"creator_id": "alice", "participants": ["alice", "bob"],
                                         "manifest_type": "conversation"}) is ops.DEFERRED
    (_, invite), = alice.outbox
    ch = invite.envelope.channel_id
    opened = channel_store.get_envelope(net.network_id, ch, 1)
    assert opened["event_type"] == "opened"

    # the notifier, at the write or from the stream, before the invite is posted: nothing goes out
    assert ops.deliver(net.network_id, ch, opened, url) == 0
    ops.flush(alice, url)
    assert [f["envelope"]["event_type"] for c, f in posts if c == to_bob] == ["ag2.channel.invite"]

    bob = ops.Session(connection_id=to_bob, connection=ag2_store.get_connection(to_bob))
    ack = {"channel_id": ch, "sender_id": "bob", "audience": ["alice"], "event_type": "ag2.channel.invite.ack",
           "event_data": {}, "envelope_id": "env-ack", "created_at": clock.iso(clock.now_ms())}
    ops.op_post_envelope(bob, {"envelope": ack})
    ops.flush(bob, url)
    assert [f["envelope"]["event_type"] for c, f in posts if c == to_bob] == ["ag2.channel.invite",
                                                                              "ag2.channel.opened"]
    assert _seen(posts, to_alice) == [opened["envelope_id"]]
    answer = [f for c, f in posts if c == to_alice and f.get("kind") == "response"]
    assert [a["request_id"] for a in answer] == ["req-1"] and answer[0]["ok"]
    assert posts.index((to_alice, answer[0])) > [c for c, _ in posts].index(to_alice)  # opened, then the answer

    # the stream's record of the opened, late: the markers keep it to one post per connection
    assert ops.deliver(net.network_id, ch, opened, url) == 0
