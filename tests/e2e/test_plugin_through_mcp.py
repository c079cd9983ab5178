"""The plugin surface end to end (PROTOCOL.md 5): one instance consults another with `delegate`
through `relaynet mcp plugin`; the call blocks until the target answers with `say`, which it
learns about from its inbox (the worker bridge)."""

from __future__ import annotations

import json
import os
from contextlib import AsyncExitStack

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.e2e.conftest import RELAYNET

pytestmark = pytest.mark.e2e


async def _open(stack: AsyncExitStack, url: str, token: str, surface: str) -> ClientSession:
    params = StdioServerParameters(command=RELAYNET, args=["mcp", surface],
                                   env={"RELAYNET_URL": url, "RELAYNET_TOKEN": token, "PATH": os.environ["PATH"]})
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def test_delegate_blocks_until_the_consulted_agent_says_its_answer(hub):
    async def story():
        async with AsyncExitStack() as stack:
            planner = await _open(stack, hub.url, hub.token("planner"), "plugin")
            reviewer_worker = await _open(stack, hub.url, hub.token("reviewer"), "worker")
            reviewer = await _open(stack, hub.url, hub.token("reviewer"), "plugin")
            names = {t.name for t in (await planner.list_tools()).tools}
            assert names == {"delegate", "peers", "channels", "tasks", "context", "say", "handoff"}

            answered: dict = {}

            async def reviewer_loop():
                for _ in range(100):
                    got = json.loads((await reviewer_worker.call_tool("network_inbox", {})).content[0].text)
                    prompts = [m for m in got["messages"] if m["kind"] == "channel"
                               and m["envelope"]["event_type"] == "text"]
                    if prompts:
                        m = prompts[0]
                        assert "say(channel_id=" in m["instructions"]
                        result = await reviewer.call_tool("say", {"channel_id": m["channelId"],
                                                                  "content": "Ship it: the change is safe."})
                        answered["say"] = json.loads(result.content[0].text)
                        return
                    await anyio.sleep(0.2)

            async with anyio.create_task_group() as tg:
                tg.start_soon(reviewer_loop)
                result = await planner.call_tool("delegate", {"target": "reviewer", "timeout": 60,
                                                              "prompt": "Is the /health change safe to ship?"})
            out = json.loads(result.content[0].text)
            assert not result.is_error
            assert out["reply"] == "Ship it: the change is safe." and out["state"] == "closed"
            assert answered["say"]["channel_state"] == "closed"

            refused = await planner.call_tool("delegate", {"target": "ghost", "prompt": "?"})
            assert refused.is_error and "not_found" in refused.content[0].text

    anyio.run(story)


def test_the_control_bridge_lists_the_control_surface(hub):
    async def run():
        async with AsyncExitStack() as stack:
            rep = await _open(stack, hub.url, hub.tokens["representatives"]["ops"], "control")
            names = {t.name for t in (await rep.list_tools()).tools}
            assert len(names) == 23 and all(n.startswith("control_") for n in names)
            status = json.loads((await rep.call_tool("control_network_status", {})).content[0].text)
            assert status["agents"] == 3

    anyio.run(run)
    assert httpx.get(f"{hub.url}/v1/health").status_code == 200


def test_relaynet_graph_prints_mermaid(hub):
    import subprocess

    out = subprocess.run([RELAYNET, "graph", "--url", hub.url, "--token", hub.tokens["representatives"]["ops"]],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("flowchart LR") and '"planner"' in out.stdout
