"""How long AG2's own client takes through Relaynet's AG2 wire (docs/protocol.md 12) on the local
stack: ``relaynet serve`` on loopback (DynamoDB Local, the demo network), two humans over
``HubClient(WsLink(ws://127.0.0.1:PORT/v1/ag2))``, then N consults, each: open a consulting
channel (with AG2's invite/ack handshake), post the question, receive it, post the answer, see the
channel closed with ``consulting_complete``. Prints the median and the slowest, per phase.

Run: ``.venv/bin/python benchmarks/bench_ag2_wire.py [--consults 10]`` (loopback only, about a
minute with the store's start). A figure, not a test.

``--soak SECONDS --pairs N`` runs it as users would, bounded: N pairs of AG2 agents (a human asker
and an ``Agent`` answerer each, a network written for the run) consult in a loop for SECONDS at
once, every answerer re-attaching (a new connection, ``attach`` with replay) every tenth consult;
it prints consults, errors, latency percentiles, duplicate or missing envelopes and the memory of
``relaynet serve`` and of its DynamoDB Local, then restarts the hub on the same data and checks
every pair's last channel reads back whole (``read_wal``) and one more consult crosses.
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
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _start(tmp: Path, spec: Path | None = None, port: int | None = None) -> tuple[subprocess.Popen, str, dict]:
    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    tokens = tmp / "tokens.json"
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}
    proc = subprocess.Popen([str(Path(sys.executable).with_name("relaynet")), "serve", "--port", str(port), "--spec",
                             str(spec or ROOT / "examples" / "demo-network.yaml"), "--tokens-out", str(tokens),
                             "--template", str(ROOT / "template.yaml")], cwd=tmp, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp / "serve.log", "ab"))
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


async def _rounds(url: str, tokens: dict, n: int, cpu: Any = None) -> dict[str, list[float]]:
    """Issue 26's figure: one conversation channel between two humans, then ``n`` rounds, each:
    alice sends, bob receives it and replies, alice receives the reply (ms per round; the
    channel's open, with its invite and ack, measured once per run and reported as ``open``).
    ``cpu()``: the hub's and its store's CPU ms so far; their use over the rounds goes into
    ``cpu_per_round`` as ``[hub, store]`` ms per round (less noisy than the wall time here)."""
    from ag2.network import AuthBlock, HubClient, Passport, WsLink
    from ag2.network.envelope import EV_TEXT

    def passport(name: str) -> Passport:
        token = tokens["networks"]["demo"]["instances"][name][0]["token"]
        return Passport(name=name, auth=AuthBlock(scheme="api_key", claim={"token": token}))

    ws = url.replace("http://", "ws://") + "/v1/ag2"
    a, b = HubClient(WsLink(ws)), HubClient(WsLink(ws))
    out: dict[str, list[float]] = {"open": [], "round trip": []}
    try:
        alice = await a.register_human(passport("planner"))
        bob = await b.register_human(passport("reviewer"))
        for _ in range(3):  # several opens: the figure is a median, not one sample
            t0 = time.perf_counter()
            channel = await alice.open(type="conversation", target="reviewer")
            out["open"].append((time.perf_counter() - t0) * 1000)
        cid = channel.channel_id
        before = cpu() if cpu else None
        for i in range(n):
            t0 = time.perf_counter()
            await alice.send(cid, f"ping {i}")
            await bob.wait_for_channel_event(channel_id=cid, predicate=lambda e, i=i: e.event_type == EV_TEXT
                                             and e.event_data.get("text") == f"ping {i}", timeout=30)
            await bob.send(cid, f"pong {i}")
            await alice.wait_for_channel_event(channel_id=cid, predicate=lambda e, i=i: e.event_type == EV_TEXT
                                               and e.event_data.get("text") == f"pong {i}", timeout=30)
            out["round trip"].append((time.perf_counter() - t0) * 1000)
        if before is not None:
            after = cpu()
            out["cpu_per_round"] = [(after[0] - before[0]) / n, (after[1] - before[1]) / n]
    finally:
        await a.close()
        await b.close()
    return out


def _rss_kb(pid: int) -> int:
    """Resident memory of one process in KB (/proc), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _memory(tmp: Path, proc: subprocess.Popen) -> str:
    store = json.loads((tmp / ".relaynet" / "local.json").read_text()).get("storePid")
    return f"serve {_rss_kb(proc.pid) / 1024:.0f} MB, DynamoDB Local {_rss_kb(int(store or 0)) / 1024:.0f} MB"


def _soak_spec(tmp: Path, pairs: int) -> Path:
    spec = tmp / "soak.yaml"
    lines = ["network: soak", "agents:"]
    for i in range(pairs):
        lines += [f"  - {{name: ask{i}, description: asks, instances: 1}}",
                  f"  - {{name: ans{i}, description: answers, instances: 1}}"]
    spec.write_text("\n".join(lines) + "\n")
    return spec


async def _pair(url: str, tokens: dict, i: int, until: float, out: dict[str, Any]) -> None:
    """One asker and one answerer consulting until ``until`` (monotonic seconds); the answerer
    re-attaches on a new connection every tenth consult. Records latencies, errors, and every
    text each side saw (to count duplicates and losses)."""
    from ag2 import Agent
    from ag2.network import AuthBlock, HubClient, Passport, WsLink
    from ag2.network.envelope import EV_CHANNEL_CLOSED, EV_TEXT
    from ag2.testing import TestConfig

    def passport(name: str) -> Passport:
        token = tokens["networks"]["soak"]["instances"][name][0]["token"]
        return Passport(name=name, auth=AuthBlock(scheme="api_key", claim={"token": token}))

    def answerer() -> Agent:
        return Agent(f"ans{i}", "You answer.", config=TestConfig(*[f"answer from ans{i}"] * 1000))

    ws = url.replace("http://", "ws://") + "/v1/ag2"
    a, b = HubClient(WsLink(ws)), HubClient(WsLink(ws))
    n = 0
    try:
        alice = await a.register_human(passport(f"ask{i}"))
        await b.register(answerer(), passport(f"ans{i}"))
        while time.monotonic() < until:
            n += 1
            t0 = time.perf_counter()
            try:
                channel = await alice.open(type="consulting", target=f"ans{i}")
                await alice.send(channel.channel_id, f"question {n} of ask{i}")
                def seen(e, kind: str) -> bool:  # every envelope the asker is handed, counted
                    out["envelopes"].append((e.channel_id, e.envelope_id))
                    return e.event_type == kind

                await alice.wait_for_channel_event(channel_id=channel.channel_id,
                                                   predicate=lambda e: seen(e, EV_TEXT), timeout=30)
                await alice.wait_for_channel_event(channel_id=channel.channel_id,
                                                   predicate=lambda e: seen(e, EV_CHANNEL_CLOSED), timeout=30)
                out["ms"].append((time.perf_counter() - t0) * 1000)
                out["last"][i] = channel.channel_id
            except Exception as exc:  # counted, and the loop goes on: a soak reports, it does not stop
                out["errors"].append(f"ask{i} consult {n}: {type(exc).__name__}: {exc}"[:200])
            if n % 10 == 0:  # the answerer drops its connection and comes back with replay
                await b.close()
                b = HubClient(WsLink(ws))
                await b.attach(answerer(), f"ans{i}", passport=passport(f"ans{i}"))
                out["reattaches"] += 1
    finally:
        await a.close()
        await b.close()


async def _soak(url: str, tokens: dict, pairs: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"ms": [], "errors": [], "envelopes": [], "last": {}, "reattaches": 0}
    until = time.monotonic() + seconds
    await asyncio.gather(*(_pair(url, tokens, i, until, out) for i in range(pairs)))
    return out


async def _after_restart(url: str, tokens: dict, last: dict[int, str]) -> list[str]:
    """Every pair's last channel read back whole after the restart, and one more consult: problems."""
    from ag2.network import AuthBlock, HubClient, Passport, WsLink
    from ag2.network.envelope import EV_TEXT

    problems = []
    ws = url.replace("http://", "ws://") + "/v1/ag2"
    for i, channel_id in sorted(last.items()):
        token = tokens["networks"]["soak"]["instances"][f"ask{i}"][0]["token"]
        client = HubClient(WsLink(ws))
        try:
            me = await client.register_human(Passport(name=f"ask{i}", auth=AuthBlock(scheme="api_key",
                                                                                      claim={"token": token})))
            wal = await client.read_wal(channel_id)
            texts = [e.event_data.get("text") for e in wal if e.event_type == EV_TEXT]
            if len(texts) != 2 or not texts[0].startswith("question"):
                problems.append(f"ask{i}: its last channel reads back {texts!r} after the restart")
            if i == 0:  # and the hub still serves: one more consult crosses
                from ag2 import Agent
                from ag2.testing import TestConfig

                answerer = HubClient(WsLink(ws))
                try:
                    ans_token = tokens["networks"]["soak"]["instances"]["ans0"][0]["token"]
                    await answerer.attach(Agent("ans0", "You answer.", config=TestConfig("after the restart")),
                                          "ans0", passport=Passport(name="ans0", auth=AuthBlock(
                                              scheme="api_key", claim={"token": ans_token})))
                    channel = await me.open(type="consulting", target="ans0")
                    await me.send(channel.channel_id, "still there?")
                    reply = await me.wait_for_channel_event(channel_id=channel.channel_id,
                                                            predicate=lambda e: e.event_type == EV_TEXT, timeout=30)
                    if reply.event_data.get("text") != "after the restart":
                        problems.append(f"after the restart the consult got {reply.event_data!r}")
                finally:
                    await answerer.close()
        finally:
            await client.close()
    return problems


def soak(pairs: int, seconds: float) -> int:
    """``--soak``: see the module docstring. Returns 0 when nothing was lost, duplicated or failed."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        spec = _soak_spec(tmp, pairs)
        proc, url, tokens = _start(tmp, spec)
        port = int(url.rsplit(":", 1)[1])
        try:
            print(f"AG2 soak: {pairs} pairs for {seconds:.0f} s on {url}; at start: {_memory(tmp, proc)}", flush=True)
            t0 = time.monotonic()
            out = asyncio.run(asyncio.wait_for(_soak(url, tokens, pairs, seconds), seconds + 300))
            wall = time.monotonic() - t0
            print(f"  at the end: {_memory(tmp, proc)}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        ms = sorted(out["ms"])
        dupes = len(out["envelopes"]) - len(set(out["envelopes"]))
        print(f"  consults {len(ms)} in {wall:.0f} s ({len(ms) / wall:.1f}/s), re-attaches {out['reattaches']}, "
              f"errors {len(out['errors'])}, envelopes handed to the askers {len(out['envelopes'])}, "
              f"of them duplicates {dupes}")
        if ms:
            q = statistics.quantiles(ms, n=100) if len(ms) > 1 else [ms[0]] * 99
            print(f"  consult ms: p50 {q[49]:.0f}, p90 {q[89]:.0f}, p99 {q[98]:.0f}, max {ms[-1]:.0f}")
        for err in out["errors"][:10]:
            print(f"  error: {err}")
        proc, url, tokens = _start(tmp, spec, port)  # the same data directory: a restart
        try:
            problems = asyncio.run(asyncio.wait_for(_after_restart(url, tokens, out["last"]), 300))
            print(f"  after a restart: {len(out['last'])} last channels read back, problems {len(problems)}; "
                  f"{_memory(tmp, proc)}")
            for problem in problems[:10]:
                print(f"  problem: {problem}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return 1 if out["errors"] or dupes or problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--consults", type=int, default=10, help="how many consults (1 to 100)")
    ap.add_argument("--rounds", type=int, default=0, help="instead of consults: this many conversation "
                                                         "round trips (1 to 1000) on one channel")
    ap.add_argument("--soak", type=float, default=0, help="run pairs of agents at once for this many seconds "
                                                           "(at most 600), then restart the hub")
    ap.add_argument("--pairs", type=int, default=4, help="--soak: pairs of AG2 agents (1 to 16)")
    args = ap.parse_args(argv)
    if args.soak:
        return soak(max(1, min(args.pairs, 16)), max(5.0, min(args.soak, 600.0)))
    rounds = max(1, min(args.rounds, 1000)) if args.rounds else 0
    n = rounds or max(1, min(args.consults, 100))
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        try:
            if rounds:
                from bench_local_store import _cpu_ms, _worker_pids

                store_pid = int(json.loads((Path(tmp) / ".relaynet" / "local.json").read_text()).get("storePid") or 0)
                hub_pids = [proc.pid, *_worker_pids(proc.pid)]

                def cpu() -> tuple[float, float]:
                    return sum(_cpu_ms(pid) for pid in hub_pids), _cpu_ms(store_pid)

                phases = asyncio.run(asyncio.wait_for(_rounds(url, tokens, n, cpu), 600))
            else:
                phases = asyncio.run(asyncio.wait_for(_consults(url, tokens, n), 600))
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    push = "on" if os.environ.get("RELAYNET_PUSH_AT_WRITE", "true").lower() not in ("0", "false", "no") else "off"
    print(f"AG2 wire on the local stack, {n} {'rounds' if rounds else 'consults'} (ms; push at the write {push}): "
          f"phase | p50 | p90 | p99 | max")
    per_round = phases.pop("cpu_per_round", None)
    for name, values in phases.items():
        q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
        print(f"  {name:17s} | {q[49]:7.1f} | {q[89]:7.1f} | {q[98]:7.1f} | {max(values):7.1f}")
    if per_round:
        print(f"  CPU per round: hub {per_round[0]:.1f} ms, DynamoDB Local {per_round[1]:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
