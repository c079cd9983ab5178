"""Several hub processes on one port (`relaynet serve --workers 2`, issue 31): both answer from
the one store, a write in one reaches an event stream held by the other, a revocation made in one
ends the other's cached authorisation at once, an AG2 push reaches a socket the other holds, a
killed worker is restarted without losing an answered write, and a `kill -9` of the primary
takes the workers with it so the same port serves again."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from relaynet.client import RelaynetClient
from relaynet_local.server import PROCESS_HEADER
from tests.e2e.conftest import restart_port, start_hub, stop_hub, tool, until

pytestmark = pytest.mark.e2e


def _client_on(hub, token: str, process: str, tries: int = 200) -> httpx.Client:
    """A keep-alive client whose connection the hub process ``process`` accepted (each new
    connection goes to whichever process accepts it first)."""
    whoami = "control_whoami" if token.startswith("rn_rep_") else "network_whoami"
    for _ in range(tries):
        client = httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        r = client.post(f"/v1/tools/{whoami}", json={})
        assert r.status_code == 200, r.text
        if r.headers.get(PROCESS_HEADER) == process:
            return client
        client.close()
    raise AssertionError(f"no connection reached hub process {process} in {tries} tries")


def _children(pid: int) -> list[int]:
    """The running processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _workers(pid: int) -> list[int]:
    """The hub's worker processes (children running relaynet_local.workers)."""
    out = []
    for child in _children(pid):
        try:
            if b"relaynet_local.workers" in Path(f"/proc/{child}/cmdline").read_bytes():
                out.append(child)
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def hub2(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("workers")
    hub = start_hub(tmp, "--workers", "2")
    until(lambda: _workers(hub.proc.pid), "the worker process started")
    try:
        yield hub
    finally:
        stop_hub(hub)


def test_both_processes_answer_from_the_one_store(hub2):
    planner_on_1 = _client_on(hub2, hub2.token("planner"), "1")
    coder_on_0 = _client_on(hub2, hub2.token("coder"), "0")
    sent = planner_on_1.post("/v1/tools/network_ask", json={"toAgent": "coder", "body": "on worker 1"})
    assert sent.status_code == 200, sent.text
    inbox = coder_on_0.post("/v1/tools/network_inbox", json={}).json()
    assert [m["id"] for m in inbox["messages"] if m["kind"] == "ask"] == [sent.json()["messageId"]]
    health = httpx.get(f"{hub2.url}/v1/health").json()
    assert health["store"] == "dynamodb-local"


def test_an_event_stream_on_one_process_gets_mail_written_by_the_other(hub2):
    reviewer = hub2.token("reviewer")
    for stream_on, write_on in (("0", "1"), ("1", "0")):
        events: list[dict] = []
        opened = threading.Event()
        sent_id: list[str] = []

        def listen() -> None:
            for _ in range(200):
                with httpx.Client(timeout=30) as client, client.stream(
                        "GET", f"{hub2.url}/v1/events", headers={"Authorization": f"Bearer {reviewer}"}) as r:
                    if r.headers.get(PROCESS_HEADER) != stream_on:
                        continue
                    opened.set()
                    for line in r.iter_lines():
                        if line.startswith("data:"):
                            events.append(json.loads(line[5:]))
                            if sent_id and any(e.get("messageId") == sent_id[0] for e in events):
                                return
                    return

        thread = threading.Thread(target=listen, daemon=True)
        thread.start()
        assert opened.wait(30), f"no event stream reached process {stream_on}"
        writer = _client_on(hub2, hub2.token("planner"), write_on)
        sent = writer.post("/v1/tools/network_ask", json={"toAgent": "reviewer", "body": f"via {write_on}"})
        assert sent.status_code == 200 and sent.headers[PROCESS_HEADER] == write_on
        sent_id.append(sent.json()["messageId"])
        until(lambda: any(e.get("messageId") == sent_id[0] for e in events),
              f"the stream on process {stream_on} gets the ask written on process {write_on}", wait=20)
        thread.join(20)
        RelaynetClient(hub2.url, reviewer).inbox()  # read: the next round's stream replays nothing old


def test_a_revocation_in_one_process_ends_the_cached_answers_of_the_other(tmp_path):
    hub = start_hub(tmp_path, "--workers", "2")
    try:
        until(lambda: _workers(hub.proc.pid), "the worker process started")
        victim = hub.token("coder", 1)
        rep = hub.tokens["representatives"]["ops"]
        for cached_on, revoke_on in (("1", "0"),):
            cached = _client_on(hub, victim, cached_on)  # its answer is now in that process's cache
            assert cached.post("/v1/tools/network_whoami", json={}).status_code == 200
            ops = _client_on(hub, rep, revoke_on)
            first = ops.post("/v1/tools/control_stop_agent", json={"instanceId": hub.instance("coder", 1)}).json()
            done = ops.post("/v1/tools/control_stop_agent",
                            json={"instanceId": hub.instance("coder", 1), "confirmationId": first["confirmationId"]})
            assert done.status_code == 200, done.text
            after = cached.post("/v1/tools/network_whoami", json={})  # at once, on the same connection
            assert after.headers.get(PROCESS_HEADER) == cached_on
            assert after.status_code == 401, after.text
            assert after.json()["error"]["code"] == "unauthenticated"
    finally:
        stop_hub(hub)


def test_a_killed_worker_is_restarted_and_loses_no_answered_write(hub2):
    coder = hub2.token("coder")
    on_1 = _client_on(hub2, hub2.token("planner"), "1")
    sent = [on_1.post("/v1/tools/network_ask", json={"toAgent": "coder", "body": f"before the kill {i}"})
            for i in range(20)]
    assert all(r.status_code == 200 and r.headers[PROCESS_HEADER] == "1" for r in sent)
    [worker] = _workers(hub2.proc.pid)
    os.kill(worker, signal.SIGKILL)
    until(lambda: not _alive(worker), "the killed worker is gone")
    until(lambda: [p for p in _workers(hub2.proc.pid) if p != worker], "a new worker started", wait=30)
    _client_on(hub2, coder, "1").close()  # the new worker answers
    got = []
    client = RelaynetClient(hub2.url, coder)
    while True:
        batch = [m for m in client.inbox()["messages"] if m["kind"] == "ask"]
        if not batch:
            break
        got.extend(batch)
    assert sorted(m["id"] for m in got) == sorted(r.json()["messageId"] for r in sent)


def test_kill_9_of_the_primary_takes_the_workers_and_the_port_serves_again(tmp_path):
    """And the restart, given no --workers, runs one process per usable core."""
    port = restart_port()
    hub = start_hub(tmp_path, "--workers", "2", port=port)
    workers = until(lambda: _workers(hub.proc.pid), "the worker process started")
    sent = tool(hub, "network_ask", {"toAgent": "coder", "body": "kept"}, hub.token("planner"))
    hub.proc.send_signal(signal.SIGKILL)
    hub.proc.wait(10)
    until(lambda: not any(_alive(w) for w in workers), "the workers exited with the primary", wait=15)
    hub = start_hub(tmp_path, port=port)  # without --workers: one process per usable core
    try:
        cores = len(os.sched_getaffinity(0))
        assert json.loads((tmp_path / ".relaynet" / "local.json").read_text())["workers"] == cores
        until(lambda: len(_workers(hub.proc.pid)) == cores - 1, f"{cores - 1} workers started")
        inbox = tool(hub, "network_inbox", {}, hub.token("coder"))
        assert [m["id"] for m in inbox["messages"] if m["kind"] == "ask"] == [sent["messageId"]]
    finally:
        stop_hub(hub)


def test_sigint_stops_every_process(tmp_path):
    hub = start_hub(tmp_path, "--workers", "3")
    workers = until(lambda: len(_workers(hub.proc.pid)) == 2 and _workers(hub.proc.pid), "two workers started")
    stop_hub(hub)
    assert hub.proc.returncode == 0
    assert not any(_alive(w) for w in workers)


def test_workers_must_be_a_positive_integer(tmp_path):
    import subprocess

    from tests.e2e.conftest import RELAYNET

    for bad in ("0", "-1", "two"):
        done = subprocess.run([RELAYNET, "serve", "--workers", bad], cwd=tmp_path, capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 2
        assert "--workers" in done.stderr
    assert not (tmp_path / ".relaynet").exists()  # nothing started
