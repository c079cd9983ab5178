"""A2A push notification configs and streaming under load (issue 28; docs/protocol.md 13.5,
13.6): ``relaynet serve`` on loopback (DynamoDB Local) with the demo network, a webhook receiver
in this process, and ``--clients`` threads, each an A2A client and the coder instance its task
goes to. Each round a client sends a task with ``configuration.taskPushNotificationConfig`` (the
receiver), opens a ``SubscribeToTask`` stream (Server-Sent Events) on it, and then, as the
assignee, moves it accepted -> working -> (artifact) -> completed.

Figures: for every transition, the time from the tool call's answer to the receiver getting the
push, and to the stream carrying it, in ms (p50/p90/p99/max); pushes received, duplicates (one
delivery id twice), transitions coalesced into a later push (by state), final COMPLETED not
received within a minute of the load's end; streams that did not end at COMPLETED; errors; the hub's resident
memory before and after; and after a restart, whether a config set before it still pushes.

Run: ``.venv/bin/python benchmarks/bench_a2a_push.py [--seconds 120] [--clients 4]`` (loopback
only). A figure, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_a2a import _quantiles, _stop  # noqa: E402
from bench_ag2_wire import _start  # noqa: E402 - the one way the benchmarks start a hub
from bench_events import _rss_mb  # noqa: E402

TOKEN = "bench-push-token-0123456789"


class Receiver:
    """Every POST: (task id, relaynet state or "artifact", delivery id, monotonic time)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str, str, float]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                at = time.monotonic()
                if "statusUpdate" in body:
                    key = (body["statusUpdate"]["taskId"], body["statusUpdate"]["metadata"]["relaynet"]["state"])
                else:
                    key = (body["artifactUpdate"]["taskId"], "artifact")
                with outer.lock:
                    outer.got.append((*key, self.headers["X-Relaynet-Delivery"], at))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _rpc(url: str, token: str, method: str, params: dict, stream: bool = False):
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    if stream:
        return httpx.stream("POST", f"{url}/a2a/demo/coder", json=body, headers=headers, timeout=60)
    r = httpx.post(f"{url}/a2a/demo/coder", json=body, headers=headers, timeout=30)
    doc = r.json()
    if "result" not in doc:
        raise RuntimeError(f"{method}: {doc.get('error')}")
    return doc["result"]


def _tool(url: str, token: str, name: str, body: dict) -> dict:
    r = httpx.post(f"{url}/v1/tools/{name}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    if r.status_code != 200:
        raise RuntimeError(f"{name}: {r.status_code} {r.text[:200]}")
    return r.json()


def _watch(url: str, token: str, task_id: str, seen: dict, ready: threading.Event) -> None:
    """SubscribeToTask until the stream ends: each statusUpdate's relaynet state -> arrival time."""
    with _rpc(url, token, "SubscribeToTask", {"id": task_id}, stream=True) as r:
        for line in r.iter_lines():
            if line.startswith(": relaynet") or line.startswith("data:"):
                ready.set()
            if not line.startswith("data:"):
                continue
            result = json.loads(line[5:]).get("result") or {}
            if "statusUpdate" in result:
                seen[result["statusUpdate"]["metadata"]["relaynet"]["state"]] = time.monotonic()
            elif "artifactUpdate" in result:
                seen["artifact"] = time.monotonic()
    ready.set()


def _client(url: str, planner: str, coders: dict[str, str], receiver: Receiver, until: float, out: dict) -> None:
    while time.monotonic() < until:
        try:
            task = _rpc(url, planner, "SendMessage", {
                "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "bench push"}]},
                "configuration": {"taskPushNotificationConfig": {"url": receiver.url, "token": TOKEN}}})["task"]
            task_id = task["id"]
            assignee = _tool(url, planner, "network_task_get", {"taskId": task_id})["task"]["assignee"]
            coder = coders[assignee]
            seen: dict[str, float] = {}
            ready = threading.Event()
            watcher = threading.Thread(target=_watch, args=(url, planner, task_id, seen, ready), daemon=True)
            watcher.start()
            ready.wait(10)
            answered: dict[str, float] = {}
            for state in ("accepted", "working", "artifact", "completed"):
                if state == "artifact":
                    _tool(url, coder, "network_publish_artifact", {"uri": f"https://example.com/{task_id}",
                                                                    "taskId": task_id})
                else:
                    _tool(url, coder, "network_task_update", {"taskId": task_id, "status": state,
                                                             **({"reason": "done"} if state == "completed" else {})})
                answered[state] = time.monotonic()
            watcher.join(30)
            out["tasks"].append((task_id, answered, seen, not watcher.is_alive() and "completed" in seen))
        except Exception as exc:  # noqa: BLE001 - counted and shown
            out["errors"].append(f"{type(exc).__name__}: {exc}"[:200])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="load duration (10 to 900)")
    ap.add_argument("--clients", type=int, default=4, help="client threads (1 to 8: the demo's coders take the tasks)")
    args = ap.parse_args(argv)
    seconds, clients = max(10.0, min(args.seconds, 900.0)), max(1, min(args.clients, 8))
    receiver = Receiver()
    out: dict = {"tasks": [], "errors": []}
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, tokens = _start(Path(tmp))
        inst = tokens["networks"]["demo"]["instances"]
        planner = inst["planner"][0]["token"]
        coders = {i["instanceId"]: i["token"] for i in inst["coder"]}
        rss_before = _rss_mb(proc.pid)
        until = time.monotonic() + seconds
        threads = [threading.Thread(target=_client, args=(url, planner, coders, receiver, until, out)) for _ in range(clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        finished = {task_id for task_id, *_ in out["tasks"]}
        settle_by = time.monotonic() + 60  # every task's COMPLETED reaches the receiver: nothing lost
        while time.monotonic() < settle_by:
            with receiver.lock:
                completed = {t for t, state, *_ in receiver.got if state == "completed"}
            if finished <= completed:
                break
            time.sleep(0.2)
        rss_after = _rss_mb(proc.pid)

        # a config set before a restart still pushes after it
        task = _rpc(url, planner, "SendMessage", {
            "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "across a restart"}]},
            "configuration": {"taskPushNotificationConfig": {"url": receiver.url, "token": TOKEN}}})["task"]
        assignee = _tool(url, planner, "network_task_get", {"taskId": task["id"]})["task"]["assignee"]
        _stop(proc)
        proc, url, _ = _start(Path(tmp))
        _tool(url, coders[assignee], "network_task_update", {"taskId": task["id"], "status": "accepted"})
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(t == task["id"] for t, *_ in receiver.got):
            time.sleep(0.1)
        after_restart = any(t == task["id"] for t, *_ in receiver.got)
        _stop(proc)
    receiver.server.shutdown()

    pushes, streamed, missing = [], [], {}
    by_key: dict[tuple[str, str], float] = {}
    deliveries = [d for _, _, d, _ in receiver.got]
    for task_id, state, _, at in receiver.got:
        by_key.setdefault((task_id, state), at)
    unended = 0
    for task_id, answered, seen, ended in out["tasks"]:
        unended += not ended
        for state, at in answered.items():
            if (task_id, state) in by_key:
                pushes.append((by_key[(task_id, state)] - at) * 1000)
            elif state != "artifact":  # an artifact is pushed with the next transition
                missing[state] = missing.get(state, 0) + 1
            if state in seen and state != "artifact":
                streamed.append((seen[state] - at) * 1000)
    print(f"{len(out['tasks'])} tasks in {seconds:.0f} s from {clients} clients, each pushed and streamed "
          "through accepted -> working -> artifact -> completed")
    print(f"push (transition answered -> receiver has it): {_quantiles(pushes)}")
    print(f"stream (transition answered -> SSE event): {_quantiles(streamed)}")
    print("a push carries the task as it is when it is sent, so a transition overtaken by the next one before "
          f"its push left is not posted on its own (coalesced, by state): {missing}")
    print(f"pushes received {len(deliveries)}, duplicates {len(deliveries) - len(set(deliveries))}, "
          f"final COMPLETED not received {missing.get('completed', 0)}; "
          f"streams not ended at COMPLETED {unended}; errors {len(out['errors'])} {out['errors'][:3]}")
    print(f"hub RSS {rss_before:.0f} -> {rss_after:.0f} MB; a config set before a restart pushed after it: {after_restart}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
