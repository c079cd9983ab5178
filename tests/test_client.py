"""The SDK (relaynet.client) against httpx.MockTransport: no hub, no network."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from relaynet.client import ApiError, AsyncRelaynetClient, RelaynetClient

URL = "https://hub.example.test/prod"
TOKEN = "rn_inst_test"


class Recorder:
    """A MockTransport handler that records requests and answers from a queue or a default."""

    def __init__(self, *responses: httpx.Response | Exception):
        self.requests: list[httpx.Request] = []
        self.responses = list(responses)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.responses:
            answer = self.responses.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return httpx.Response(200, json={"ok": True})

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self, i: int = -1) -> dict:
        return json.loads(self.requests[i].content)


def client(rec: Recorder, token: str | None = TOKEN) -> RelaynetClient:
    return RelaynetClient(URL + "/", token, transport=httpx.MockTransport(rec))


def test_call_success_posts_json_with_bearer():
    rec = Recorder(httpx.Response(200, json={"messageId": "msg_1", "threadId": "thr_1", "recipients": [{"agent": "b"}]}))
    with client(rec) as hub:
        out = hub.call("network_ask", {"body": "hi", "toAgent": "b"})
    assert out == {"messageId": "msg_1", "threadId": "thr_1", "recipients": [{"agent": "b"}]}
    req = rec.last
    assert req.method == "POST"
    assert str(req.url) == "https://hub.example.test/prod/v1/tools/network_ask"
    assert req.headers["authorization"] == "Bearer rn_inst_test"
    assert req.headers["content-type"] == "application/json"
    assert "idempotency-key" not in req.headers
    assert rec.body() == {"body": "hi", "toAgent": "b"}


def test_call_without_arguments_sends_empty_object():
    rec = Recorder()
    with client(rec) as hub:
        hub.call("network_inbox")
        hub.whoami()
    assert [r.url.path for r in rec.requests] == ["/prod/v1/tools/network_inbox", "/prod/v1/tools/network_whoami"]
    assert rec.body(0) == {} and rec.body(1) == {}


def test_no_token_sends_no_authorization_and_health_is_a_get():
    rec = Recorder(httpx.Response(200, json={"status": "ok", "version": "0.1.0"}))
    with client(rec, token=None) as hub:
        assert hub.health() == {"status": "ok", "version": "0.1.0"}
    assert rec.last.method == "GET"
    assert rec.last.url.path == "/prod/v1/health"
    assert "authorization" not in rec.last.headers


def test_error_envelope_becomes_api_error():
    envelope = {
        "error": {
            "code": "conflict",
            "message": "scope is claimed by coder/inst_01",
            "details": {"reason": "claim_conflict", "conflicts": [{"claimId": "clm_1", "scope": "src/**"}]},
        }
    }
    rec = Recorder(httpx.Response(409, json=envelope))
    with client(rec) as hub, pytest.raises(ApiError) as info:
        hub.claim("src/api/**")
    err = info.value
    assert err.status == 409
    assert err.code == "conflict"
    assert err.message == "scope is claimed by coder/inst_01"
    assert err.details == envelope["error"]["details"]
    assert err.reason == "claim_conflict"
    assert err.retry_after is None
    assert not err.is_transport_error
    assert "conflict" in str(err)


def test_invalid_argument_fields_and_retry_after():
    fields = [{"field": "toAgnet", "message": "unknown argument"}]
    rec = Recorder(
        httpx.Response(400, json={"error": {"code": "invalid_argument", "message": "bad", "details": {"fields": fields}}}),
        httpx.Response(429, json={"error": {"code": "rate_limited", "message": "slow down"}}, headers={"Retry-After": "7"}),
    )
    with client(rec) as hub:
        with pytest.raises(ApiError) as bad:
            hub.call("network_ask", {"body": "x", "toAgnet": "b"})
        with pytest.raises(ApiError) as slow:
            hub.inbox()
    assert bad.value.code == "invalid_argument" and bad.value.details == {"fields": fields}
    assert bad.value.reason is None
    assert slow.value.status == 429 and slow.value.code == "rate_limited" and slow.value.retry_after == 7.0
    assert slow.value.details is None


def test_camel_case_mapping_and_none_dropped():
    rec = Recorder()
    with client(rec) as hub:
        hub.discover(resource_key="github.com/acme/api", action="review")
        hub.discover()
        hub.ask("hello", to_agent="reviewer", thread_id="thr_1", task_id="task_1", to_instance=None)
        hub.reply("thr_1", "done")
        hub.delegate("fix it", title="Fix", acceptance_criteria=["tests pass"], to_instance="inst_9",
                     resource="github.com/acme/api")
        hub.task_get("task_1")
        hub.task_update("task_1", "accepted")
        hub.task_update("task_1", "completed", reason="PR merged")
        hub.claim("src/**", scope_type="path", resource_id="github.com/acme/api", task_id="task_1", ttl_seconds=60)
        hub.release("clm_1")
        hub.publish_artifact("https://github.com/acme/api/pull/1", label="PR", type="pull_request", task_id="task_1")
        hub.register_capabilities([{"id": "py", "name": "Python"}])
    paths = [r.url.path.rsplit("/", 1)[-1] for r in rec.requests]
    bodies = [json.loads(r.content) for r in rec.requests]
    assert list(zip(paths, bodies)) == [
        ("network_discover", {"resourceKey": "github.com/acme/api", "action": "review"}),
        ("network_discover", {}),
        ("network_ask", {"body": "hello", "toAgent": "reviewer", "threadId": "thr_1", "taskId": "task_1"}),
        ("network_reply", {"threadId": "thr_1", "body": "done"}),
        ("network_delegate", {"objective": "fix it", "title": "Fix", "acceptanceCriteria": ["tests pass"],
                              "toInstance": "inst_9", "resource": "github.com/acme/api"}),
        ("network_task_get", {"taskId": "task_1"}),
        ("network_task_update", {"taskId": "task_1", "status": "accepted"}),
        ("network_task_update", {"taskId": "task_1", "status": "completed", "reason": "PR merged"}),
        ("network_claim", {"scope": "src/**", "scopeType": "path", "resourceId": "github.com/acme/api",
                           "taskId": "task_1", "ttlSeconds": 60}),
        ("network_release", {"claimId": "clm_1"}),
        ("network_publish_artifact", {"uri": "https://github.com/acme/api/pull/1", "label": "PR",
                                      "type": "pull_request", "taskId": "task_1"}),
        ("network_register_capabilities", {"capabilities": [{"id": "py", "name": "Python"}]}),
    ]


def test_idempotency_key_header():
    rec = Recorder()
    with client(rec) as hub:
        hub.call("network_ask", {"body": "x"}, idempotency_key="key-1")
        hub.delegate("do it", to_agent="coder", idempotency_key="key-2")
        hub.reply("thr_1", "ok", idempotency_key="key-3")
        hub.publish_artifact("file.txt", idempotency_key="key-4")
        hub.ask("no key")
    keys = [r.headers.get("idempotency-key") for r in rec.requests]
    assert keys == ["key-1", "key-2", "key-3", "key-4", None]


@pytest.mark.parametrize(
    ("status", "body", "content_type", "code", "needle"),
    [
        (502, b"<html><body>Bad Gateway</body></html>", "text/html", "unavailable", "Bad Gateway"),
        (500, b"Internal Server Error", "text/plain", "internal", "Internal Server Error"),
        (401, b'{"message":"Unauthorized"}', "application/json", "unauthenticated", "Unauthorized"),
        (403, b"", "text/plain", "permission_denied", "403"),
        (503, b"[1, 2]", "application/json", "unavailable", "[1, 2]"),
    ],
)
def test_non_envelope_error_bodies(status, body, content_type, code, needle):
    rec = Recorder(httpx.Response(status, content=body, headers={"content-type": content_type}))
    with client(rec) as hub, pytest.raises(ApiError) as info:
        hub.whoami()
    assert info.value.status == status
    assert info.value.code == code
    assert needle in info.value.message
    assert info.value.details is None


def test_success_with_non_json_or_non_object_body_is_an_error():
    rec = Recorder(
        httpx.Response(200, content=b"ok", headers={"content-type": "text/plain"}),
        httpx.Response(200, json=[1, 2, 3]),
    )
    with client(rec) as hub:
        with pytest.raises(ApiError) as text:
            hub.whoami()
        with pytest.raises(ApiError) as array:
            hub.whoami()
    assert text.value.status == 200 and text.value.code == "internal"
    assert array.value.code == "internal"


@pytest.mark.parametrize(
    "exc",
    [httpx.ConnectError("connection refused"), httpx.ReadTimeout("read timed out"),
     httpx.RemoteProtocolError("server disconnected")],
)
def test_transport_errors_are_unavailable(exc):
    rec = Recorder(exc)
    with client(rec) as hub, pytest.raises(ApiError) as info:
        hub.inbox()
    err = info.value
    assert err.status == 0 and err.is_transport_error
    assert err.code == "unavailable"
    assert URL in err.message
    assert err.details == {"exception": type(exc).__name__}


def test_retry_after_http_date_is_parsed():
    rec = Recorder(
        httpx.Response(429, json={"error": {"code": "rate_limited", "message": "x"}},
                       headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
    )
    with client(rec) as hub, pytest.raises(ApiError) as info:
        hub.inbox()
    assert info.value.retry_after == 0.0  # a date in the past means "now"


def test_async_client_call_and_convenience_methods():
    rec = Recorder(
        httpx.Response(200, json={"taskId": "task_1", "state": "offered"}),
        httpx.Response(404, json={"error": {"code": "not_found", "message": "no such task"}}),
        httpx.Response(200, json={"status": "ok", "version": "0.1.0"}),
    )

    async def main():
        async with AsyncRelaynetClient(URL, TOKEN, transport=httpx.MockTransport(rec)) as hub:
            created = await hub.delegate("review", to_agent="reviewer", idempotency_key="k")
            with pytest.raises(ApiError) as missing:
                await hub.task_get("task_404")
            health = await hub.health()
            return created, missing.value, health

    created, missing, health = anyio.run(main)
    assert created == {"taskId": "task_1", "state": "offered"}
    assert rec.requests[0].headers["idempotency-key"] == "k"
    assert rec.body(0) == {"objective": "review", "toAgent": "reviewer"}
    assert rec.requests[0].headers["authorization"] == "Bearer rn_inst_test"
    assert missing.status == 404 and missing.code == "not_found" and missing.message == "no such task"
    assert health["status"] == "ok"


def test_async_client_transport_error():
    async def main():
        def refuse(request):
            raise httpx.ConnectError("refused")

        async with AsyncRelaynetClient(URL, TOKEN, transport=httpx.MockTransport(refuse)) as hub:
            await hub.inbox()

    with pytest.raises(ApiError) as info:
        anyio.run(main)
    assert info.value.code == "unavailable" and info.value.status == 0


def test_arguments_must_be_a_dict():
    with client(Recorder()) as hub, pytest.raises(TypeError):
        hub.call("network_inbox", ["not", "a", "dict"])  # type: ignore[arg-type]


def test_pages_follows_next_cursor_until_null():
    rec = Recorder(httpx.Response(200, json={"tasks": [{"id": "task_2"}, {"id": "task_1"}], "nextCursor": "c1"}),
                   httpx.Response(200, json={"tasks": [{"id": "task_0"}], "nextCursor": None}))
    with client(rec) as hub:
        got = [t["id"] for t in hub.pages("tasks", {"action": "list", "limit": 2})]
    assert got == ["task_2", "task_1", "task_0"]
    assert rec.body(0) == {"action": "list", "limit": 2}
    assert rec.body(1) == {"action": "list", "limit": 2, "cursor": "c1"}


def test_check_claims_posts_the_paths_and_the_resource_namespace():
    answer = {"results": [{"path": "src/a.py", "conflicts": []}], "conflicting": 0}
    rec = Recorder(httpx.Response(200, json=answer), httpx.Response(200, json=answer))
    with client(rec) as hub:
        assert hub.check_claims(["src/a.py"]) == answer
        hub.check_claims(("src/a.py",), resource_id="github.com/acme/api")
    assert [(r.method, str(r.url)) for r in rec.requests] == [("POST", URL + "/v1/claims/check")] * 2
    assert rec.body(0) == {"paths": ["src/a.py"]}
    assert rec.body(1) == {"paths": ["src/a.py"], "resourceId": "github.com/acme/api"}


# ------------------------------------------------------------------ GET /v1/events (client_events)

def _sse(*events: tuple[str, dict | None]) -> httpx.Response:
    text = "".join(f"id: {data['id']}\nevent: {name}\ndata: {json.dumps(data)}\n\n" if data and "id" in data
                   else f"event: {name}\ndata: {json.dumps(data or {})}\n\n" for name, data in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=(": hello\n\n" + text).encode())


def _ev(i: int, name: str = "message") -> tuple[str, dict]:
    return name, {"event": name, "id": f"msg_{i:02d}", "messageId": f"msg_{i:02d}", "kind": "ask"}


def test_events_resume_after_a_drop_with_the_last_id_and_yield_a_replayed_event_once():
    rec = Recorder(_sse(_ev(1), _ev(2)), httpx.ConnectError("dropped"), httpx.Response(503, json={"error": {
        "code": "unavailable", "message": "the hub is starting or stopping; retry"}}),
                   _sse(_ev(2), _ev(3), ("replaced", {"reason": "replaced"})))
    with client(rec) as hub:
        got = [e["id"] for e in hub.events(retry_seconds=0.001)]
    assert got == ["msg_01", "msg_02", "msg_03"]  # msg_02 replayed after the drop: yielded once
    assert "last-event-id" not in rec.requests[0].headers  # a first connect starts with new events
    assert [r.headers["last-event-id"] for r in rec.requests[1:]] == ["msg_02"] * 3
    assert all(r.url.path.endswith("/v1/events") and r.headers["authorization"] == f"Bearer {TOKEN}"
               for r in rec.requests)


def test_events_from_a_given_id_and_the_hub_ending_the_stream_reconnects():
    rec = Recorder(_sse(_ev(5, "task_offer"), ("overflow", {"reason": "overflow"})),
                   _sse(_ev(6, "wake"), ("replaced", {"reason": "replaced"})))
    with client(rec) as hub:
        got = [(e["event"], e["id"]) for e in hub.events(last_event_id="")]
    assert got == [("task_offer", "msg_05"), ("wake", "msg_06")]
    assert [r.headers["last-event-id"] for r in rec.requests] == ["", "msg_05"]


def test_events_raise_401_when_the_token_is_revoked_and_the_refusal_when_it_is_bad():
    with client(Recorder(_sse(_ev(1), ("revoked", {"reason": "revoked"})))) as hub:
        stream = hub.events()
        assert next(stream)["id"] == "msg_01"
        with pytest.raises(ApiError) as raised:
            next(stream)
    assert (raised.value.status, raised.value.code) == (401, "unauthenticated")
    refused = httpx.Response(401, json={"error": {"code": "unauthenticated", "message": "missing, malformed, "
                                                                                       "unknown or revoked token"}})
    with client(Recorder(refused)) as hub, pytest.raises(ApiError) as raised:
        next(hub.events())
    assert (raised.value.status, raised.value.code) == (401, "unauthenticated")


def test_events_without_reconnect_raise_unavailable_on_a_drop():
    with client(Recorder(httpx.ConnectError("refused"))) as hub, pytest.raises(ApiError) as raised:
        next(hub.events(reconnect=False))
    assert raised.value.code == "unavailable"


def test_events_skip_a_block_with_sse_default_type_and_no_relaynet_data():
    cut = httpx.Response(200, headers={"content-type": "text/event-stream"},
                         content=b"data: \n\nevent: message\ndata: not json\n\n" + _sse(_ev(7), ("replaced", {})).content)
    with client(Recorder(cut)) as hub:
        assert [e["id"] for e in hub.events()] == ["msg_07"]
