"""The worker bridge as a Claude Code channel (issue 27 part 1; relaynet.mcp_channel) against
`relaynet serve` on DynamoDB Local, through the official ``mcp`` client over stdio: it declares
the experimental ``claude/channel`` capability, tells the session of an ask with one
``notifications/claude/channel`` (never the body), and coalesces a burst."""

from __future__ import annotations

import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.extension import NotificationBinding
from pydantic import BaseModel, ConfigDict

from relaynet import mcp_channel
from tests.e2e.conftest import tool

WAIT = 30.0


class ChannelParams(BaseModel):
    """``notifications/claude/channel``'s params as Claude Code reads them."""

    model_config = ConfigDict(extra="allow")
    content: str
    meta: dict[str, str] = {}


def _run(hub, agent: str, body):
    """The worker bridge for ``agent``'s instance, an initialised session that records every
    channel notification, and ``body(session, init, got)`` run on it."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "relaynet.mcp_bridge", "worker"],
                                   env={"RELAYNET_URL": hub.url, "RELAYNET_TOKEN": hub.token(agent)})
    got: list[ChannelParams] = []
    arrived = anyio.Event()

    async def record(p: ChannelParams) -> None:
        nonlocal arrived
        got.append(p)
        arrived.set()
        arrived = anyio.Event()

    async def until(predicate) -> None:
        with anyio.fail_after(WAIT):
            while not predicate():
                await arrived.wait()

    async def main():
        async with stdio_client(params) as (read, write):
            binding = NotificationBinding(method=mcp_channel.METHOD, params_type=ChannelParams, handler=record)
            async with ClientSession(read, write, notification_bindings=[binding]) as session:
                init = await session.initialize()
                return await body(session, init, got, until)

    return anyio.run(main)


def test_the_worker_bridge_is_a_claude_code_channel_and_coalesces_a_burst(hub):
    tool(hub, "network_inbox", {}, hub.token("reviewer"))  # nothing waits: every notice is one of ours
    planner = hub.token("planner")

    async def body(session, init, got, until):
        assert init.capabilities.experimental == {"claude/channel": {}}
        assert "network_inbox" in init.instructions and "channel" in init.instructions
        first = await anyio.to_thread.run_sync(
            lambda: tool(hub, "network_ask", {"body": "the secret diff", "toAgent": "reviewer"}, planner))
        await until(lambda: len(got) >= 1)
        assert got[0].meta == {"kind": "message", "messageId": first["messageId"], "count": "1"}
        assert got[0].content == "1 new on Relaynet: a message. Call network_inbox."
        # a burst of 20 asks (and a task offer) is told in at most two notifications, counting all of them
        sent = [await anyio.to_thread.run_sync(
            lambda i=i: tool(hub, "network_ask", {"body": f"burst {i}", "toAgent": "reviewer"}, planner))
            for i in range(20)]
        task = await anyio.to_thread.run_sync(lambda: tool(
            hub, "network_delegate", {"objective": "review the burst", "toAgent": "reviewer"}, planner))
        await until(lambda: sum(int(p.meta["count"]) for p in got[1:]) >= 21)
        later = got[1:]
        assert len(later) <= 2 and sum(int(p.meta["count"]) for p in later) == 21
        assert f"task {task['taskId']}" in " ".join(p.content for p in later)
        assert all("burst" not in p.content and "secret" not in p.content for p in got)
        # the tools still work beside the channel
        inbox = await session.call_tool("network_inbox", {})
        assert not inbox.is_error and sent[-1]["messageId"] in inbox.content[0].text

    _run(hub, "reviewer", body)
