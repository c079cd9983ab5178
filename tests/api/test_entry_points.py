"""Every Lambda entry point is observable (issue 29): each handler in functions/ goes through
relaynet.observability.instrument with the kind of event its template events send it, and the
functions that are not tools (the authorizer, the AG2 wire's, health) log with the correlation id
of the request in front of them (docs/architecture.md "Observability")."""

from __future__ import annotations

import io
import json
import logging

import pytest

from relaynet_local.events import authorizer_event, http_event, schedule_event
from relaynet_local.lambdas import LambdaContext, load_handler
from tests.api.test_observability import emf_records, metric_values
from tests.conftest import ROOT

FUNCTIONS = ROOT / "functions"


def entry_point(handler) -> tuple[str, str] | None:
    """The ``(name, source)`` observability.instrument gave ``handler``, or None when it did not
    make it. A ToolApp's handler (a bound method) runs the entry instrument made for it."""
    from relaynet.http.api import ToolApp

    owner = getattr(handler, "__self__", None)
    if isinstance(owner, ToolApp):
        handler = owner._entry
    return getattr(handler, "instrumented", None)


def template_sources() -> dict[str, set[str]]:
    """What template.yaml sends each handler module: ``{module: {"http", "websocket", ...}}``."""
    from relaynet_local.ag2_ws import websocket_routes
    from relaynet_local.template import load_template

    template = load_template(ROOT / "template.yaml")
    module = {lid: fn.handler.split(".")[0] for lid, fn in template.functions.items()}
    out: dict[str, set[str]] = {}
    for route in template.routes:
        out.setdefault(route.handler.split(".")[0], set()).add("http")
    out.setdefault(template.authorizer.handler.split(".")[0], set()).add("authorizer")
    for lid, resource in template.document["Resources"].items():
        for source in ((resource.get("Properties") or {}).get("Events") or {}).values():
            kind = {"Schedule": "schedule", "DynamoDB": "stream"}.get(source.get("Type"))
            if kind:
                out.setdefault(module[lid], set()).add(kind)
    for function_id in websocket_routes(template.document)[1].values():
        out.setdefault(module[function_id], set()).add("websocket")
    return out


def test_every_function_handler_is_instrumented_for_the_events_its_template_sends_it():
    """A new function that skips observability.instrument, or names another entry point or the
    wrong kind of event (so the wrong correlation id), fails here."""
    sources = template_sources()
    stems = sorted(p.stem for p in FUNCTIONS.glob("*.py"))
    assert len(stems) > 50 and set(sources) <= set(stems)
    wrong = {}
    for stem in stems:
        found = entry_point(load_handler(str(FUNCTIONS), f"{stem}.handler"))
        if found is None or found[0] != stem or found[1] not in sources.get(stem, set()):
            wrong[stem] = (found, sorted(sources.get(stem, ())))
    assert wrong == {}, "handler -> (instrument's (name, source), the template's event kinds)"


def test_an_unknown_event_source_is_refused_when_the_handler_is_built():
    from relaynet import observability

    with pytest.raises(ValueError, match="unknown event source 'sqs'"):
        observability.instrument(lambda event, context: None, name="x", source="sqs")


@pytest.fixture
def log_lines():
    """The JSON lines the service's powertools logger writes (at INFO, template.yaml's default;
    the test session runs at WARNING), as dicts, from this point of the test on."""
    from relaynet import observability

    handler = observability.logger.registered_handler
    buffer = io.StringIO()
    previous_stream, previous_level = handler.setStream(buffer), observability.logger.log_level
    observability.logger.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines() if line.startswith("{")]
    finally:
        handler.setStream(previous_stream)
        observability.logger.setLevel(previous_level)


def authorize(token: str, request_id: str) -> dict:
    event = authorizer_event("POST", "/v1/tools/network_whoami", route_key="POST /v1/tools/network_whoami",
                             identity=[f"Bearer {token}"], request_id=request_id)
    return load_handler(str(FUNCTIONS), "authorizer.handler")(event, LambdaContext("AuthorizerFunction", 10.0, 256))


def test_an_authorization_logs_one_line_with_the_requests_correlation_id_and_caller(demo, log_lines):
    answer = authorize(demo.token("coder0"), "req-auth-1")
    assert answer["isAuthorized"] is True and answer["context"]["kind"] == "instance"
    [line] = [r for r in log_lines() if r.get("correlation_id") == "req-auth-1"]
    assert line["message"] == "authorize" and line["level"] == "INFO"
    assert line["function"] == "authorizer" and line["function_request_id"]
    principal = demo.principals["coder0"]
    assert (line["network"], line["caller"], line["agent"]) == (principal.network_id, principal.instance_id, "coder")
    assert line["latency_ms"] >= 0
    assert demo.token("coder0") not in json.dumps(log_lines()), "never the token"


def test_an_unknown_token_is_authorised_anonymously_and_logged_without_a_caller(demo, log_lines):
    answer = authorize("rn_inst_" + "x" * 43, "req-auth-2")
    assert answer == {"isAuthorized": True, "context": {"kind": "anonymous"}}
    [line] = [r for r in log_lines() if r.get("correlation_id") == "req-auth-2"]
    assert line["message"] == "authorize"
    assert "caller" not in line and "network" not in line


def websocket_event(route: str, connection_id: str, request_id: str, body: str | None = None, **ctx) -> dict:
    """A WebSocket API event as API Gateway sends it (and relaynet_local.ag2_ws builds it)."""
    event = {"requestContext": {"routeKey": route, "connectionId": connection_id, "requestId": request_id,
                                "domainName": "ws.example.test", "stage": "v1", "apiId": "local", **ctx},
             "isBase64Encoded": False}
    if body is not None:
        event["body"] = body
    return event


@pytest.fixture
def posted(monkeypatch):
    """The frames the AG2 functions post to connections (postToConnection), instead of posting."""
    from relaynet.ag2 import post

    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(post, "post", lambda endpoint, connection_id, data: sent.append(
        (connection_id, json.loads(data))))
    return sent


def test_an_ag2_frame_logs_with_its_correlation_id_and_connection_and_so_does_the_wire(table, log_lines, posted):
    """$connect, a ping and an undecodable message: each invocation ends with one ``request``
    line carrying its API Gateway request id, connection and route, and the AG2 wire's own
    warning (relaynet.ag2.wire, a child of the service's logger) carries the same keys."""
    context = LambdaContext("Ag2FramesFunction", 29.0, 512)
    connect = load_handler(str(FUNCTIONS), "ag2_connection.handler")
    frames = load_handler(str(FUNCTIONS), "ag2_frames.handler")
    assert connect(websocket_event("$connect", "conn-1", "req-ws-1", eventType="CONNECT"), context) == {"statusCode": 200}
    assert frames(websocket_event("ping", "conn-1", "req-ws-2", '{"kind": "ping"}', eventType="MESSAGE"),
                  context) == {"statusCode": 200}
    assert frames(websocket_event("$default", "conn-1", "req-ws-3", "not json", eventType="MESSAGE"),
                  context) == {"statusCode": 200}
    assert posted == [("conn-1", {"kind": "pong"})]
    lines = log_lines()
    by_id = {rid: [r for r in lines if r.get("correlation_id") == rid] for rid in ("req-ws-1", "req-ws-2", "req-ws-3")}
    [connected] = by_id["req-ws-1"]
    assert (connected["message"], connected["function"], connected["route"], connected["connection_id"],
            connected["status"]) == ("request", "ag2_connection", "$connect", "conn-1", 200)
    [pinged] = by_id["req-ws-2"]
    assert (pinged["message"], pinged["function"], pinged["route"], pinged["status"]) == (
        "request", "ag2_frames", "ping", 200)
    dropped, closing = by_id["req-ws-3"]
    assert dropped["message"].startswith("AG2 frame dropped") and dropped["level"] == "WARNING"
    assert (dropped["function"], dropped["connection_id"]) == ("ag2_frames", "conn-1")
    assert closing["message"] == "request" and closing["route"] == "$default"
    assert all(r.get("correlation_id") for r in lines), "no line of these invocations lacks its id"


def test_a_failing_websocket_invocation_logs_its_error_with_the_correlation_id_and_raises(table, log_lines,
                                                                                          monkeypatch):
    from relaynet.ag2 import post

    def refuse(endpoint, connection_id, data):
        raise RuntimeError("management API down")

    monkeypatch.setattr(post, "post", refuse)
    context = LambdaContext("Ag2FramesFunction", 29.0, 512)
    load_handler(str(FUNCTIONS), "ag2_connection.handler")(
        websocket_event("$connect", "conn-2", "req-ws-8", eventType="CONNECT"), context)
    with pytest.raises(RuntimeError, match="management API down"):
        load_handler(str(FUNCTIONS), "ag2_frames.handler")(
            websocket_event("ping", "conn-2", "req-ws-9", '{"kind": "ping"}', eventType="MESSAGE"), context)
    [line] = [r for r in log_lines() if r.get("correlation_id") == "req-ws-9"]
    assert (line["message"], line["level"], line["status"]) == ("request", "ERROR", 500)
    assert "management API down" in line["exception"] and line["connection_id"] == "conn-2"


def test_an_invocation_carries_none_of_the_previous_ones_keys(demo, log_lines):
    """One process serves invocation after invocation (and, in the local stack, every function):
    a stream batch after an authorization logs neither its caller nor its correlation id, which
    powertools keeps as a plain key until an event with one replaces it."""
    from relaynet import observability

    def batch(event, context):
        observability.logger.info("inside")
        return {"batchItemFailures": []}

    authorize(demo.token("coder0"), "req-auth-3")
    stream = observability.instrument(batch, name="probe", source="stream")
    assert stream({"Records": []}, LambdaContext("ProbeFunction", 3.0, 128)) == {"batchItemFailures": []}
    [inside] = [r for r in log_lines() if r["message"] == "inside"]
    assert inside["function"] == "probe" and inside["function_request_id"]
    assert not {"correlation_id", "caller", "network", "agent"} & set(inside)


def test_health_is_answered_as_before_and_logged_as_a_request(log_lines):
    event = http_event("GET", "/v1/health", route_key="GET /v1/health", request_id="req-health")
    resp = load_handler(str(FUNCTIONS), "health.handler")(event, LambdaContext("HealthFunction", 3.0, 128))
    assert resp["statusCode"] == 200 and json.loads(resp["body"])["status"] == "ok"
    assert set(resp) == {"statusCode", "headers", "body"}
    [line] = [r for r in log_lines() if r.get("correlation_id") == "req-health"]
    assert (line["message"], line["tool"], line["status"]) == ("request", "health", 200)


def test_a_scheduled_run_flushes_its_counts_as_one_emf_record(demo, capsys, log_lines):
    """log_metrics' job, done once per invocation (observability._flush): the sweep's outcomes
    come out as one record of that invocation, under its function's name."""
    capsys.readouterr()
    stats = load_handler(str(FUNCTIONS), "sweep.handler")(schedule_event("SweepFunction"),
                                                          LambdaContext("SweepFunction", 60.0, 256))
    records = emf_records(capsys.readouterr().out)
    assert len(records) == 1, "one flush per invocation"
    assert records[0]["function"] == "sweep"
    assert metric_values(records, "SweepSeen") == [float(stats["seen"])]
    assert metric_values(records, "SweepChannelsExpired") == [float(stats["channels_expired"])]
