"""How soon a webhook's first POST leaves after the write that caused it (issue 26, docs/architecture.md
"Push at the write"): ``relaynet serve`` on loopback (DynamoDB Local, the demo network), a
receiver on 127.0.0.1 set as coder 0's push endpoint, then N asks to that instance, one at a
time: the figure is the time from the ask's answer (the client has its 200) to the receiver
having the POST, in ms; an ask whose POST came before its answer counts 0 (never negative, so
the percentiles say how late, not how early). Runs the hub twice, with push at the write on (as
shipped) and off (``RELAYNET_PUSH_AT_WRITE=false``: only the table's stream, polled every 0.1 s
locally), and prints both, with how many POSTs each delivery id got (1 each is right). With push
at the write on, coder 0 also listens on ``GET /v1/events`` (the SDK's iterator,
docs/protocol.md 10.6): the same figure for the event's arrival, and how many times each id came.

Run: ``.venv/bin/python benchmarks/bench_push.py [--asks 50]`` (loopback only, about a minute
with the stores' starts). A figure, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ag2_wire import _start  # noqa: E402 - the one way the benchmarks start a hub

SECRET = "bench-push-signing-secret-1234567"


class _Arrivals:
    """(monotonic time, messageId, deliveryId or None) of everything that came, and a wait for one."""

    what = "arrival"

    def __init__(self):
        self.got: list[tuple[float, str, str | None]] = []
        self.arrived = threading.Condition()

    def add(self, at: float, message_id: str, delivery_id: str | None = None) -> None:
        with self.arrived:
            self.got.append((at, message_id, delivery_id))
            self.arrived.notify_all()

    def wait_for(self, message_id: str, timeout: float = 10.0) -> float:
        """When ``message_id`` came; SystemExit after ``timeout`` seconds without it."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while True:
                for at, mid, _ in self.got:
                    if mid == message_id:
                        return at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"no {self.what} for {message_id} within {timeout} s")
                self.arrived.wait(left)


class _Receiver(_Arrivals):
    """A webhook receiver: records (monotonic time, messageId, deliveryId) of every POST."""

    what = "webhook"

    def __init__(self):
        super().__init__()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                at = time.monotonic()
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                outer.add(at, body.get("messageId"), body.get("deliveryId"))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class _Listener(_Arrivals):
    """coder 0's event stream through the SDK: (monotonic time, id) of every event yielded."""

    what = "event"

    def __init__(self, url: str, token: str):
        from relaynet.client import RelaynetClient

        super().__init__()
        self.stop = threading.Event()
        self.client = RelaynetClient(url, token)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for event in self.client.events(last_event_id="", stop=self.stop):
            self.add(time.monotonic(), event["id"])


def run(asks: int, push_at_write: bool) -> tuple[list[float], Counter, list[float], Counter]:
    """One hub, ``asks`` asks: (ms from each answer to its POST, POSTs per delivery id, ms from
    each answer to its event on the stream, events per id; the last two empty with push at the
    write off)."""
    receiver = _Receiver()
    listener = None
    saved = os.environ.get("RELAYNET_PUSH_AT_WRITE")
    os.environ["RELAYNET_PUSH_AT_WRITE"] = "true" if push_at_write else "false"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            proc, url, tokens = _start(Path(tmp))
            try:
                demo = tokens["networks"]["demo"]["instances"]
                coder, planner = demo["coder"][0], demo["planner"][0]["token"]
                with httpx.Client(base_url=url, timeout=10) as http:
                    r = http.put("/v1/push", json={"url": f"{receiver.url}/coder0", "token": SECRET},
                                 headers={"Authorization": f"Bearer {coder['token']}"})
                    r.raise_for_status()
                    if push_at_write:  # the stream is open once a first ask's event came
                        listener = _Listener(url, coder["token"])
                        r = http.post("/v1/tools/network_ask", json={"toInstance": coder["instanceId"],
                                                                      "body": "warm-up"},
                                      headers={"Authorization": f"Bearer {planner}"})
                        listener.wait_for(r.json()["messageId"])
                        receiver.wait_for(r.json()["messageId"])
                    late, heard = [], []
                    for i in range(asks):
                        r = http.post("/v1/tools/network_ask", json={"toInstance": coder["instanceId"],
                                                                      "body": f"ask {i}"},
                                      headers={"Authorization": f"Bearer {planner}"})
                        answered = time.monotonic()
                        r.raise_for_status()
                        late.append(max(0.0, receiver.wait_for(r.json()["messageId"]) - answered) * 1000)
                        if listener is not None:
                            heard.append(max(0.0, listener.wait_for(r.json()["messageId"]) - answered) * 1000)
                    time.sleep(2.0)  # the stream passes over every entry too: its chance to post one twice
            finally:
                if listener is not None:
                    listener.stop.set()
                proc.terminate()
                proc.wait(timeout=30)
    finally:
        receiver.server.shutdown()
        if listener is not None:
            listener.stop.set()
            listener.client.close()
        if saved is None:
            os.environ.pop("RELAYNET_PUSH_AT_WRITE", None)
        else:
            os.environ["RELAYNET_PUSH_AT_WRITE"] = saved
    events = Counter(i for _, i, _ in listener.got) if listener is not None else Counter()
    return late, Counter(d for _, _, d in receiver.got), heard, events


def _row(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
    return f"{q[49]:6.1f} | {q[89]:6.1f} | {q[98]:6.1f} | {max(ms):6.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asks", type=int, default=50, help="asks per hub (1 to 500)")
    args = ap.parse_args(argv)
    n = max(1, min(args.asks, 500))
    print(f"webhook first POST after the ask's answer, {n} asks, local stack (ms): "
          f"push at the write | p50 | p90 | p99 | max | POSTs per delivery id")
    for on in (True, False):
        late, per_delivery, heard, per_id = run(n, on)
        print(f"  {'on ' if on else 'off'} | {_row(late)} | "
              + ", ".join(f"{times}x: {ids}" for times, ids in sorted(Counter(per_delivery.values()).items())))
        if heard:
            print(f"  GET /v1/events, the same asks: | {_row(heard)} | events per id "
                  + ", ".join(f"{times}x: {ids}" for times, ids in sorted(Counter(per_id.values()).items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
