"""``GET /v1/events`` under load, then across a restart (issue 26 part 3; docs/protocol.md 10.6):
``relaynet serve`` on loopback (DynamoDB Local, the demo network), every demo instance listening
through the SDK's iterator and draining its inbox every 2 s, and ``--senders`` threads sending
asks to random instances for ``--seconds``, each pausing 20-100 ms. Figures: asks sent, events
lost (an ask whose event never came), the time from each ask's answer to its event (ms; 0 when
the event came first), the hub's resident memory before and after. Then the hub is stopped and
started again on the same port and data directory: how long the iterators took to hear again,
and whether every ask sent after the restart came.

Run: ``.venv/bin/python benchmarks/bench_events.py [--seconds 120] [--senders 4]`` (loopback only).
A figure, not a test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ag2_wire import _start  # noqa: E402 - the one way the benchmarks start a hub

from relaynet.client import RelaynetClient  # noqa: E402


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _Instance:
    """One demo instance: its iterator (id -> arrival time) and an inbox drain."""

    def __init__(self, url: str, token: str, instance_id: str, stop: threading.Event):
        self.token, self.instance_id, self.stop = token, instance_id, stop
        self.heard: dict[str, float] = {}
        self.lock = threading.Lock()
        self.client = RelaynetClient(url, token)
        threading.Thread(target=self._listen, daemon=True).start()
        threading.Thread(target=self._drain, args=(url,), daemon=True).start()

    def _listen(self) -> None:
        for event in self.client.events(last_event_id="", stop=self.stop):
            with self.lock:
                self.heard.setdefault(event["id"], time.monotonic())

    def _drain(self, url: str) -> None:
        with RelaynetClient(url, self.token) as hub:
            while not self.stop.wait(2.0):
                try:
                    hub.inbox()
                except Exception:  # noqa: BLE001 - the hub is restarting
                    pass

    def when(self, message_id: str) -> float | None:
        with self.lock:
            return self.heard.get(message_id)


def _send(url: str, token: str, targets: list[_Instance], until: float, sent: list, lock: threading.Lock) -> None:
    with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {token}"}) as http:
        while time.monotonic() < until:
            target = random.choice(targets)
            r = http.post("/v1/tools/network_ask", json={"toInstance": target.instance_id, "body": "load"})
            if r.status_code == 200:
                with lock:
                    sent.append((time.monotonic(), r.json()["messageId"], target))
            time.sleep(random.uniform(0.02, 0.1))


def _settle(sent: list, deadline_s: float = 10.0) -> tuple[list[float], int]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and any(t.when(m) is None for _, m, t in sent):
        time.sleep(0.05)
    late = [max(0.0, (t.when(m) - at) * 1000) for at, m, t in sent if t.when(m) is not None]
    return late, sum(1 for _, m, t in sent if t.when(m) is None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="load duration (5 to 900)")
    ap.add_argument("--senders", type=int, default=4, help="sending threads (1 to 16)")
    args = ap.parse_args(argv)
    seconds, senders = max(5.0, min(args.seconds, 900.0)), max(1, min(args.senders, 16))
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        port = int(url.rsplit(":", 1)[1])
        demo = tokens["networks"]["demo"]["instances"]
        insts = [_Instance(url, i["token"], i["instanceId"], stop) for group in demo.values() for i in group]
        sender = demo["planner"][0]["token"]
        planner_id = demo["planner"][0]["instanceId"]
        time.sleep(2.0)  # the iterators connect
        rss_before = _rss_mb(proc.pid)
        sent: list = []
        lock = threading.Lock()
        until = time.monotonic() + seconds
        targets = [i for i in insts if i.instance_id != planner_id]  # the sender is never told of its own sends
        threads = [threading.Thread(target=_send, args=(url, sender, targets, until, sent, lock)) for _ in range(senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        late, lost = _settle(sent)
        rss_after = _rss_mb(proc.pid)
        q = statistics.quantiles(late, n=100, method="inclusive")
        print(f"{len(insts)} listening instances, {senders} senders, {seconds:.0f} s: {len(sent)} asks, {lost} events lost")
        print(f"  event after the ask's answer (ms): p50 {q[49]:.1f} | p90 {q[89]:.1f} | p99 {q[98]:.1f} | "
              f"max {max(late):.1f}")
        print(f"  hub RSS {rss_before:.0f} MB -> {rss_after:.0f} MB")
        proc.terminate()
        proc.wait(timeout=60)
        stopped = time.monotonic()
        proc, url, _ = _start(Path(tmp), port=port)
        up = time.monotonic()
        after: list = []
        deadline = up + 60
        probe_target = targets[0]
        while time.monotonic() < deadline:  # an ask a second until the first listener hears again
            with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {sender}"}) as http:
                r = http.post("/v1/tools/network_ask", json={"toInstance": probe_target.instance_id, "body": "back?"})
                r.raise_for_status()
                mid = r.json()["messageId"]
            got = None
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end and got is None:
                got = probe_target.when(mid)
                time.sleep(0.02)
            if got is not None:
                break
        heard_again = time.monotonic() - up
        for target in targets:
            with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {sender}"}) as http:
                r = http.post("/v1/tools/network_ask", json={"toInstance": target.instance_id, "body": "after"})
                after.append((time.monotonic(), r.json()["messageId"], target))
        _, lost_after = _settle(after, 45.0)
        print(f"  restart: the hub was down {up - stopped:.1f} s; the first iterator heard again {heard_again:.1f} s "
              f"after it was up; asks after the restart: {len(after)}, events lost {lost_after}")
        stop.set()
        proc.terminate()
        proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
