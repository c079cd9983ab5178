"""A2A 1.0 under load (issue 28; docs/protocol.md 13): ``relaynet serve`` on loopback (DynamoDB
Local, the demo network) and ``--clients`` threads, each an official ``a2a-sdk`` client (its own
event loop) of one demo agent's token, sending ``SendMessage`` (a new task) then ``GetTask`` of
it in a loop for ``--seconds``; then the hub restarts on the same store and the tasks are counted
again. Figures: calls, latency of each method (ms), tasks created and distinct, errors, the
hub's resident memory before and after, and the tasks the restarted hub holds.

Run: ``.venv/bin/python benchmarks/bench_a2a.py [--seconds 90] [--clients 6]`` (loopback only).
A figure, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ag2_wire import _start  # noqa: E402 - the one way the benchmarks start a hub
from bench_events import _rss_mb  # noqa: E402

AGENTS = ("planner", "coder", "reviewer")


def _client_loop(url: str, token: str, target: str, until: float, out: dict, lock: threading.Lock) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.types import a2a_pb2 as pb

    async def go() -> None:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            client = await create_client(f"{url}/a2a/demo/{target}", ClientConfig(httpx_client=http, streaming=False))
            while time.monotonic() < until:
                try:
                    started = time.perf_counter()
                    msg = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text="bench")])
                    sent = [e async for e in client.send_message(pb.SendMessageRequest(message=msg))][0]
                    middle = time.perf_counter()
                    await client.get_task(pb.GetTaskRequest(id=sent.task.id, history_length=0))
                    ended = time.perf_counter()
                    with lock:
                        out["send"].append((middle - started) * 1000)
                        out["get"].append((ended - middle) * 1000)
                        out["tasks"].append(sent.task.id)
                except Exception as exc:  # noqa: BLE001 - counted and shown
                    with lock:
                        out["errors"].append(repr(exc)[:200])

    asyncio.run(go())


def _count_tasks(url: str, rep_token: str) -> int:
    count, cursor = 0, None
    while True:
        body = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = httpx.post(f"{url}/v1/tools/control_list_tasks", json=body,
                          headers={"Authorization": f"Bearer {rep_token}"}, timeout=30).json()
        count += len(page["tasks"])
        cursor = page.get("nextCursor")
        if not cursor:
            return count


def _stop(proc) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)


def _quantiles(values: list[float]) -> str:
    if not values:
        return "n=0"
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))]
    return f"n={len(v)} p50={q(.5):.0f} p90={q(.9):.0f} p99={q(.99):.0f} max={v[-1]:.0f} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=90.0, help="load duration (5 to 900)")
    ap.add_argument("--clients", type=int, default=6, help="A2A clients, one thread each (1 to 16)")
    args = ap.parse_args(argv)
    seconds, clients = max(5.0, min(args.seconds, 900.0)), max(1, min(args.clients, 16))
    out: dict = {"send": [], "get": [], "tasks": [], "errors": []}
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        demo = tokens["networks"]["demo"]["instances"]
        rss_before = _rss_mb(proc.pid)
        until = time.monotonic() + seconds
        threads = []
        for n in range(clients):  # callers rotate over the agents; each sends to the next agent
            caller = AGENTS[n % 3]
            token = demo[caller][(n // 3) % len(demo[caller])]["token"]
            threads.append(threading.Thread(target=_client_loop, args=(url, token, AGENTS[(n + 1) % 3], until, out, lock)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rss_after = _rss_mb(proc.pid)
        rep = tokens["representatives"]["ops"]  # shown once: the restarted hub keeps it and does not show it again
        before_restart = _count_tasks(url, rep)
        _stop(proc)
        (Path(tmp) / "tokens.json").unlink()  # _start waits for the restarted hub's own tokens file
        proc, url, _ = _start(Path(tmp))
        after_restart = _count_tasks(url, rep)
        _stop(proc)
    print(f"{clients} clients for {seconds:.0f} s")
    print(f"SendMessage (a new task): {_quantiles(out['send'])}")
    print(f"GetTask: {_quantiles(out['get'])}")
    print(f"tasks created {len(out['tasks'])}, distinct {len(set(out['tasks']))}; errors {len(out['errors'])} "
          f"{out['errors'][:3]}")
    print(f"hub RSS {rss_before:.0f} -> {rss_after:.0f} MB")
    print(f"tasks in the store: {before_restart} before the restart, {after_restart} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
