"""`relaynet worker` as a user runs it (issue 27 part 2; relaynet.worker): ``relaynet serve`` on
loopback (DynamoDB Local, the demo network), a supervisor for coder 0 whose COMMAND is the
scripted agent of tests/e2e/agents (it reads its inbox, accepts, claims, publishes, completes),
then N delegations to coder 0, one at a time. Figures: from ``network_delegate``'s answer to the
task being ``accepted`` and to it being ``completed`` (ms, polled every 10 ms), and the
supervisor's CPU time (``/proc/<pid>/stat``, user + system) over ``--idle`` seconds with nothing
to do.

Run: ``.venv/bin/python benchmarks/bench_worker.py [--tasks 10] [--idle 60]`` (loopback only).
A figure, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ag2_wire import ROOT, _start  # noqa: E402 - the one way the benchmarks start a hub

AGENT = ROOT / "tests" / "e2e" / "agents" / "scripted_agent.py"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=10, help="delegations (1 to 100)")
    ap.add_argument("--idle", type=float, default=60.0, help="idle seconds measured (1 to 600)")
    args = ap.parse_args(argv)
    n, idle = max(1, min(args.tasks, 100)), max(1.0, min(args.idle, 600.0))
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        demo = tokens["networks"]["demo"]["instances"]
        coder, planner = demo["coder"][0], demo["planner"][0]["token"]
        supervisor = subprocess.Popen(
            [str(Path(sys.executable).with_name("relaynet")), "worker", "--url", url, "--token", coder["token"],
             "--log-dir", str(Path(tmp) / "runs"), "--", sys.executable, str(AGENT)],
            stdout=subprocess.DEVNULL, stderr=open(os.environ.get("BENCH_WORKER_LOG", os.devnull), "ab"))
        accepted, completed = [], []
        try:
            with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {planner}"}) as http:
                time.sleep(2.0)  # the supervisor's start (its whoami, its stream)
                for i in range(n):
                    r = http.post("/v1/tools/network_delegate", json={"objective": f"task {i}",
                                                                       "toInstance": coder["instanceId"]})
                    r.raise_for_status()
                    answered, task_id, seen = time.monotonic(), r.json()["taskId"], None
                    while True:
                        got = http.post("/v1/tools/network_task_get", json={"taskId": task_id})
                        if got.status_code == 429:  # the hub's rate limit on this token: ask again later
                            time.sleep(float(got.headers.get("retry-after", "0.1")))
                            continue
                        got.raise_for_status()
                        state = got.json()["task"]["state"]
                        now = time.monotonic()
                        if state in ("accepted", "working", "completed") and seen is None:
                            seen = now
                            accepted.append((now - answered) * 1000)
                        if state == "completed":
                            completed.append((now - answered) * 1000)
                            break
                        if now - answered > 60:
                            raise SystemExit(f"task {task_id} still {state} after 60 s")
                        time.sleep(0.01)
            time.sleep(1.0)  # the last run reaped
            before = _cpu_seconds(supervisor.pid)
            time.sleep(idle)
            cpu = _cpu_seconds(supervisor.pid) - before
        finally:
            supervisor.terminate()
            supervisor.wait(timeout=60)
            proc.terminate()
            proc.wait(timeout=30)

    def row(ms: list[float]) -> str:
        q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
        return f"p50 {q[49]:.0f} | p90 {q[89]:.0f} | max {max(ms):.0f}"

    print(f"relaynet worker, {n} delegations to a supervised instance (ms after network_delegate's answer):")
    print(f"  accepted:  {row(accepted)}")
    print(f"  completed: {row(completed)}")
    print(f"  idle supervisor: {cpu:.2f} s CPU over {idle:.0f} s ({100 * cpu / idle:.2f}% of one core)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
