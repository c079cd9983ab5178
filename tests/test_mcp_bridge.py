"""The MCP bridge (relaynet.mcp_bridge) driven by the official MCP client over stdio.

``python -m relaynet.mcp_bridge worker`` runs as a subprocess; RELAYNET_URL points at a small
stub hub (http.server in a thread on 127.0.0.1:0) that records what it receives.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client

from relaynet import catalogue, client_version, mcp_bridge
from relaynet.client import ApiError
from relaynet.mcp_bridge import Bridge, format_error
from relaynet_local.generate import input_schema

TOKEN = "rn_inst_test"
WORKER_TOOLS = {
    "network_whoami", "network_discover", "network_ask", "network_inbox", "network_reply",
    "network_delegate", "network_task_get", "network_task_update", "network_claim",
    "network_release", "network_publish_artifact", "network_register_capabilities",
}
CLAIM_CONFLICT = {
    "error": {
        "code": "conflict",
        "message": "scope is claimed by coder/inst_01HZX",
        "details": {
            "reason": "claim_conflict",
            "conflicts": [{"claimId": "clm_01", "scope": "src/**",
                           "holder": {"agent": "coder", "instanceId": "inst_01HZX"},
                           "expiresAt": "2026-11-29T18:00:00.000Z"}],
        },
    }
}
# The directory that holds the client's half of the relaynet namespace (client/), so the child
# imports this checkout's bridge.
SHARED_DIR = str(Path(mcp_bridge.__file__).resolve().parents[1])


# --------------------------------------------------------------------------- the stub hub


class StubHub:
    """Records every request; answers from ``routes`` (tool name -> (status, JSON)) or 200."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.routes: dict[str, tuple[int, dict[str, Any]]] = {}
        self.drop_first: set[str] = set()  # tools whose first request gets no response
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                tool = self.path.rsplit("/", 1)[-1]
                hub.requests.append({"path": self.path, "headers": dict(self.headers.items()),
                                     "body": json.loads(raw) if raw else None})
                if tool in hub.drop_first:
                    hub.drop_first.discard(tool)
                    self.close_connection = True
                    return  # no response at all: the client sees a transport error
                status, payload = hub.routes.get(tool, (200, {"ok": True, "tool": tool, "echo": json.loads(raw or b"{}")}))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "StubHub":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    with StubHub() as hub:
        yield hub


def with_bridge(env: dict[str, str], body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Start the bridge subprocess with ``env``, initialize a session, run ``body`` on it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "relaynet.mcp_bridge", "worker"],
        env={"PYTHONPATH": SHARED_DIR, **env},
    )

    async def main() -> Any:
        with anyio.fail_after(20):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    return init, await body(session)

    return anyio.run(main)


def text_of(result) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


# --------------------------------------------------------------------------- over stdio


def test_lists_exactly_the_worker_tools_with_schemas(stub):
    async def body(session: ClientSession):
        return await session.list_tools()

    init, listed = with_bridge({"RELAYNET_URL": stub.url, "RELAYNET_TOKEN": TOKEN}, body)
    assert init.server_info.name == "relaynet-worker"
    assert init.server_info.version == client_version.__version__
    assert "network_inbox" in init.instructions and "claim" in init.instructions
    assert init.capabilities.tools is not None

    tools = {t.name: t for t in listed.tools}
    assert set(tools) == WORKER_TOOLS and len(listed.tools) == 12
    for tool in listed.tools:
        assert tool.description and len(tool.description) > 20
        schema = tool.input_schema
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
        assert schema == input_schema(catalogue.TOOLS[tool.name].model)
    assert tools["network_reply"].input_schema["required"] == ["threadId", "body"]
    assert tools["network_ask"].input_schema["required"] == ["body"]
    assert "required" not in tools["network_inbox"].input_schema
    assert set(tools["network_task_update"].input_schema["properties"]["status"]["enum"]) == {
        "accepted", "working", "blocked", "completed", "failed", "cancelled"}
    # Extra names are refused by the schema, as by the hub.
    reply = Draft202012Validator(tools["network_reply"].input_schema)
    assert reply.is_valid({"threadId": "thr_1", "body": "hi"})
    assert not reply.is_valid({"threadId": "thr_1", "body": "hi", "toAgnet": "x"})
    assert not reply.is_valid({"body": "hi"})
    caps = Draft202012Validator(tools["network_register_capabilities"].input_schema)
    assert caps.is_valid({"capabilities": [{"id": "py", "name": "Python"}]})
    assert not caps.is_valid({"capabilities": [{"id": "py", "name": "Python", "extra": 1}]})
    assert not stub.requests  # listing never contacts the hub


def test_call_is_relayed_and_result_is_json_text(stub):
    stub.routes["network_whoami"] = (200, {"instance": {"id": "inst_1"}, "agent": {"name": "coder"},
                                           "network": {"id": "net_1", "name": "démo"}})

    async def body(session: ClientSession):
        who = await session.call_tool("network_whoami", {})
        asked = await session.call_tool("network_ask", {"body": "review please", "toAgent": "reviewer"})
        claimed = await session.call_tool("network_claim", {"scope": "src/**"})
        return who, asked, claimed

    _, (who, asked, claimed) = with_bridge({"RELAYNET_URL": stub.url + "/", "RELAYNET_TOKEN": TOKEN}, body)
    assert not who.is_error
    assert json.loads(text_of(who)) == stub.routes["network_whoami"][1]
    assert not asked.is_error
    assert json.loads(text_of(asked))["echo"] == {"body": "review please", "toAgent": "reviewer"}

    paths = [r["path"] for r in stub.requests]
    assert paths == ["/v1/tools/network_whoami", "/v1/tools/network_ask", "/v1/tools/network_claim"]
    for r in stub.requests:
        assert r["headers"]["Authorization"] == f"Bearer {TOKEN}"
        assert r["headers"]["Content-Type"] == "application/json"
    assert stub.requests[0]["body"] == {}
    assert stub.requests[1]["body"] == {"body": "review please", "toAgent": "reviewer"}
    assert stub.requests[2]["body"] == {"scope": "src/**"}
    # Creating writes carry an Idempotency-Key; others do not.
    assert len(stub.requests[1]["headers"].get("Idempotency-Key", "")) >= 32
    assert "Idempotency-Key" not in stub.requests[0]["headers"]
    assert "Idempotency-Key" not in stub.requests[2]["headers"]


def test_api_error_is_a_tool_error_with_code_reason_message(stub):
    stub.routes["network_claim"] = (409, CLAIM_CONFLICT)
    stub.routes["network_reply"] = (400, {"error": {"code": "invalid_argument", "message": "toAgnet: unknown argument",
                                                    "details": {"fields": [{"field": "toAgnet", "message": "unknown argument"}]}}})

    async def body(session: ClientSession):
        conflict = await session.call_tool("network_claim", {"scope": "src/api/**"})
        invalid = await session.call_tool("network_reply", {"threadId": "thr_1", "body": "x", "toAgnet": "b"})
        return conflict, invalid

    _, (conflict, invalid) = with_bridge({"RELAYNET_URL": stub.url, "RELAYNET_TOKEN": TOKEN}, body)
    assert conflict.is_error
    text = text_of(conflict)
    assert text.startswith("conflict (claim_conflict): scope is claimed by coder/inst_01HZX")
    assert "clm_01" in text and "409" in text
    details = json.loads(text.split("details: ", 1)[1].splitlines()[0])
    assert details == CLAIM_CONFLICT["error"]["details"]
    # The bridge does not validate: the hub's answer about the misspelt name reaches the agent.
    assert stub.requests[-1]["body"] == {"threadId": "thr_1", "body": "x", "toAgnet": "b"}
    assert invalid.is_error and text_of(invalid).startswith("invalid_argument: toAgnet: unknown argument")


def test_creating_write_is_retried_once_with_the_same_key(stub):
    stub.drop_first.add("network_delegate")

    async def body(session: ClientSession):
        return await session.call_tool("network_delegate", {"objective": "fix it", "toAgent": "coder"})

    _, result = with_bridge({"RELAYNET_URL": stub.url, "RELAYNET_TOKEN": TOKEN}, body)
    assert not result.is_error, text_of(result)
    assert [r["path"] for r in stub.requests] == ["/v1/tools/network_delegate"] * 2
    keys = {r["headers"]["Idempotency-Key"] for r in stub.requests}
    assert len(keys) == 1 and all(stub.requests[i]["body"] == {"objective": "fix it", "toAgent": "coder"} for i in (0, 1))


def test_starts_without_configuration_and_calls_say_what_is_missing():
    async def body(session: ClientSession):
        listed = await session.list_tools()
        called = await session.call_tool("network_inbox", {})
        return listed, called

    _, (listed, called) = with_bridge({"RELAYNET_TOKEN": TOKEN}, body)
    assert {t.name for t in listed.tools} == WORKER_TOOLS
    assert called.is_error
    assert "RELAYNET_URL" in text_of(called) and "not set" in text_of(called)
    assert "RELAYNET_TOKEN" not in text_of(called).split(".")[0]


def test_unreachable_hub_is_a_tool_error():
    with StubHub() as gone:
        url = gone.url  # a port nobody listens on once the stub is closed

    async def body(session: ClientSession):
        return await session.call_tool("network_inbox", {})

    _, result = with_bridge({"RELAYNET_URL": url, "RELAYNET_TOKEN": TOKEN}, body)
    assert result.is_error
    assert text_of(result).startswith("unavailable: cannot reach the Relaynet hub at " + url)


# --------------------------------------------------------------------------- in process


def run_bridge(handler, name: str, arguments: dict[str, Any], *, url: str = "http://hub.test", token: str = TOKEN):
    bridge = Bridge("worker", url, token, transport=httpx.MockTransport(handler))

    async def main():
        try:
            return await bridge.call_tool(name, arguments)
        finally:
            await bridge.aclose()

    return anyio.run(main)


def test_non_creating_call_is_not_retried():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.ReadTimeout("slow")

    result = run_bridge(handler, "network_inbox", {})
    assert result.is_error and text_of(result).startswith("unavailable: timed out")
    assert len(seen) == 1


def test_retry_that_meets_in_progress_waits_and_tries_again():
    seen: list[httpx.Request] = []
    answers = [
        httpx.ConnectError("refused"),
        httpx.Response(409, json={"error": {"code": "conflict", "message": "still running",
                                            "details": {"reason": "in_progress"}}}, headers={"Retry-After": "0"}),
        httpx.Response(200, json={"messageId": "msg_1", "threadId": "thr_1", "recipients": []}),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    result = run_bridge(handler, "network_reply", {"threadId": "thr_1", "body": "ok"})
    assert not result.is_error
    assert json.loads(text_of(result))["messageId"] == "msg_1"
    assert len({r.headers["idempotency-key"] for r in seen}) == 1 and len(seen) == 3


def test_second_transport_failure_is_reported():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    result = run_bridge(handler, "network_publish_artifact", {"uri": "file.txt"})
    assert result.is_error and "unavailable" in text_of(result)


def test_unknown_tool_is_a_protocol_error():
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError):
        run_bridge(lambda r: httpx.Response(200, json={}), "control_whoami", {})


def test_format_error_shapes():
    assert format_error(ApiError(404, "not_found", "no task task_1")) == "not_found: no task task_1 [HTTP 404]"
    text = format_error(ApiError(429, "rate_limited", "slow down", None, 2.0))
    assert text == "rate_limited: slow down [HTTP 429]\nretry after 2 s"
