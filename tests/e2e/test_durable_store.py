"""The local hub's store is durable (issue "A local hub that holds"): `relaynet serve` runs on
DynamoDB Local, a `kill -9` of the hub or of the store loses no acknowledged write, a restart
with the same arguments creates nothing twice and keeps every token working, and the store never
outlives the hub."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from relaynet.client import ApiError, RelaynetClient
from tests.e2e.conftest import RELAYNET, restart_port, start_hub, stop_hub

pytestmark = pytest.mark.e2e


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _local_state(hub) -> dict:
    return json.loads((hub.cwd / ".relaynet" / "local.json").read_text())


def _drain(clients: list[RelaynetClient]) -> list[dict]:
    """Every message the agent's instances can still fetch, fetching until both come back empty."""
    got: list[dict] = []
    while True:
        batch = [m for c in clients for m in c.inbox()["messages"]]
        if not batch:
            return got
        got.extend(batch)


def test_health_names_the_store(tmp_path):
    hub = start_hub(tmp_path)
    try:
        assert httpx.get(f"{hub.url}/v1/health").json()["store"] == "dynamodb-local"
        assert (tmp_path / ".relaynet" / "dynamodb" / "shared-local-instance.db").is_file()
        store_pid = _local_state(hub)["storePid"]
        assert "DynamoDBLocal.jar" in Path(f"/proc/{store_pid}/cmdline").read_bytes().decode()
    finally:
        stop_hub(hub)
    assert _wait_gone(store_pid)


def test_kill_9_of_the_hub_loses_nothing_and_a_restart_is_a_non_event(tmp_path):
    port = restart_port()
    hub = start_hub(tmp_path, port=port)
    tokens_before = (tmp_path / "tokens.json").read_text()
    planner = RelaynetClient(hub.url, hub.token("planner"))
    coders = [RelaynetClient(hub.url, hub.token("coder", n)) for n in (0, 1)]
    sent = [planner.ask(f"ask {i}", to_agent="coder")["messageId"] for i in range(100)]
    task = planner.delegate("Add a /health endpoint", to_agent="reviewer")
    claim = coders[0].claim("src/api/**", ttl_seconds=3600)
    task_before = planner.task_get(task["taskId"])["task"]
    store_pid = _local_state(hub)["storePid"]

    hub.proc.send_signal(signal.SIGKILL)
    hub.proc.wait(10)
    assert _wait_gone(store_pid), "DynamoDB Local outlived a kill -9 of the hub"

    hub = start_hub(tmp_path, port=port)  # the same arguments, the same working directory
    store_pid = _local_state(hub)["storePid"]
    try:
        assert (tmp_path / "tokens.json").read_text() == tokens_before  # nothing created twice
        for agent, n in (("planner", 0), ("coder", 0), ("coder", 1), ("reviewer", 0)):
            assert RelaynetClient(hub.url, hub.token(agent, n)).whoami()["agent"]["name"] == agent
        delivered = [m for m in _drain(coders) if m["kind"] == "ask"]
        assert sorted(m["id"] for m in delivered) == sorted(sent)  # each exactly once
        assert planner.task_get(task["taskId"])["task"] == task_before
        with pytest.raises(ApiError) as conflict:
            coders[1].claim("src/**")
        assert conflict.value.status == 409
        assert [c["claimId"] for c in conflict.value.details["conflicts"]] == [claim["claimId"]]
        discover = planner.discover()
        assert sorted(a["name"] for a in discover["agents"]) == ["coder", "planner", "reviewer"]
        assert len(next(a for a in discover["agents"] if a["name"] == "coder")["instances"]) == 2
    finally:
        stop_hub(hub)
    assert _wait_gone(store_pid)


def test_claims_kept_on_disk_in_the_layout_before_issue_25_are_honoured_after_a_restart(tmp_path):
    """A table written by a hub from before the claim tree (one HEAD counter, every claim at
    ``NET#<net>#CLAIMS`` / ``CLAIM#<clm>``): the restarted hub migrates it at start, so another
    instance's overlapping claim is refused naming the old claim, and its holder still releases it."""
    import boto3

    port = restart_port()
    hub = start_hub(tmp_path, port=port)
    coder0 = RelaynetClient(hub.url, hub.token("coder", 0))
    me = coder0.whoami()
    state = _local_state(hub)
    db = boto3.client("dynamodb", endpoint_url=state["dynamodbEndpoint"])
    net = me["network"]["id"]
    expires = int(time.time() * 1000) + 600_000
    old = {"PK": {"S": f"NET#{net}#CLAIMS"}, "SK": {"S": "CLAIM#clm_01OLDLAYOUT0000000000000001"},
           "kind": {"S": "claim"}, "id": {"S": "clm_01OLDLAYOUT0000000000000001"}, "scopeType": {"S": "path"},
           "scope": {"S": "src/**"}, "holder": {"M": {"agent": {"S": "coder"}, "instanceId": {"S": me["instance"]["id"]}}},
           "expiresAt": {"N": str(expires)}, "fencingToken": {"N": "7"}, "createdAt": {"S": "2026-12-01T00:00:00.000Z"},
           "ttl": {"N": str(expires // 1000 + 86_400)}}
    db.put_item(TableName=state["table"], Item=old)
    db.put_item(TableName=state["table"], Item={"PK": {"S": f"NET#{net}#CLAIMS"}, "SK": {"S": "HEAD"},
                                                "counter": {"N": "7"}})
    stop_hub(hub)

    hub = start_hub(tmp_path, port=port)
    try:
        coder1 = RelaynetClient(hub.url, hub.token("coder", 1))
        with pytest.raises(ApiError) as conflict:
            coder1.claim("src/api/app.py")
        assert conflict.value.status == 409
        assert [c["claimId"] for c in conflict.value.details["conflicts"]] == ["clm_01OLDLAYOUT0000000000000001"]
        coder0 = RelaynetClient(hub.url, hub.token("coder", 0))
        assert coder0.release("clm_01OLDLAYOUT0000000000000001")["released"] is True
        assert coder1.claim("src/api/app.py")["fencingToken"] > 7
    finally:
        stop_hub(hub)


def _retried(call):
    """``call()``'s answer, retried while the store is restarting (a caller retries a 5xx)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return call()
        except ApiError as exc:
            if exc.status not in (0, 500, 502, 503) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_kill_9_of_the_store_right_after_an_answer_loses_nothing(tmp_path):
    """The supervisor restarts a killed store on the same port; every ask the hub answered 200
    before the kill is delivered afterwards, exactly once, and every claim it granted still
    holds (DynamoDB Local answers a transaction before it is on disk: the local stack waits for
    it before answering, unless the call sent another request after it). Half the kills follow
    an ask, half a claim: calls whose last request is, or is not, their transaction."""
    hub = start_hub(tmp_path)
    try:
        planner = RelaynetClient(hub.url, hub.token("planner"))
        coders = [RelaynetClient(hub.url, hub.token("coder", n)) for n in (0, 1)]
        acknowledged, claimed = [], []
        for round_ in range(6):
            store_pid = _local_state(hub)["storePid"]
            if round_ % 2:
                _retried(lambda: coders[0].claim(f"src/round{round_}/**"))
                claimed.append(f"src/round{round_}/**")
            else:
                sent = _retried(lambda: planner.ask(f"ask {round_}", to_agent="coder"))["messageId"]
                acknowledged.append(sent)
            os.kill(store_pid, signal.SIGKILL)  # at once: the answer has just arrived
            assert _wait_gone(store_pid)
            deadline = time.monotonic() + 60
            while _local_state(hub)["storePid"] in (None, store_pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        deadline, got = time.monotonic() + 60, None
        while got is None and time.monotonic() < deadline:
            try:
                got = [m["id"] for m in _drain(coders)]
            except ApiError:
                time.sleep(0.2)
        assert sorted(got or []) == sorted(acknowledged)
        for pattern in claimed:  # each grant survived its kill: the other instance is refused
            with pytest.raises(ApiError) as refused:
                _retried(lambda: coders[1].claim(pattern.replace("**", "a.py")))
            assert refused.value.status == 409, refused.value
        assert "restarting it on" in (tmp_path / "serve.log").read_text()
    finally:
        stop_hub(hub)


#: A network and a representative `relaynet admin --local apply` adds to the running hub's store.
ADMIN_SPEC = """network: extra
agents:
  - {name: worker, instances: 2}
representatives:
  - {name: auditor, grants: {extra: observe, demo: observe}}
"""


#: How many `admin --local launch` runs, each followed by a kill -9 of the store.
LAUNCHES = 5


def _admin_local_then_kill_9_the_store(hub, *args: str) -> dict:
    """`relaynet admin ARGS --local` in the hub's working directory, as an operator runs it; the
    moment its JSON result is printed (stdout unbuffered, read as it comes), ``kill -9`` of the
    hub's DynamoDB Local; then wait until the supervisor has restarted the store. Returns the
    printed result. (DynamoDB Local keeps an acknowledged transaction in memory only for a few
    milliseconds, so the kill must follow the print at once to catch a write not yet on disk.)"""
    store_pid = _local_state(hub)["storePid"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    env.pop("RELAYNET_TABLE", None)
    proc = subprocess.Popen([RELAYNET, "admin", *args, "--local"], cwd=hub.cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    printed, result = b"", None
    try:
        while result is None:
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            printed += chunk
            try:
                result = json.loads(printed)
            except ValueError:
                continue
        os.kill(store_pid, signal.SIGKILL)  # at once: the tokens have just been printed
        assert proc.wait(60) == 0, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert result is not None, printed
    assert _wait_gone(store_pid)
    deadline = time.monotonic() + 60
    while _local_state(hub)["storePid"] in (None, store_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _local_state(hub)["storePid"] not in (None, store_pid), (hub.cwd / "serve.log").read_text()[-3000:]
    return result


def _call(hub, token: str, tool: str) -> dict:
    """``tool`` with ``token`` on the hub, retried while the restarted store is not yet back (a
    caller retries a 5xx); any other error (401: the token was lost) is raised."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with RelaynetClient(hub.url, token) as client:
                return client.call(tool, {})
        except ApiError as exc:
            if exc.status not in (0, 500, 502, 503) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_kill_9_of_the_store_right_after_admin_local_prints_loses_no_token(tmp_path):
    """`relaynet admin --local apply` and `admin --local launch` print their tokens only once the
    hub's DynamoDB Local has them on disk (the local stack's transaction barrier): a `kill -9` of
    the store the moment they are printed loses none of them (issue 24, defect 5)."""
    hub = start_hub(tmp_path)
    try:
        (tmp_path / "extra.yaml").write_text(ADMIN_SPEC)
        applied = _admin_local_then_kill_9_the_store(hub, "apply", "extra.yaml")
        launched = [_admin_local_then_kill_9_the_store(hub, "launch", "demo", "coder") for _ in range(LAUNCHES)]
        workers = applied["networks"]["extra"]["instances"]["worker"]
        assert len(workers) == 2 and set(applied["representatives"]) == {"auditor"}
        lost = []
        for instance in workers + launched:
            try:
                assert _call(hub, instance["token"], "network_whoami")["instance"]["id"] == instance["instanceId"]
            except ApiError as exc:
                lost.append((instance["instanceId"], exc.status, exc.code))
        try:
            _call(hub, applied["representatives"]["auditor"], "control_whoami")
        except ApiError as exc:
            lost.append(("auditor", exc.status, exc.code))
        assert lost == [], f"printed tokens lost by a kill -9 of the store: {lost}"
    finally:
        stop_hub(hub)


def test_a_second_hub_on_the_same_data_directory_is_refused(tmp_path):
    hub = start_hub(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="in use by another running hub"):
            start_hub(tmp_path)
    finally:
        stop_hub(hub)


def test_sigterm_stops_the_store_with_the_hub(tmp_path):
    hub = start_hub(tmp_path)
    store_pid = _local_state(hub)["storePid"]
    hub.proc.send_signal(signal.SIGTERM)
    assert hub.proc.wait(30) == 0
    assert _wait_gone(store_pid)
    assert not (tmp_path / ".relaynet" / "local.json").exists()


def test_the_memory_store_is_explicit_and_says_it_is_throwaway(tmp_path):
    hub = start_hub(tmp_path, "--store", "memory")
    try:
        assert httpx.get(f"{hub.url}/v1/health").json()["store"] == "memory"
        RelaynetClient(hub.url, hub.token("planner")).ask("hello", to_agent="coder")
    finally:
        stop_hub(hub)
    log = (tmp_path / "serve.log").read_text()
    assert "lost when it stops" in log
    assert not (tmp_path / ".relaynet" / "dynamodb").exists()
