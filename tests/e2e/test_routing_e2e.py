"""Routing end to end (PROTOCOL.md 4.6, 4.8, 7) on the local stack: `relaynet serve
--sweep-interval 1` with a 6 s offer TTL, driven over HTTP; instances launched with `relaynet
admin --local launch` in the hub's working directory.

Waits are bounded polls (no timing assertions): the sweep's "within two runs" is asserted on
sweep runs in tests/unit/test_sweep.py; here the observed latencies are only printed.
"""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import pytest

from tests.e2e.conftest import RELAYNET, start_hub, stop_hub

pytestmark = pytest.mark.e2e

SPEC = """
network: demo
agents:
  - {name: boss, instances: 1}
  - {name: worker}
"""
SWEEP_INTERVAL = 1
OFFER_TTL = 6  # headroom for a loaded machine: the first offer must still stand when it is read


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("routing")
    spec = tmp / "spec.yaml"
    spec.write_text(SPEC)
    h = start_hub(tmp, "--sweep-interval", str(SWEEP_INTERVAL), spec=spec,
                  env={"RELAYNET_OFFER_TTL_SECONDS": str(OFFER_TTL)})
    yield h
    stop_hub(h)


def call(hub, token, tool, **args):
    resp = httpx.post(f"{hub.url}/v1/tools/{tool}", json=args, headers={"Authorization": f"Bearer {token}"},
                      timeout=30)
    return resp.status_code, resp.json()


def ok(hub, token, tool, **args):
    status, body = call(hub, token, tool, **args)
    assert status == 200, (tool, body)
    return body


def launch(hub, agent):
    out = subprocess.run([RELAYNET, "admin", "--local", "launch", "demo", agent], cwd=hub.cwd,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def wait_for_offer(hub, token, task_id, limit_s=30.0):
    """Poll the instance's inbox until the task's offer arrives (bounded); returns (offer, seconds)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        for msg in ok(hub, token, "network_inbox")["messages"]:
            if msg["kind"] == "task_offer" and msg["taskId"] == task_id:
                return msg, time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"no offer of {task_id} within {limit_s} s")


def task(hub, token, task_id):
    return ok(hub, token, "network_task_get", taskId=task_id)["task"]


def test_a_pending_task_is_offered_to_a_launched_instance_then_to_the_next_when_ignored(hub):
    boss = hub.token("boss")
    created = ok(hub, boss, "network_delegate", toAgent="worker", title="Add /health",
                 objective="Add a /health endpoint", acceptanceCriteria=["GET /health answers 200"])
    assert created["state"] == "pending" and "assignee" not in created
    time.sleep(2.5 * SWEEP_INTERVAL)  # a few sweeps run: nobody to offer it to
    still = task(hub, boss, created["taskId"])
    assert still["state"] == "pending" and still["attempts"] == 0

    # Permission and state over HTTP: the creator may not accept; nobody may complete a pending task.
    status, body = call(hub, boss, "network_task_update", taskId=created["taskId"], status="accepted")
    assert status == 403 and body["error"]["code"] == "permission_denied"

    # Two instances come up, one after the other: the first (fewest tasks, then oldest id) gets the offer.
    first = launch(hub, "worker")
    launched_at = time.monotonic()
    second = launch(hub, "worker")
    offer, _ = wait_for_offer(hub, first["token"], created["taskId"])
    print(f"offer reached the launched instance {time.monotonic() - launched_at:.1f} s after launch "
          f"(sweep interval {SWEEP_INTERVAL} s)")
    assert "network_task_update" in offer["instructions"]
    got = task(hub, boss, created["taskId"])
    assert got["state"] == "offered" and got["assignee"] == first["instanceId"] and got["attempts"] == 1

    status, body = call(hub, first["token"], "network_task_update", taskId=created["taskId"], status="working")
    assert status == 409 and body["error"]["details"] == {
        "reason": "invalid_transition", "allowed": ["accepted", "cancelled"], "current": "offered"}

    # The first instance ignores the offer: it expires and goes to the other instance.
    offer2, took = wait_for_offer(hub, second["token"], created["taskId"])
    print(f"re-offer reached the second instance {took:.1f} s later (offer TTL {OFFER_TTL} s)")
    moved = task(hub, boss, created["taskId"])
    assert moved["assignee"] == second["instanceId"] and moved["attempts"] == 2
    assert [(h["state"], h["actor"]) for h in moved["history"]] == [
        ("pending", {"agent": "boss", "instanceId": hub.instance("boss")}), ("offered", {"system": "router"}),
        ("pending", {"system": "router"}), ("offered", {"system": "router"})]

    # The first instance's late accept is refused; the second one's goes through.
    status, body = call(hub, first["token"], "network_task_update", taskId=created["taskId"], status="accepted")
    assert status == 403
    done = ok(hub, second["token"], "network_task_update", taskId=created["taskId"], status="accepted")["task"]
    assert done["state"] == "accepted" and done["assignee"] == second["instanceId"]
    notices = [m for m in ok(hub, boss, "network_inbox")["messages"] if m["taskId"] == created["taskId"]]
    assert [(m["kind"], m.get("subject")) for m in notices] == [("task_update", "Add /health")]
