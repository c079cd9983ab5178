"""How long AG2's own client takes through Relaynet's AG2 wire (docs/protocol.md 12) on the local
stack: ``relaynet serve`` on loopback (DynamoDB Local, the demo network), two humans over
``HubClient(WsLink(ws://127.0.0.1:PORT/v1/ag2))``, then N consults, each: open a consulting
channel (with AG2's invite/ack handshake), post the question, receive it, post the answer, see the
channel closed with ``consulting_complete``. Prints the median and the slowest, per phase.

Run: ``.venv/bin/python benchmarks/bench_ag2_wire.py [--consults 10]`` (loopback only, about a
minute with the store's start). A figure, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _start(tmp: Path) -> tuple[subprocess.Popen, str, dict]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tokens = tmp / "tokens.json"
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}
    proc = subprocess.Popen([str(Path(sys.executable).with_name("relaynet")), "serve", "--port", str(port), "--spec",
                             str(ROOT / "examples" / "demo-network.yaml"), "--tokens-out", str(tokens),
                             "--template", str(ROOT / "template.yaml")], cwd=tmp, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp / "serve.log", "wb"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200 and tokens.exists():
                return proc, url, json.loads(tokens.read_text())
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"relaynet serve did not start: {(tmp / 'serve.log').read_text()[-2000:]}")


async def _consults(url: str, tokens: dict, n: int) -> dict[str, list[float]]:
    from ag2.network import AuthBlock, HubClient, Passport, WsLink
    from ag2.network.envelope import EV_CHANNEL_CLOSED, EV_TEXT

    def passport(name: str) -> Passport:
        token = tokens["networks"]["demo"]["instances"][name][0]["token"]
        return Passport(name=name, auth=AuthBlock(scheme="api_key", claim={"token": token}))

    ws = url.replace("http://", "ws://") + "/v1/ag2"
    a, b = HubClient(WsLink(ws)), HubClient(WsLink(ws))
    phases: dict[str, list[float]] = {"open": [], "question": [], "answer and close": [], "consult": []}
    try:
        alice = await a.register_human(passport("planner"))
        bob = await b.register_human(passport("reviewer"))
        for i in range(n):
            t0 = time.perf_counter()
            channel = await alice.open(type="consulting", target="reviewer")
            t1 = time.perf_counter()
            await alice.send(channel.channel_id, f"question {i}")
            q = await bob.wait_for_channel_event(channel_id=channel.channel_id,
                                                 predicate=lambda e: e.event_type == EV_TEXT, timeout=30)
            t2 = time.perf_counter()
            await bob.send(channel.channel_id, f"answer {i}", causation_id=q.envelope_id)
            await alice.wait_for_channel_event(channel_id=channel.channel_id,
                                               predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=30)
            t3 = time.perf_counter()
            for name, value in (("open", t1 - t0), ("question", t2 - t1), ("answer and close", t3 - t2),
                                ("consult", t3 - t0)):
                phases[name].append(value * 1000)
    finally:
        await a.close()
        await b.close()
    return phases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--consults", type=int, default=10, help="how many consults (1 to 100)")
    args = ap.parse_args(argv)
    n = max(1, min(args.consults, 100))
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        try:
            phases = asyncio.run(asyncio.wait_for(_consults(url, tokens, n), 600))
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    print(f"AG2 wire on the local stack, {n} consults (ms): phase | median | slowest")
    for name, values in phases.items():
        print(f"  {name:17s} | {statistics.median(values):7.1f} | {max(values):7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
