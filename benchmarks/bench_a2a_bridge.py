"""The A2A bridge under load (issue 28 part 3; docs/protocol.md 13.4): ``relaynet serve`` on
loopback (DynamoDB Local, its default ``--sweep-interval`` of 5 s) with the demo network plus a
member ``remote`` that is an A2A agent served in this process by the official SDK's server classes
(``a2a-sdk``: AgentExecutor, DefaultRequestHandler, InMemoryTaskStore, on uvicorn). The remote
works ``--work-ms`` on each task, then publishes a URL artifact and completes.

``--clients`` threads (planner and coder tokens) delegate ``--tasks`` tasks to ``remote`` in all,
back to back; the benchmark watches each with network_task_get until it is completed. Then a
second batch is delegated with the remote working ``--restart-work-ms``, the hub restarts on the
same store while those tasks are in flight, and they are followed to the end on the new hub.

Figures: the time from network_delegate's answer to the remote receiving the task (the dispatch),
and to the Relaynet task being completed with its artifact (end to end), in ms; tasks completed,
failed, lost; errors; the hub's resident memory; and the restart batch's outcome.

Run: ``.venv/bin/python benchmarks/bench_a2a_bridge.py [--tasks 60] [--clients 4] [--push]`` (loopback
only); ``--push``: the remote takes the hub's push configs and notifies it, else the bridge polls.
A figure, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_a2a import _quantiles, _stop  # noqa: E402
from bench_ag2_wire import ROOT, _start  # noqa: E402 - the one way the benchmarks start a hub
from bench_events import _rss_mb  # noqa: E402
from bench_long_poll import _cpu_s  # noqa: E402


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live children (the hub and its DynamoDB Local)."""
    total = _cpu_s(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                total += _cpu_s(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return total


def _remote(work: dict[str, float], received: dict[str, float], push: bool = False):
    """The SDK-served remote on a free loopback port: (card URL, stop()). With ``push`` its card
    says ``pushNotifications`` and the SDK's own config store and sender post the hub's push
    configs (docs/protocol.md 13.4 "Push")."""
    import socket

    import uvicorn
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import (BasePushNotificationSender, InMemoryPushNotificationConfigStore, InMemoryTaskStore,
                                  TaskUpdater)
    from a2a.types import a2a_pb2 as pb
    from starlette.applications import Starlette

    class Worker(AgentExecutor):
        async def execute(self, context, event_queue):
            received.setdefault(context.message.message_id, time.monotonic())
            if context.current_task is None:
                await event_queue.enqueue_event(pb.Task(id=context.task_id, context_id=context.context_id,
                                                        status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED)))
            up = TaskUpdater(event_queue, context.task_id, context.context_id)
            await up.start_work()
            await asyncio.sleep(work["ms"] / 1000)
            await up.add_artifact([pb.Part(url=f"https://example.com/out/{context.task_id}.txt")], name="out")
            await up.complete()

        async def cancel(self, context, event_queue):
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    card = pb.AgentCard(name="bench-remote", description="benchmark", version="1",
                        supported_interfaces=[pb.AgentInterface(url=f"http://127.0.0.1:{port}/rpc",
                                                                protocol_binding="JSONRPC", protocol_version="1.0")],
                        capabilities=pb.AgentCapabilities(push_notifications=push), default_input_modes=["text/plain"],
                        default_output_modes=["text/plain"])
    configs = InMemoryPushNotificationConfigStore()
    pushing = {"push_config_store": configs,
               "push_sender": BasePushNotificationSender(httpx.AsyncClient(), configs)} if push else {}
    app = Starlette(routes=[*create_agent_card_routes(card),
                            *create_jsonrpc_routes(DefaultRequestHandler(Worker(), InMemoryTaskStore(), card, **pushing),
                                                   "/rpc")])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
    return f"http://127.0.0.1:{port}/.well-known/agent-card.json", stop


def _delegate(url: str, token: str, objective: str) -> str:
    r = httpx.post(f"{url}/v1/tools/network_delegate", json={"toAgent": "remote", "objective": objective},
                   headers={"Authorization": f"Bearer {token}"}, timeout=30)
    r.raise_for_status()
    return r.json()["taskId"]


def _follow(url: str, token: str, task_ids: dict[str, float], deadline: float) -> dict[str, tuple[str, float]]:
    """Each task's final state and when it was seen there (monotonic), polling every 0.25 s."""
    done: dict[str, tuple[str, float]] = {}
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        while len(done) < len(task_ids) and time.monotonic() < deadline:
            for task_id in task_ids:
                if task_id in done:
                    continue
                r = http.post(f"{url}/v1/tools/network_task_get", json={"taskId": task_id})
                if r.status_code == 429:
                    continue
                task = r.json()["task"]
                if task["state"] in ("completed", "failed", "cancelled"):
                    n = len(task["artifacts"])
                    state = task["state"] if task["state"] != "completed" or n == 1 else f"completed-with-{n}-artifacts"
                    done[task_id] = (state, time.monotonic())
            time.sleep(0.25)
    return done


def _batch(url: str, tokens: dict, n: int, clients: int, tag: str, errors: list[str]) -> dict[str, float]:
    """Delegate ``n`` tasks from ``clients`` threads: task id -> when network_delegate answered."""
    demo = tokens["networks"]["demo"]["instances"]
    callers = [demo["planner"][0]["token"], *(i["token"] for i in demo["coder"])]
    sent: dict[str, float] = {}
    lock = threading.Lock()

    def run(k: int) -> None:
        for i in range(k, n, clients):
            try:
                task_id = _delegate(url, callers[k % len(callers)], f"{tag} task {i}")
                with lock:
                    sent[task_id] = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - counted and shown
                with lock:
                    errors.append(repr(exc)[:200])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=60, help="tasks of the first batch (1 to 500)")
    ap.add_argument("--clients", type=int, default=4, help="delegating threads (1 to 16)")
    ap.add_argument("--work-ms", type=float, default=500.0, help="the remote's work per task")
    ap.add_argument("--restart-tasks", type=int, default=10, help="tasks in flight across the restart")
    ap.add_argument("--restart-work-ms", type=float, default=8000.0, help="the remote's work per task then")
    ap.add_argument("--push", action="store_true", help="the remote takes push configs (else the bridge only polls)")
    args = ap.parse_args(argv)
    n, clients = max(1, min(args.tasks, 500)), max(1, min(args.clients, 16))
    work, received, errors = {"ms": args.work_ms}, {}, []
    card_url, stop_remote = _remote(work, received, args.push)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text((ROOT / "examples" / "demo-network.yaml").read_text().replace(
            "agents:\n", f"agents:\n  - name: remote\n    a2a: {{url: \"{card_url}\"}}\n", 1))
        proc, url, tokens = _start(Path(tmp), spec)
        planner = tokens["networks"]["demo"]["instances"]["planner"][0]["token"]
        rss_before, cpu_before, wall_before = _rss_mb(proc.pid), _tree_cpu_s(proc.pid), time.monotonic()
        sent = _batch(url, tokens, n, clients, "load", errors)
        done = _follow(url, planner, sent, time.monotonic() + 120 + n)
        rss_after, cpu = _rss_mb(proc.pid), _tree_cpu_s(proc.pid) - cpu_before
        wall = time.monotonic() - wall_before
        dispatch = [(received[t] - at) * 1000 for t, at in sent.items() if t in received]
        end_to_end = [(done[t][1] - at) * 1000 for t, at in sent.items() if t in done and done[t][0] == "completed"]

        work["ms"] = args.restart_work_ms
        in_flight = _batch(url, tokens, max(1, args.restart_tasks), clients, "restart", errors)
        reach_by = time.monotonic() + 30
        while sum(1 for t in in_flight if t in received) < len(in_flight) and time.monotonic() < reach_by:
            time.sleep(0.1)  # every task of the batch has reached the remote: they are in flight
        _stop(proc)
        proc, url, _ = _start(Path(tmp), spec)  # the tokens file stays: the same tokens
        after = _follow(url, planner, in_flight, time.monotonic() + 120)
        _stop(proc)
    stop_remote()
    states = [s for s, _ in done.values()]
    print(f"{n} tasks from {clients} threads to an SDK-served A2A agent working {args.work_ms:.0f} ms each "
          f"(local bridge every 5 s; {'push configs' if args.push else 'polls only'})")
    print(f"dispatch (delegated -> the remote has it): {_quantiles(dispatch)}")
    print(f"end to end (delegated -> completed with its artifact in Relaynet): {_quantiles(end_to_end)}")
    print(f"completed {states.count('completed')}, other {len(states) - states.count('completed')} "
          f"{sorted(set(states) - {'completed'})}, not finished {n - len(done)}; errors {len(errors)} {errors[:3]}")
    print(f"hub RSS {rss_before:.0f} -> {rss_after:.0f} MB; hub and its store used {cpu:.1f} CPU s in {wall:.1f} s "
          f"({cpu / wall:.2f} cores of {os.cpu_count()})")
    finished = [s for s, _ in after.values()]
    print(f"restart with {len(in_flight)} tasks in flight: {finished.count('completed')} completed after it, "
          f"{len(in_flight) - len(after)} not finished, others {sorted(set(finished) - {'completed'})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
