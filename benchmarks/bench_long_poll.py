"""``GET /v1/inbox/wait`` under load (issue 27 part 3; docs/protocol.md 10.7): ``relaynet serve``
on loopback (DynamoDB Local, the demo network), every demo instance but the sender in a long-poll
loop (``inbox_wait(timeout=20)``, then ``network_inbox`` when it says mail waits), and
``--senders`` threads sending asks to random instances for ``--seconds``, each pausing
``--pause-ms`` (a random 0.5x-1.5x of it) between asks. Figures: asks sent, asks never delivered
(lost), asks delivered twice, the time from each ask's answer to the wait that told of it
answering (ms; 0 when the wait answered first), the waits made and how many ended at the
timeout with nothing, errors, the hub's resident memory and CPU seconds over the run; first
(``--idle``) the hub's CPU while the waits are held with nothing sent.

Run: ``.venv/bin/python benchmarks/bench_long_poll.py [--seconds 120] [--senders 4] [--pause-ms 200] [--idle 30]``
(loopback only). A figure, not a test.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ag2_wire import _start  # noqa: E402 - the one way the benchmarks start a hub
from bench_events import _rss_mb  # noqa: E402

from relaynet.client import ApiError, RelaynetClient  # noqa: E402


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its waited-for children (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class _Poller:
    """One instance's long-poll loop: when each message id was told (the wait's answer) and
    how many times it was delivered."""

    def __init__(self, url: str, token: str, instance_id: str, stop: threading.Event):
        self.instance_id, self.stop = instance_id, stop
        self.told: dict[str, float] = {}
        self.delivered: Counter = Counter()
        self.waits = self.empty = self.errors = 0
        self.lock = threading.Lock()
        self.client = RelaynetClient(url, token)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                summary = self.client.inbox_wait(timeout=20)
                answered = time.monotonic()
                self.waits += 1
                if not summary["undelivered"]:
                    self.empty += 1
                    continue
                for message in self.client.inbox()["messages"]:
                    with self.lock:
                        self.told.setdefault(message["id"], answered)
                        self.delivered[message["id"]] += 1
            except ApiError:
                self.errors += 1
                self.stop.wait(0.5)

    def when(self, message_id: str) -> float | None:
        with self.lock:
            return self.told.get(message_id)


def _send(url: str, token: str, targets: list[_Poller], until: float, pause_s: float, sent: list,
          lock: threading.Lock, errors: list) -> None:
    with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {token}"}) as http:
        while time.monotonic() < until:
            target = random.choice(targets)
            r = http.post("/v1/tools/network_ask", json={"toInstance": target.instance_id, "body": "load"})
            if r.status_code == 200:
                with lock:
                    sent.append((time.monotonic(), r.json()["messageId"], target))
            else:
                errors.append(r.status_code)
            time.sleep(random.uniform(0.5, 1.5) * pause_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="load duration (5 to 900)")
    ap.add_argument("--senders", type=int, default=4, help="sending threads (1 to 16)")
    ap.add_argument("--pause-ms", type=float, default=200.0, help="mean pause between one sender's asks")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of waiting with nothing sent, first (0 to 300)")
    args = ap.parse_args(argv)
    seconds, senders = max(5.0, min(args.seconds, 900.0)), max(1, min(args.senders, 16))
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        demo = tokens["networks"]["demo"]["instances"]
        sender = demo["planner"][0]["token"]
        pollers = [_Poller(url, i["token"], i["instanceId"], stop)
                   for name, group in demo.items() if name != "planner" for i in group]
        idle = max(0.0, min(args.idle, 300.0))
        if idle:
            idle_cpu = _cpu_s(proc.pid)
            time.sleep(idle)  # the pollers wait with nothing to tell
            idle_cpu = _cpu_s(proc.pid) - idle_cpu
            print(f"idle: hub CPU {idle_cpu:.2f} s over {idle:.0f} s with {len(pollers)} waits held "
                  f"({100 * idle_cpu / idle:.1f}% of a core); {sum(p.empty for p in pollers)} waits ended empty")
        rss_before, cpu_before = _rss_mb(proc.pid), _cpu_s(proc.pid)
        sent: list = []
        send_errors: list = []
        lock = threading.Lock()
        started = time.monotonic()
        until = started + seconds
        threads = [threading.Thread(target=_send, args=(url, sender, pollers, until, args.pause_ms / 1000, sent, lock,
                                                        send_errors)) for _ in range(senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + 25  # a wait in flight answers within MaxWaitSeconds
        while time.monotonic() < deadline and any(p.when(m) is None for _, m, p in sent):
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        rss_after, cpu = _rss_mb(proc.pid), _cpu_s(proc.pid) - cpu_before
        stop.set()
        late = [max(0.0, (p.when(m) - at) * 1000) for at, m, p in sent if p.when(m) is not None]
        lost = sum(1 for _, m, p in sent if p.when(m) is None)
        twice = sum(1 for p in pollers for n in p.delivered.values() if n > 1)
        q = statistics.quantiles(late, n=100, method="inclusive") if len(late) > 1 else [0.0] * 99
        waits, empty = sum(p.waits for p in pollers), sum(p.empty for p in pollers)
        print(f"{len(pollers)} long-polling instances, {senders} senders, {seconds:.0f} s: {len(sent)} asks, "
              f"{lost} lost, {twice} delivered twice, {len(send_errors)} send errors, "
              f"{sum(p.errors for p in pollers)} wait errors")
        print(f"  wait answered after the ask's answer (ms): p50 {q[49]:.1f} | p90 {q[89]:.1f} | p99 {q[98]:.1f} | "
              f"max {max(late, default=0.0):.1f}")
        print(f"  {waits} waits, {empty} ended at the timeout with nothing")
        print(f"  hub RSS {rss_before:.0f} MB -> {rss_after:.0f} MB; hub CPU {cpu:.1f} s over {elapsed:.0f} s "
              f"({100 * cpu / elapsed:.0f}% of a core)")
        proc.terminate()
        proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
