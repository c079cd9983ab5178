"""One log line per request (issue 17): a real call through `relaynet serve` leaves one JSON line
with the tool, network, caller, correlation id (API Gateway's request id, which the response
carries as ``apigw-requestid``), status and latency (relaynet.observability.log_request)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.conftest import start_hub, stop_hub

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def logged_hub(tmp_path_factory):
    """A hub logging at INFO (template.yaml's LogLevel default; the test session runs at WARNING)."""
    hub = start_hub(tmp_path_factory.mktemp("logged"), env={"POWERTOOLS_LOG_LEVEL": "INFO"})
    yield hub
    stop_hub(hub)


def request_lines(hub, correlation_id: str) -> list[dict]:
    lines = []
    for raw in (hub.cwd / "serve.log").read_text(encoding="utf-8", errors="replace").splitlines():
        if raw.startswith("{") and correlation_id in raw:
            record = json.loads(raw)
            if record.get("message") == "request" and record.get("correlation_id") == correlation_id:
                lines.append(record)
    return lines


def test_a_tool_call_logs_one_line_with_tool_network_caller_and_correlation_id(logged_hub):
    net = logged_hub.tokens["networks"]["demo"]
    coder = net["instances"]["coder"][1]
    resp = httpx.post(f"{logged_hub.url}/v1/tools/network_claim", json={"scope": "src/log/**"},
                      headers={"Authorization": f"Bearer {coder['token']}"}, timeout=10)
    assert resp.status_code == 200
    correlation_id = resp.headers["apigw-requestid"]
    lines = request_lines(logged_hub, correlation_id)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["tool"] == "network_claim"
    assert line["network"] == net["networkId"]
    assert line["caller"] == coder["instanceId"] and line["agent"] == "coder"
    assert line["status"] == 200 and line["level"] == "INFO"
    assert isinstance(line["latency_ms"], (int, float)) and line["latency_ms"] >= 0
    assert line["service"] == "relaynet", "the service name is template.yaml's POWERTOOLS_SERVICE_NAME"
    assert line["function_request_id"] and line["function_name"]


def test_a_refused_call_is_logged_with_its_status_and_no_caller(logged_hub):
    resp = httpx.post(f"{logged_hub.url}/v1/tools/network_inbox", json={},
                      headers={"Authorization": "Bearer rn_inst_" + "x" * 43}, timeout=10)
    assert resp.status_code == 401
    [line] = request_lines(logged_hub, resp.headers["apigw-requestid"])
    assert line["tool"] == "network_inbox" and line["status"] == 401
    assert "caller" not in line and "network" not in line
