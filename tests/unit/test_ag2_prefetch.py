"""A post over AG2's wire reads its connection and its channel in one request (issue 26;
relaynet.ag2.ops.load_session), on DynamoDB Local: only once the container knows the connection's
network, only for ``post_envelope``, and a head that another send made stale in between still
gives a correct send (the head's condition fails and the send reads it again)."""

from __future__ import annotations

import json

from relaynet import cache, channels, clock
from relaynet.adapters import Send
from relaynet.ag2 import ops
from relaynet.ag2.wire import Wire
from relaynet.identity import hash_token
from relaynet.store import ag2 as ag2_store
from relaynet.store import channels as channel_store
from relaynet.store import table
from tests.conftest import apply

SPEC = "network: prefetch\nagents:\n  - {name: alice, instances: 1}\n  - {name: bob, instances: 1}\n"
WIRE = Wire(ops.OPS, ops.hello, ops.receipt, ops.DEFERRED)


def _connect(net, agent: str) -> str:
    conn, p = f"conn-{agent}", net.principals[f"{agent}0"]
    ag2_store.put_connection(conn, clock.now_ms())
    assert ag2_store.bind(conn, net.network_id, agent, p.instance_id, hash_token(net.token(f"{agent}0")), clock.now_ms())
    return conn


def _post(channel_id: str, text: str, n: int) -> str:
    return json.dumps({"kind": "request", "request_id": f"req-{n}", "op": "post_envelope", "params": {"envelope": {
        "channel_id": channel_id, "sender_id": "alice", "audience": None, "event_type": "ag2.msg.text",
        "event_data": {"text": text}, "envelope_id": f"env-{n}", "created_at": clock.iso(clock.now_ms())}}})


def _requests() -> list[str]:
    seen: list[str] = []
    table.client().meta.events.register("before-call.dynamodb", lambda model, **_: seen.append(model.name),
                                        unique_id="test-ag2-prefetch")
    return seen


def _answer(session) -> dict:
    (conn, frame), = [(c, f) for c, f in session.outbox]
    assert conn == session.connection_id
    return frame.to_dict()


def test_a_post_reads_its_connection_and_channel_in_one_request_once_the_network_is_known(server_table):
    cache.clear()
    net = apply(SPEC)
    to_alice = _connect(net, "alice")
    ch = channels.open_channel(net.principals["alice0"], "conversation", ["bob"], None, None, None, None)["channel_id"]
    seen = _requests()
    try:
        first = ops.load_session(to_alice, _post(ch, "one", 1))  # this container has not seen the connection yet
        assert first.prefetched == {} and seen == ["GetItem"]
        WIRE.handle(first, _post(ch, "one", 1))
        assert _answer(first)["ok"] is True

        seen.clear()
        other = ops.load_session(to_alice, json.dumps({"kind": "ping"}))  # not a post: the connection alone
        assert other.prefetched == {} and seen == ["GetItem"]

        seen.clear()
        second = ops.load_session(to_alice, _post(ch, "two", 2))
        assert seen == ["BatchGetItem"] and set(second.prefetched) == {(net.network_id, ch)}
        assert second.connection["bindings"] == {"alice": net.principals["alice0"].instance_id}
        seen.clear()
        WIRE.handle(second, _post(ch, "two", 2))
        assert _answer(second)["ok"] is True
        assert seen == ["Query", "TransactWriteItems"]  # the limits count, the send: no head read
        assert second.prefetched == {}  # used once
    finally:
        table.client().meta.events.unregister("before-call.dynamodb", unique_id="test-ag2-prefetch")
    texts = [e["content"] for e in _envelopes(net.network_id, ch) if e["event_type"] == "text"]
    assert texts == ["one", "two"]


def test_a_head_made_stale_between_the_read_and_the_send_still_sends_in_order(server_table):
    cache.clear()
    net = apply(SPEC)
    to_alice = _connect(net, "alice")
    ch = channels.open_channel(net.principals["alice0"], "conversation", ["bob"], None, None, None, None)["channel_id"]
    ops.load_session(to_alice, _post(ch, "warm", 0))  # the container now knows the connection's network
    session = ops.load_session(to_alice, _post(ch, "alice's", 1))
    (stale, _), = session.prefetched.values()
    channels.send(net.principals["bob0"], ch, Send(sender="bob", tool="say"), "bob's")  # the head moves on
    WIRE.handle(session, _post(ch, "alice's", 1))
    assert _answer(session)["ok"] is True
    envelopes = _envelopes(net.network_id, ch)
    assert [e["content"] for e in envelopes if e["event_type"] == "text"] == ["bob's", "alice's"]
    assert int(envelopes[-1]["seq"]) == int(stale["seq"]) + 2


def _envelopes(net: str, channel_id: str) -> list[dict]:
    """The channel's envelope items in seq order."""
    return sorted(channel_store.envelopes(net, channel_id), key=lambda e: int(e["seq"]))
