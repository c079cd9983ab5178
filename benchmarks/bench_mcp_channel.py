"""How soon the worker bridge tells a Claude Code session of an ask (issue 27 part 1;
relaynet.mcp_channel): ``relaynet serve`` on loopback (DynamoDB Local, the demo network), the
worker bridge for the reviewer started by the official ``mcp`` client over stdio, then N asks to
the reviewer, each after the channel's coalescing window has passed (so each is told at once):
the figure is the time from the ask's answer to the session having its
``notifications/claude/channel``, in ms (0 when it came first). Then a burst of 20 asks: how
many notifications told them.

Run: ``.venv/bin/python benchmarks/bench_mcp_channel.py [--asks 5]`` (loopback only; about
6 s per ask, the window). A figure, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.extension import NotificationBinding
from pydantic import BaseModel, ConfigDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ag2_wire import _start  # noqa: E402 - the one way the benchmarks start a hub

from relaynet import mcp_channel  # noqa: E402


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str
    meta: dict[str, str] = {}


async def _measure(url: str, tokens: dict, asks: int) -> tuple[list[float], int, int]:
    demo = tokens["networks"]["demo"]["instances"]
    reviewer, planner = demo["reviewer"][0]["token"], demo["planner"][0]["token"]
    got: list[tuple[float, _Params]] = []

    async def record(p: _Params) -> None:
        got.append((time.monotonic(), p))

    async def ask(http: httpx.AsyncClient, body: str) -> float:
        r = await http.post("/v1/tools/network_ask", json={"toAgent": "reviewer", "body": body},
                            headers={"Authorization": f"Bearer {planner}"})
        r.raise_for_status()
        return time.monotonic()

    async def told(count: int) -> None:
        with anyio.fail_after(30):
            while sum(int(p.meta["count"]) for _, p in got) < count:
                await anyio.sleep(0.005)

    params = StdioServerParameters(command=sys.executable, args=["-m", "relaynet.mcp_bridge", "worker"],
                                   env={"RELAYNET_URL": url, "RELAYNET_TOKEN": reviewer})
    binding = NotificationBinding(method=mcp_channel.METHOD, params_type=_Params, handler=record)
    late: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write, notification_bindings=[binding]) \
            as session, httpx.AsyncClient(base_url=url, timeout=10) as http:
        await session.initialize()
        await http.post("/v1/tools/network_inbox", json={}, headers={"Authorization": f"Bearer {reviewer}"})
        await ask(http, "warm-up")
        await told(1)
        total = 1
        for i in range(asks):
            await anyio.sleep(mcp_channel.WINDOW_SECONDS + 0.2)  # past the window: told at once
            answered = await ask(http, f"ask {i}")
            total += 1
            await told(total)
            late.append(max(0.0, got[-1][0] - answered) * 1000)
        await anyio.sleep(mcp_channel.WINDOW_SECONDS + 0.2)
        before = len(got)
        for i in range(20):
            await ask(http, f"burst {i}")
        await told(total + 20)
    return late, len(got) - before, 20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asks", type=int, default=5, help="asks, one per window (1 to 50)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        try:
            late, notices, burst = anyio.run(_measure, url, tokens, max(1, min(args.asks, 50)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    q = statistics.quantiles(late, n=100, method="inclusive") if len(late) > 1 else [late[0]] * 99
    print(f"notifications/claude/channel after the ask's answer, {len(late)} asks (ms): "
          f"p50 {q[49]:.1f} | p90 {q[89]:.1f} | max {max(late):.1f}")
    print(f"a burst of {burst} asks: {notices} notifications")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
