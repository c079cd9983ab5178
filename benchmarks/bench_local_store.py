"""The local hub under a small team's load, per store: `python benchmarks/bench_local_store.py`.

Starts `relaynet serve` as a subprocess (loopback only) on the demo network with 8 instances
(planner 2, coder 4, reviewer 2), then 8 threads, one per instance, loop over what agents do:
claim a directory, ask another agent, read the inbox (accepting and completing any task
offered), release the claim, and every few rounds delegate a task. A fixed number of calls per store, bounded in
time too. Prints, per window of ``--window`` calls: p50 and p99 latency (ms, at the client),
5xx count, and the RSS of the hub and of its store process (MB). At the end every inbox is
drained and every acknowledged ask is checked to have been delivered exactly once.

``--agents N`` runs N instances instead of 8 (a quarter planners, half coders, a quarter
reviewers), one thread each; 1 or 2 still starts one instance of each agent, so there is somebody
to ask, and only that many threads make calls ("one agent alone"). ``--claims`` picks what each round claims: ``shared`` (default) a
directory of 16 under ``src/`` (they overlap now and then), ``own`` a fresh directory of the
instance's own, ``soak/<instance>-<round>/**`` (issue 25: disjoint subtrees must never contend),
or ``one-dir`` one of 8 files in the same directory, ``soak/shared/f<n>.py`` (every claim
contends with the others on that file). Printed per tool: p50/p99 of ``network_claim`` and
``network_release``; the claim's conflict retries (the hub's own ``TransactionCancelled`` count
for ``network_claim``, read from its metrics, per claim call); and double grants: a claim granted
while another instance's overlapping grant had not begun its release (the client stops counting
a grant before it sends its release, so a report is never a release still in flight).

``--think-ms`` makes each agent pause a random 0..2x that between rounds, as agents do while
their model thinks; ``--pace`` makes it pause 0.25-0.75 s after every call (issue 31's "paced as
agents are"); without either the loop is closed (8 calls always in flight), which measures
how much the hub serves on this machine more than how fast one call is.

``--workers N`` passes ``relaynet serve --workers N`` (hub processes on the one port; default
the hub's own, one per core). Printed at the end: hub + store CPU milliseconds per call over the
load (``/proc``: the hub, its workers and DynamoDB Local, user + system) and the p50/p99 of every
tool. ``--restart`` then stops the hub (SIGINT), starts it again on the same directory and checks
every instance's token still works and no mail comes back a second time.

Targets for the default store (issue "A local hub that holds"): no 5xx; p99 of the last window at
most 1.5x the second (the first is warm-up); hub + store RSS under 1 GB; p50 under 10 ms; every
acknowledged ask delivered exactly once.

    python benchmarks/bench_local_store.py                       # both stores, 8,000 calls each
    python benchmarks/bench_local_store.py --stores dynamodb-local --calls 20000
    python benchmarks/bench_local_store.py --stores dynamodb-local --think-ms 200
    python benchmarks/bench_local_store.py --stores dynamodb-local --agents 32 --claims own --pace --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
RELAYNET = str(Path(sys.executable).with_name("relaynet"))
INSTANCES = {"planner": 2, "coder": 4, "reviewer": 2}
ACTIVE = [8]  # threads that make calls: every instance, or the first N when --agents is 1 or 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int | None) -> float:
    if not pid:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu_ms(pid: int | None) -> float:
    """User + system CPU time of ``pid`` so far (ms; 0 when it is gone)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _worker_pids(pid: int) -> list[int]:
    """The hub's worker processes (its children running relaynet_local.workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) != pid:
                continue
            if b"relaynet_local.workers" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _instances(agents: int) -> dict[str, int]:
    """How many instances of each demo agent make ``agents`` (8 gives the default mix)."""
    planners = reviewers = max(1, agents // 4)
    return {"planner": planners, "coder": max(1, agents - planners - reviewers), "reviewer": reviewers}


def _spec(tmp: Path) -> Path:
    doc = yaml.safe_load((ROOT / "examples" / "demo-network.yaml").read_text())
    for agent in doc["agents"]:
        agent["instances"] = INSTANCES[agent["name"]]
    path = tmp / "bench-network.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class Hub:
    """`relaynet serve` in a temporary directory; ``tokens`` by agent, ``pid`` and ``store_pid``."""

    def __init__(self, store: str, tmp: Path, workers: int | None = None, port: int | None = None):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tmp = tmp
        args = [RELAYNET, "serve", "--port", str(self.port), "--spec", str(_spec(tmp)), "--tokens-out",
                str(tmp / "tokens.json"), "--template", str(ROOT / "template.yaml"), "--sweep-interval", "2"]
        if store == "memory":
            args += ["--store", "memory"]
        if workers is not None:
            args += ["--workers", str(workers)]
        env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}
        env["POWERTOOLS_LOG_LEVEL"] = "WARNING"
        env["POWERTOOLS_METRICS_DISABLED"] = "false"  # the hub's own counts (conflict retries), on its stdout
        self.log = open(tmp / "serve.log", "ab")
        self.metrics = open(tmp / "metrics.log", "ab")  # its stdout
        started = time.monotonic()
        self.proc = subprocess.Popen(args, cwd=tmp, env=env, stdout=self.metrics, stderr=self.log)
        while True:
            if self.proc.poll() is not None or time.monotonic() - started > 120:
                raise SystemExit(f"relaynet serve did not start:\n{(tmp / 'serve.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1).status_code == 200 and (tmp / "tokens.json").exists() \
                        and (tmp / ".relaynet" / "local.json").exists():
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.start_seconds = time.monotonic() - started
        doc = json.loads((tmp / "tokens.json").read_text())["networks"]["demo"]["instances"]
        self.tokens = {agent: [i["token"] for i in insts] for agent, insts in doc.items()}
        state = json.loads((tmp / ".relaynet" / "local.json").read_text())
        self.store_pid = state.get("storePid")
        self.processes = int(state.get("workers") or 1)
        deadline = time.monotonic() + 60
        while len(_worker_pids(self.proc.pid)) < self.processes - 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # the workers import every handler before they accept

    def cpu_ms(self) -> tuple[float, float]:
        """CPU time so far (ms) of the hub's processes together, and of its store."""
        return sum(_cpu_ms(pid) for pid in (self.proc.pid, *_worker_pids(self.proc.pid))), _cpu_ms(self.store_pid)

    def rss(self) -> tuple[float, float]:
        """(the hub's processes together, its store) resident memory, MB."""
        return sum(_rss_mb(pid) for pid in (self.proc.pid, *_worker_pids(self.proc.pid))), _rss_mb(self.store_pid)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self.metrics.close()

    def counted(self, function: str, metric: str) -> float:
        """The sum of ``metric`` the hub's ``function`` reported (its EMF lines, on either stream)."""
        total = 0.0
        text = "".join((self.tmp / name).read_text(errors="replace") for name in ("metrics.log", "serve.log"))
        for line in text.splitlines():
            if not line.startswith('{"_aws"'):
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("function") == function and metric in doc:
                value = doc[metric]
                total += sum(value) if isinstance(value, list) else float(value)
        return total


class Recorder:
    """Latencies and statuses in call order, shared by the threads."""

    def __init__(self, budget: int, pace: bool = False):
        self.lock = threading.Lock()
        self.budget = budget
        self.pace = pace
        self.samples: list[tuple[float, int]] = []  # (ms, status)
        self.by_tool: dict[str, list[float]] = {}  # tool -> latencies (ms) of its 200s
        self.held: dict[str, tuple[str, str]] = {}  # scope -> (instance, claim id) granted, release not begun
        self.double_grants: list[str] = []
        self.claim_conflicts = 0
        self.acked: dict[str, list[str]] = {}  # recipient agent -> acknowledged ask ids
        self.delivered: Counter[str] = Counter()
        self.unexpected: list[tuple[str, int, str]] = []  # the first few answers neither 200 nor 409

    def take(self) -> bool:
        with self.lock:
            if self.budget <= 0:
                return False
            self.budget -= 1
            return True

    def call(self, http: httpx.Client, tool: str, args: dict) -> tuple[int, dict]:
        started = time.perf_counter()
        try:
            response = http.post(f"/v1/tools/{tool}", json=args)
            status, body = response.status_code, (response.json() if response.content else {})
        except httpx.HTTPError as exc:  # 599: no answer (the client's own failure, named)
            status, body = 599, {"client": f"{type(exc).__name__}: {exc}", "ms": round((time.perf_counter() - started) * 1000)}
        ms = (time.perf_counter() - started) * 1000
        with self.lock:
            self.samples.append((ms, status))
            if status == 200:
                self.by_tool.setdefault(tool, []).append(ms)
            if status not in (200, 409) and len(self.unexpected) < 5:  # 409: claim conflicts, lost races
                self.unexpected.append((tool, status, json.dumps(body)[:300]))
        if self.pace:
            time.sleep(random.uniform(0.25, 0.75))  # the agent's model reads the answer
        return status, body


def _scope(claims: str, rng: random.Random, me: str, rounds: int) -> str:
    if claims == "own":
        return f"soak/{me}-{rounds}/**"
    if claims == "one-dir":
        return f"soak/shared/f{rng.randrange(8)}.py"
    return f"src/{rng.randrange(16)}/**"


def _agent_loop(rec: Recorder, url: str, agent: str, token: str, n: int, deadline: float,
                think: float, claims: str = "shared") -> None:
    rng = random.Random(f"{agent}{n}")
    others = [a for a in INSTANCES if a != agent]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        rounds = 0
        while time.monotonic() < deadline:
            rounds += 1
            if think:
                time.sleep(rng.uniform(0, 2 * think))  # an agent thinks between rounds
            if not rec.take():
                return
            me = f"{agent}{n}"
            scope = _scope(claims, rng, me, rounds)
            status, claimed = rec.call(http, "network_claim", {"scope": scope, "ttlSeconds": 60})
            if status == 409:
                with rec.lock:
                    rec.claim_conflicts += 1
            if status == 200:  # held while the agent asks and reads its inbox, then released
                with rec.lock:
                    other = rec.held.get(scope)
                    if other is not None and other[0] != me:
                        rec.double_grants.append(f"{scope}: {other} and {(me, claimed['claimId'])}")
                    rec.held[scope] = (me, claimed["claimId"])
            try:
                if not rec.take():
                    return
                to = rng.choice(others)
                status, body = rec.call(http, "network_ask", {"body": f"{agent}{n} round {rounds}", "toAgent": to})
                if status == 200:
                    with rec.lock:
                        rec.acked.setdefault(to, []).append(body["messageId"])
                if not rec.take():
                    return
                status, body = rec.call(http, "network_inbox", {})
                for message in body.get("messages", []) if status == 200 else []:
                    with rec.lock:
                        rec.delivered[message["id"]] += 1
                    if message["kind"] == "task_offer" and rec.take():
                        status, _ = rec.call(http, "network_task_update", {"taskId": message["taskId"], "status": "accepted"})
                        if status == 200 and rec.take():
                            rec.call(http, "network_task_update", {"taskId": message["taskId"], "status": "working"})
                            if rec.take():
                                rec.call(http, "network_task_update", {"taskId": message["taskId"],
                                                                       "status": "completed", "reason": "done"})
            finally:
                if "claimId" in claimed:
                    with rec.lock:  # no longer counted once its release may have begun
                        if rec.held.get(scope, (None,))[0] == me:
                            del rec.held[scope]
                    if rec.take():
                        rec.call(http, "network_release", {"claimId": claimed["claimId"]})
            if rounds % 5 == 0 and rec.take():
                rec.call(http, "network_delegate", {"objective": f"task from {agent}{n} round {rounds}",
                                                    "toAgent": rng.choice(others)})


def _drain(rec: Recorder, url: str, tokens: dict[str, list[str]]) -> None:
    for agent, toks in tokens.items():
        for token in toks:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
                while True:
                    body = http.post("/v1/tools/network_inbox", json={}).json()
                    for message in body.get("messages", []):
                        rec.delivered[message["id"]] += 1
                    if not body.get("messages"):
                        break


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _restart(hub: "Hub", store: str, workers: int | None, rec: "Recorder") -> dict:
    """Start the hub again on its directory and port: every token works and nothing comes back."""
    started = time.monotonic()
    again = Hub(store, hub.tmp, workers, port=hub.port)
    try:
        took = time.monotonic() - started
        broken, redelivered = 0, 0
        for toks in again.tokens.values():
            for token in toks:
                with httpx.Client(base_url=again.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
                    broken += http.post("/v1/tools/network_whoami", json={}).status_code != 200
                    body = http.post("/v1/tools/network_inbox", json={}).json()
                    redelivered += sum(1 for m in body.get("messages", []) if rec.delivered[m["id"]])
    finally:
        again.stop()
    print(f"   restart: healthy again in {took:.1f} s; tokens refused {broken}; mail delivered again {redelivered}",
          flush=True)
    return {"restartSeconds": round(took, 1), "tokensRefusedAfterRestart": broken, "redeliveredAfterRestart": redelivered}


def run(store: str, calls: int, window: int, max_seconds: float, think: float = 0.0, claims: str = "shared",
        pace: bool = False, workers: int | None = None, restart: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-{store}-") as tmp:
        hub = Hub(store, Path(tmp), workers)
        print(f"\n== store {store}: hub up in {hub.start_seconds:.1f} s (pid {hub.proc.pid}, store pid "
              f"{hub.store_pid}, {hub.processes} hub processes); {calls} calls by {min(ACTIVE[0], sum(INSTANCES.values()))} of "
              f"{sum(INSTANCES.values())} agents, "
              f"{'paced: 0.25-0.75 s after every call' if pace else 'no think time (closed loop)' if not think else f'thinking {think * 1000:.0f} ms a round on average'}",
              flush=True)
        rec = Recorder(calls, pace)
        cpu_before = hub.cpu_ms()
        deadline = time.monotonic() + max_seconds
        threads = [threading.Thread(target=_agent_loop, args=(rec, hub.url, agent, token, n, deadline, think, claims))
                   for agent, toks in hub.tokens.items() for n, token in enumerate(toks)][:ACTIVE[0]]
        started = time.monotonic()
        for t in threads:
            t.start()
        windows, peak = [], (0.0, 0.0)
        print(f"{'calls':>7} {'p50 ms':>8} {'p99 ms':>8} {'5xx':>5} {'hub MB':>7} {'store MB':>9} {'calls/s':>8}")
        printed, last_t = 0, started
        while any(t.is_alive() for t in threads) or printed + window <= len(rec.samples):
            time.sleep(0.2)
            rss = hub.rss()
            peak = (max(peak[0], rss[0]), max(peak[1], rss[1]))
            while printed + window <= len(rec.samples):
                chunk = rec.samples[printed:printed + window]
                now = time.monotonic()
                rss = hub.rss()
                peak = (max(peak[0], rss[0]), max(peak[1], rss[1]))
                row = {"calls": printed + window, "p50": _pct([c[0] for c in chunk], 0.50),
                       "p99": _pct([c[0] for c in chunk], 0.99), "5xx": sum(1 for c in chunk if c[1] >= 500),
                       "hubMB": rss[0], "storeMB": rss[1], "rate": window / max(now - last_t, 1e-9)}
                windows.append(row)
                print(f"{row['calls']:>7} {row['p50']:>8.1f} {row['p99']:>8.1f} {row['5xx']:>5} {rss[0]:>7.0f} "
                      f"{rss[1]:>9.0f} {row['rate']:>8.0f}", flush=True)
                printed += window
                last_t = now
        elapsed = time.monotonic() - started
        for t in threads:
            t.join()
        cpu_after = hub.cpu_ms()
        hub_cpu, store_cpu = ((after - before) / max(len(rec.samples), 1) for after, before in zip(cpu_after, cpu_before))
        cpu_per_call = hub_cpu + store_cpu
        _drain(rec, hub.url, hub.tokens)
        if rec.unexpected:  # what the hub logged about them, kept past the temporary directory
            kept = Path(tempfile.gettempdir()) / f"bench-local-store-{os.getpid()}-serve.log"
            kept.write_text((hub.tmp / "serve.log").read_text(errors="replace"))
            print(f"   unexpected answers: the hub's log is kept at {kept}")
        acked = [m for ids in rec.acked.values() for m in ids]
        missing = sum(1 for m in acked if rec.delivered[m] == 0)
        duplicated = sum(1 for m in acked if rec.delivered[m] > 1)
        hub.stop()
        claim_calls = len(rec.by_tool.get("network_claim", [])) + rec.claim_conflicts
        retries = hub.counted("network_claim", "TransactionCancelled")
        all_ms = [s[0] for s in rec.samples]
        result = {"store": store, "thinkMs": think * 1000, "calls": len(rec.samples), "seconds": round(elapsed, 1),
                  "timedOut": len(rec.samples) < calls, "p50": _pct(all_ms, 0.5), "p99": _pct(all_ms, 0.99),
                  "5xx": sum(1 for s in rec.samples if s[1] >= 500), "statuses": dict(Counter(s[1] for s in rec.samples)),
                  "peakHubMB": peak[0], "peakStoreMB": peak[1], "acked": len(acked), "missing": missing,
                  "duplicated": duplicated, "windows": windows, "claims": claims,
                  "claimP50": _pct(rec.by_tool.get("network_claim", []), 0.5),
                  "claimP99": _pct(rec.by_tool.get("network_claim", []), 0.99),
                  "releaseP50": _pct(rec.by_tool.get("network_release", []), 0.5),
                  "releaseP99": _pct(rec.by_tool.get("network_release", []), 0.99),
                  "claimRetriesPerClaim": retries / claim_calls if claim_calls else 0.0,
                  "doubleGrants": len(rec.double_grants), "processes": hub.processes, "paced": pace,
                  "cpuMsPerCall": cpu_per_call, "hubCpuMsPerCall": hub_cpu, "storeCpuMsPerCall": store_cpu, "callsPerSecond": len(rec.samples) / elapsed,
                  "tools": {tool: {"calls": len(ms), "p50": _pct(ms, 0.5), "p99": _pct(ms, 0.99)}
                            for tool, ms in sorted(rec.by_tool.items())}}
        second = windows[1]["p99"] if len(windows) > 2 else None
        ratio = windows[-1]["p99"] / second if second else None
        result["p99LastOverSecond"] = ratio
        print(f"-- {store}: {result['calls']} calls in {elapsed:.1f} s ({result['calls'] / elapsed:.0f}/s)"
              f"{' (stopped at the time limit)' if result['timedOut'] else ''}; p50 {result['p50']:.1f} ms, "
              f"p99 {result['p99']:.1f} ms; statuses {result['statuses']}; 5xx {result['5xx']}; peak RSS hub "
              f"{peak[0]:.0f} MB + store {peak[1]:.0f} MB; p99 last/second window "
              f"{'%.2f' % ratio if ratio else 'n/a'}; asks acknowledged {len(acked)}, missing {missing}, "
              f"delivered twice {duplicated}", flush=True)
        print(f"   claims {claims}: network_claim p50 {result['claimP50']:.1f} p99 {result['claimP99']:.1f} ms; "
              f"network_release p50 {result['releaseP50']:.1f} p99 {result['releaseP99']:.1f} ms; claim p99 / "
              f"release p99 {result['claimP99'] / max(result['releaseP99'], 1e-9):.2f}; conflict retries per claim "
              f"{result['claimRetriesPerClaim']:.3f} ({retries:.0f} over {claim_calls} claim calls); double grants "
              f"{len(rec.double_grants)}", flush=True)
        print(f"   {hub.processes} hub processes; hub + store CPU {cpu_per_call:.1f} ms per call (hub {hub_cpu:.1f}, "
              f"store {store_cpu:.1f}); "
              f"{result['callsPerSecond']:.0f} calls/s", flush=True)
        for tool, t in result["tools"].items():
            print(f"   {tool:<22} {t['calls']:>6} calls  p50 {t['p50']:>7.1f} ms  p99 {t['p99']:>7.1f} ms")
        if restart:
            result.update(_restart(hub, store, workers, rec))
        for text in rec.double_grants[:5]:
            print(f"   double grant: {text}")
        for tool, status, text in rec.unexpected:
            print(f"   unexpected: {tool} -> {status} {text}")
        return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stores", default="dynamodb-local,memory", help="comma-separated: dynamodb-local, memory")
    p.add_argument("--calls", type=int, default=8000, help="calls per store (default 8000)")
    p.add_argument("--window", type=int, default=1000, help="calls per printed window (default 1000)")
    p.add_argument("--max-seconds", type=float, default=300, help="time limit per store (default 300)")
    p.add_argument("--think-ms", type=float, default=0, help="mean pause per agent round (default 0: closed loop)")
    p.add_argument("--agents", type=int, default=8, help="instances, one thread each (default 8)")
    p.add_argument("--claims", choices=("shared", "own", "one-dir"), default="shared",
                   help="what each round claims (default shared: one of 16 directories under src/)")
    p.add_argument("--pace", action="store_true", help="each agent pauses 0.25-0.75 s after every call")
    p.add_argument("--workers", type=int, help="relaynet serve --workers N (default: the hub's, one per core)")
    p.add_argument("--restart", action="store_true", help="afterwards restart the hub and check nothing changed")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    INSTANCES.update(_instances(args.agents))
    ACTIVE[0] = args.agents  # fewer than 3: the others are there to be asked, and make no calls
    results = [run(store, args.calls, args.window, args.max_seconds, args.think_ms / 1000, args.claims, args.pace,
                   args.workers, args.restart)
               for store in args.stores.split(",")]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    print("\nstore          think ms  calls  seconds  p50 ms  p99 ms  5xx  peak hub+store MB  missing  twice"
          "  claim p99  release p99  retries/claim  double grants")
    for r in results:
        print(f"{r['store']:<15} {r['thinkMs']:>7.0f} {r['calls']:>6} {r['seconds']:>8} {r['p50']:>7.1f} {r['p99']:>7.1f} {r['5xx']:>4} "
              f"{r['peakHubMB'] + r['peakStoreMB']:>18.0f} {r['missing']:>8} {r['duplicated']:>6} {r['claimP99']:>10.1f}"
              f" {r['releaseP99']:>12.1f} {r['claimRetriesPerClaim']:>14.3f} {r['doubleGrants']:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
