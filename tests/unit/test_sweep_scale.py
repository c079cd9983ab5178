"""The sweep at scale, on DynamoDB Local: the sharded routing index (PROTOCOL.md 7, docs/architecture.md
"Routing shards"), fairness between networks, tables from before the shards, and the history cap
that keeps a task item bounded however often it is re-offered (docs/protocol.md 4.7).

These tests write tens of thousands of items, so they run on a DynamoDB Local of their own whose
data directory is on a tmpfs (/dev/shm) where there is one: the same program and semantics as the
session's store, without the disk sync per item that makes it five times slower (measured: 63
against 312 items/s on this machine). Without /dev/shm they use the session's store.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import boto3
import pytest

from relaynet import admin, clock, routing, sweep, tasks
from relaynet.directory import load
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.taskstate import HISTORY_KEPT
from tests.conftest import apply


SHM = Path("/dev/shm")


@pytest.fixture(scope="module")
def scale_store(request):
    """The endpoint of a DynamoDB Local for this module (see the module docstring)."""
    if not SHM.is_dir():
        yield request.getfixturevalue("dynamodb_local")
        return
    from relaynet_local.dynamodb_local import DynamoDBLocal

    data_dir = tempfile.mkdtemp(prefix="relaynet-test-scale-", dir=SHM)
    try:
        with DynamoDBLocal(data_dir) as store:
            yield store.endpoint
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def server_table(scale_store, monkeypatch):
    """A fresh table on :func:`scale_store`, as conftest's ``server_table`` makes one on the
    session's store."""
    from tests.conftest import fresh_table

    with fresh_table(scale_store, monkeypatch, "relaynet-scale") as endpoint:
        yield endpoint


def spec(name: str, worker_instances: int = 0) -> str:
    return f"network: {name}\nagents:\n  - {{name: boss, instances: 1}}\n  - {{name: worker, instances: {worker_instances}}}\n"


def stored(net_id: str, task_id: str) -> dict:
    return tasks.load_task(net_id, task_id)


def batch_put(items: list[dict]) -> None:
    """BatchWriteItem, 25 at a time (how the test seeds what thousands of delegations would write)."""
    client = boto3.client("dynamodb")
    for start in range(0, len(items), 25):
        req = {t.table_name(): [{"PutRequest": {"Item": t.encode(i)}} for i in items[start:start + 25]]}
        while req:
            req = client.batch_write_item(RequestItems=req).get("UnprocessedItems") or None


def parked_tasks(net, n: int, now: int) -> list[str]:
    """``n`` pending tasks of ``net``'s boss for ``worker``, parked in their wait group, stored
    exactly as tasks.delegate stores them when nobody is eligible (the group's marker through
    tasks.save, the items through BatchWriteItem)."""
    boss = net.principals["boss0"]
    items, ids = [], []
    wait = None
    for i in range(n):
        task = {"id": f"task_{net.network_id[-8:]}{i:07d}", "networkId": net.network_id, "title": f"Task {i}",
                "objective": "Do the thing", "acceptanceCriteria": [], "state": "pending", "creator": boss.actor,
                "target": {"agent": "worker"}, "resource": None, "createdAt": clock.iso(now), "updatedAt": clock.iso(now),
                "attempts": 0, "history": [{"state": "pending", "actor": boss.actor, "at": clock.iso(now)}],
                "progress": [], "threadId": f"thr_{i}"}
        tasks.park(task, now + i)
        before = tasks.Before({"state": "pending", "wait": wait})  # the marker is written once
        (put,) = tasks.save(task, before, now)
        wait = task["wait"]
        items.append(t.decode(put["Put"]["Item"]))
        ids.append(task["id"])
    batch_put(items)
    return ids


def test_a_network_with_10000_pending_tasks_never_starves_another_networks_single_task(server_table):
    a, b = apply(spec("big")), apply(spec("small"))
    now = clock.now_ms()
    big = parked_tasks(a, 10_000, now - 60_000)
    single = tasks.delegate(b.principals["boss0"], w.DelegateRequest(objective="One thing", toAgent="worker"))
    assert single["state"] == "pending"
    admin.launch("big", "worker")
    admin.launch("small", "worker")
    stats = sweep.run(batch=100)
    assert stats["groups_ready"] == 2 and stats["offered"] == 100 and stats["errors"] == 0
    assert stored(b.network_id, single["taskId"])["state"] == "offered"
    # the big network gets the rest of the budget, oldest first
    assert [stored(a.network_id, tid)["state"] for tid in (big[0], big[98], big[99])] == ["offered", "offered", "pending"]


def _ids_in_one_shard(net_id: str, n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        tid = f"task_shard{i:06d}"
        if k.shard(net_id, tid) == 0:
            out.append(tid)
        i += 1
    return out


def test_one_shards_backlog_gets_the_budget_the_other_shards_leave(server_table):
    net = apply(spec("one", worker_instances=1))
    now = clock.now_ms() - 1_000
    boss = net.principals["boss0"]
    items = []
    for i, tid in enumerate(_ids_in_one_shard(net.network_id, 40)):
        task = {"id": tid, "networkId": net.network_id, "title": tid, "objective": "x", "acceptanceCriteria": [],
                "state": "pending", "creator": boss.actor, "target": {"agent": "worker"}, "resource": None,
                "createdAt": clock.iso(now), "updatedAt": clock.iso(now), "attempts": 0,
                "history": [{"state": "pending", "actor": boss.actor, "at": clock.iso(now)}], "progress": [],
                "threadId": f"thr_{i}", "dueAt": now + i}
        (put,) = tasks.save(task, tasks.Before(None), now)
        item = t.decode(put["Put"]["Item"])
        assert item["GSI1PK"] == "ROUTE#0"
        items.append(item)
    batch_put(items)
    first = sweep.run(batch=30)  # a share per shard is 2; shard 0 gets what the others leave
    assert first["offered"] == 30
    assert sweep.run(batch=30)["offered"] == 10


def test_tasks_and_markers_of_a_table_from_before_the_shards_are_swept_into_their_shards(server_table):
    net = apply(spec("old", worker_instances=1))
    boss = net.principals["boss0"]
    offered = tasks.delegate(boss, w.DelegateRequest(objective="Offered before the shards", toAgent="worker"))
    solo = apply("network: old2\nagents:\n  - {name: boss, instances: 1}\n  - {name: late}\n")
    parked = tasks.delegate(solo.principals["boss0"], w.DelegateRequest(objective="Parked before", toAgent="late"))
    # what the hub wrote before the shards: the routing index under ROUTE, the marker under WAITING
    task = stored(net.network_id, offered["taskId"])
    t.update(task["PK"], task["SK"], "SET GSI1PK = :old", old=k.ROUTE)
    wait = stored(solo.network_id, parked["taskId"])["wait"]
    t.update(*k.wait_marker(solo.network_id, wait), "SET GSI1PK = :old", old=k.WAITING)
    assert not any(t.query(pk, index="GSI1") for pk in k.route_pks())
    assert not any(t.query(pk, index="GSI1") for pk in k.waiting_pks())

    due = int(task["offerExpiresAt"])
    t.update(*k.instance(net.network_id, offered["assignee"]), "SET lastSeenAt = :v", v=due)
    launched = admin.launch("old2", "late")
    t.update(*k.instance(solo.network_id, launched["instanceId"]), "SET lastSeenAt = :v", v=due)
    stats = sweep.run(now_ms=due)
    assert stats["expired"] == 1 and stats["offered"] == 2 and stats["groups"] == 1
    again = t.get(*k.task(net.network_id, offered["taskId"]))
    assert again["attempts"] == 2 and again["GSI1PK"] == k.route_pk(net.network_id, offered["taskId"])
    assert stored(solo.network_id, parked["taskId"])["assignee"] == launched["instanceId"]
    assert t.query(k.ROUTE, index="GSI1") == []


def _item_bytes(net_id: str, task_id: str) -> int:
    """The stored item's size as DynamoDB's wire format spells it (an upper bound of its item size)."""
    raw = t.client().get_item(TableName=t.table_name(), Key=t.key(*k.task(net_id, task_id)))["Item"]
    return len(json.dumps(raw, separators=(",", ":")))


@pytest.mark.parametrize("cycles", [
    pytest.param(500, id="500"),
    # about 2 minutes on an idle 2-core machine, over 10 under a team's load: `make test-scale`
    pytest.param(10_000, id="10000", marks=pytest.mark.scale),
])
def test_a_task_reoffered_10000_times_stays_a_bounded_item(server_table, cycles):
    net = apply(spec("cap", worker_instances=1))
    out = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective="Never answered", toAgent="worker"))
    inst = out["assignee"]
    d = load(net.network_id)
    sizes = {}
    task = stored(net.network_id, out["taskId"])
    for cycle in range(1, cycles + 1):  # the sweep's expire / re-offer cycle, one offer TTL at a time
        # (the task as the sweep's own write left it: each cycle is one conditional put on its version)
        due = int(task["offerExpiresAt"])
        d.instances[inst]["lastSeenAt"] = due  # the instance is live, it just never answers
        assert sweep._route(task, d, due) == ["expired", "offered"]
        if cycle in (100, cycles):
            sizes[cycle] = _item_bytes(net.network_id, out["taskId"])
    task = stored(net.network_id, out["taskId"])
    assert task["attempts"] == cycles + 1 and task["state"] == "offered"
    assert len(task["history"]) == HISTORY_KEPT
    assert task["history"][0]["actor"] == net.principals["boss0"].actor  # the creation is kept
    assert task["historyDropped"] == 2 + 2 * cycles - HISTORY_KEPT
    assert sizes[cycles] < 16_000 and sizes[cycles] - sizes[100] < 64, sizes  # bounded, not growing
    got = tasks.get(net.principals["boss0"], w.TaskGetRequest(taskId=out["taskId"]), lambda *_: [])
    assert got["task"]["historyDropped"] == task["historyDropped"]
    assert len(got["task"]["history"]) == HISTORY_KEPT


def test_history_with_long_reasons_is_capped_by_size_keeping_the_first_and_newest_entries():
    from relaynet.taskstate import HISTORY_BYTES, cap_history

    first = {"state": "pending", "actor": {"agent": "boss", "instanceId": "inst_1"}, "at": "2026-01-01T00:00:00Z"}
    task = {"history": [first]}
    for n in range(40):  # blocked / working with the longest reason a caller may give (8 KiB)
        task["history"].append({"state": "blocked" if n % 2 else "working", "reason": f"{n:02d}" + "x" * 8190,
                                "actor": {"agent": "worker", "instanceId": "inst_2"}, "at": "2026-01-01T00:00:01Z"})
        cap_history(task)
    kept = task["history"]
    assert kept[0] == first and kept[-1]["reason"].startswith("39")
    assert len(json.dumps(kept)) <= HISTORY_BYTES and len(kept) == 8  # the first and the newest 7
    assert task["historyDropped"] == 41 - len(kept)
    assert [h["reason"][:2] for h in kept[1:]] == [f"{n:02d}" for n in range(33, 40)]
