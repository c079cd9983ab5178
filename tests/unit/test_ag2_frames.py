"""The AG2 wire's codec and dispatch (relaynet.ag2.frames, relaynet.ag2.wire), domain-free: what
each inbound frame gets, decoded as strictly as AG2's hub decodes (docs/protocol.md 12). What the
wire sends is read back with AG2 1.2.1's own decoder (a test dependency) and compared with AG2's
frames: the client sees what AG2's hub would send."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("ag2.network")

from ag2.network.transport.frames import ErrorFrame, PongFrame, ResponseFrame, decode_frame, encode_frame  # noqa: E402

from relaynet.ag2 import frames as f  # noqa: E402
from relaynet.ag2.protocol import frames as ours  # noqa: E402
from relaynet.ag2.protocol.errors import AccessDeniedError, AuthError, NotFoundError  # noqa: E402
from relaynet.ag2.wire import Wire  # noqa: E402

DEFERRED = object()


@dataclass
class FakeSession:
    connection_id: str = "c1"
    outbox: list[tuple[str, Any]] = field(default_factory=list)
    request_id: str | None = None


def wire(**ops: Any) -> tuple[Wire, list[tuple]]:
    calls: list[tuple] = []

    def hello(session, name, scheme, claim, since):
        calls.append(("hello", name, scheme, claim, since))
        if claim.get("token") != "good":
            raise AuthError("bad token")

    def receipt(session, recipient, channel, envelope, status):
        calls.append(("receipt", recipient, channel, envelope, status))

    return Wire(ops, hello, receipt, DEFERRED), calls


def sent(session: FakeSession) -> list[Any]:
    """The frames queued, as AG2's client decodes them off the wire."""
    return [decode_frame(json.loads(f.encode(frame))) for _, frame in session.outbox]


@pytest.mark.parametrize("message", [
    "not json", "[1, 2]", json.dumps({"op": "register"}), json.dumps({"kind": "nope"}),
    json.dumps({"kind": "ping", "extra": 1}),
    json.dumps({"kind": "request", "request_id": "r", "op": "x", "params": {}, "more": True}),
    json.dumps({"kind": "request", "op": "x"}), b"\xff\xfe",
])
def test_frames_ag2s_hub_drops_get_no_answer_at_all(message):
    w, calls = wire(x=lambda s, p: 1)
    session = FakeSession()
    w.handle(session, message)
    assert session.outbox == [] and calls == []


@pytest.mark.parametrize("frame, field_name", [
    ({"kind": "request", "request_id": 7, "op": "x", "params": {}}, "request_id"),
    ({"kind": "request", "request_id": "r", "op": "x", "params": []}, "params"),
    ({"kind": "hello", "name": ["a"]}, "name"),
    ({"kind": "receipt", "envelope_id": "e", "status": 1}, "status"),
])
def test_a_field_of_the_wrong_json_type_gets_a_protocol_error_frame(frame, field_name):
    w, calls = wire(x=lambda s, p: 1)
    session = FakeSession()
    w.handle(session, json.dumps(frame))
    assert sent(session) == [ErrorFrame(code="protocol_error", message=f"malformed {frame['kind']} frame: {field_name}")]
    assert calls == []


def test_ping_gets_pong_and_hub_to_client_kinds_get_nothing():
    w, _ = wire()
    session = FakeSession()
    w.handle(session, '{"kind": "ping"}')
    w.handle(session, '{"kind": "pong"}')
    w.handle(session, json.dumps({"kind": "welcome", "endpoint_id": "x", "hub_time": "t"}))
    assert sent(session) == [PongFrame()]


def test_a_request_is_answered_with_its_result_or_ag2s_error_code():
    def boom(session, params):
        raise {"nf": NotFoundError, "ad": AccessDeniedError, "auth": AuthError}[params["e"]]("no")

    w, _ = wire(echo=lambda s, p: {"got": p}, boom=boom, later=lambda s, p: DEFERRED,
                shape=lambda s, p: p["missing"], bug=lambda s, p: 1 / 0)
    session = FakeSession()
    for rid, op, params in (("1", "echo", {"a": 1}), ("2", "boom", {"e": "nf"}), ("3", "boom", {"e": "ad"}),
                            ("4", "boom", {"e": "auth"}), ("5", "later", {}), ("6", "nope", {}),
                            ("7", "shape", {}), ("8", "bug", {})):
        w.handle(session, json.dumps({"kind": "request", "request_id": rid, "op": op, "params": params}))
    answers = {a.request_id: a for a in sent(session)}
    assert answers["1"] == ResponseFrame(request_id="1", ok=True, result={"got": {"a": 1}})
    assert [answers[r].error_code for r in "2346"] == ["not_found", "access_denied", "auth_failed", "protocol_error"]
    assert "5" not in answers  # deferred: answered later by postToConnection
    assert answers["7"].error_code == "error" and "missing" in answers["7"].error_message
    assert (answers["8"].error_code, answers["8"].error_message) == ("error", "internal error")  # no internals
    assert session.request_id == "8"


def test_hello_failures_are_error_frames_and_receipts_reach_the_cursor_hook():
    w, calls = wire()
    session = FakeSession()
    w.handle(session, json.dumps({"kind": "hello", "name": "coder", "auth_scheme": "api_key",
                                  "auth_claim": {"token": "bad"}, "since_envelope_id": None}))
    assert sent(session) == [ErrorFrame(code="auth_failed", message="bad token")]
    w.handle(session, json.dumps({"kind": "receipt", "envelope_id": "env_1", "status": "ack",
                                  "recipient_id": "coder", "channel_id": "ch_1", "reason": ""}))
    assert calls[-1] == ("receipt", "coder", "ch_1", "env_1", "ack")


def test_encode_is_ag2s_encoding_and_refuses_a_message_over_128_kb():
    frame = ours.ResponseFrame(request_id="r", ok=True, result={"x": "y"})
    assert decode_frame(json.loads(f.encode(frame))) == ResponseFrame(request_id="r", ok=True, result={"x": "y"})
    assert json.loads(f.encode(frame)) == encode_frame(ResponseFrame(request_id="r", ok=True, result={"x": "y"}))
    with pytest.raises(f.TooLarge):
        f.encode(ours.ResponseFrame(request_id="r", ok=True, result="x" * f.MAX_SERVER_MESSAGE))


def test_fit_list_keeps_the_longest_prefix_that_fits():
    items = [{"text": "x" * 1000} for _ in range(300)]
    kept = f.fit_list(items)
    assert kept == items[:len(kept)] and 100 < len(kept) < 300
    assert len(json.dumps(kept).encode()) <= f.MAX_SERVER_MESSAGE - 1024
    assert f.fit_list(items[:3]) == items[:3]

