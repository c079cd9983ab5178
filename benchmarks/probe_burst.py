"""A burst of first calls: 32 agents' claims sent at the same instant to a hub just started, then
again warm (issue 31: the paced 32-agent run's claim p99 is the start, where every agent's first
call is a claim).

Run: ``.venv/bin/python benchmarks/probe_burst.py [--rounds 3] [--workers 2] [--agents 32]``.
Starts ``relaynet serve`` on DynamoDB Local (benchmarks/bench_local_store.py's Hub: the demo
network with ``--agents`` instances, a temporary directory, loopback only), opens one HTTP
client per instance, and sends, ``--rounds`` times, one ``network_claim`` per instance (each of
its own fresh directory, ``soak/a<i>-<round>/**``) released behind a ``threading.Barrier``;
then one round of ``network_release`` of an unknown id (404s: a cheap call, for comparison);
then ``--serial`` claims one after another. Prints per round: the latencies' min, p50 and max
(ms), the statuses, and the hub's and the store's CPU per call (ms, from /proc). Set
``RELAYNET_DYNAMODB_LOCAL_JAVA_OPTS`` to compare the store's JVM options.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_local_store as bench  # noqa: E402


def _row(label: str, took: list[tuple[float, int]], cpu: tuple[float, float]) -> str:
    ms = sorted(t for t, _ in took)
    statuses = sorted({s for _, s in took})
    return (f"{label:<26} min {ms[0]:7.1f}  p50 {ms[len(ms) // 2]:7.1f}  max {ms[-1]:7.1f} ms  statuses {statuses}"
            f"  CPU per call: hub {cpu[0] / len(ms):5.1f}  store {cpu[1] / len(ms):5.1f} ms")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=32, help="instances, one claim each per round (default 32)")
    p.add_argument("--rounds", type=int, default=3, help="bursts of claims (default 3; the first is cold)")
    p.add_argument("--serial", type=int, default=96, help="claims one after another afterwards (default 96)")
    p.add_argument("--workers", type=int, default=2, help="relaynet serve --workers N (default 2)")
    args = p.parse_args(argv)
    bench.INSTANCES.clear()
    bench.INSTANCES.update(bench._instances(args.agents))
    with tempfile.TemporaryDirectory(prefix="probe-burst-") as tmp:
        hub = bench.Hub("dynamodb-local", Path(tmp), workers=args.workers)
        tokens = [tok for toks in hub.tokens.values() for tok in toks]
        clients = [httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {tok}"}, timeout=60)
                   for tok in tokens]
        print(f"hub up in {hub.start_seconds:.1f} s ({hub.processes} processes); {len(clients)} instances")

        def measure(label: str, tool: str, body: Callable[[int], dict[str, Any]], together: bool) -> None:
            took: list[tuple[float, int]] = [(0.0, 0)] * len(clients)
            gate = threading.Barrier(len(clients)) if together else None

            def one(i: int) -> None:
                if gate is not None:
                    gate.wait()
                started = time.perf_counter()
                status = clients[i].post(f"/v1/tools/{tool}", json=body(i)).status_code
                took[i] = ((time.perf_counter() - started) * 1000, status)

            hub0, store0 = hub.cpu_ms()
            if together:
                threads = [threading.Thread(target=one, args=(i,)) for i in range(len(clients))]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
            else:
                for i in range(len(clients)):
                    one(i)
            hub1, store1 = hub.cpu_ms()
            print(_row(label, took, (hub1 - hub0, store1 - store0)), flush=True)

        try:
            for r in range(args.rounds):
                measure(f"claims at once, round {r}", "network_claim",
                        lambda i, r=r: {"scope": f"soak/a{i}-{r}/**", "ttlSeconds": 60}, True)
            measure("releases (404) at once", "network_release", lambda i: {"claimId": "clm_unknown"}, True)
            for r in range(max(0, args.serial // max(1, len(clients)))):
                measure(f"claims one by one, {r}", "network_claim",
                        lambda i, r=r: {"scope": f"soak/s{i}-{r}/**", "ttlSeconds": 60}, False)
        finally:
            for c in clients:
                c.close()
            hub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
