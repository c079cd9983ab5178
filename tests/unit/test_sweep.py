"""The routing sweep (PROTOCOL.md 7) and presence (3), on moto: expiry and re-offers, parked
tasks, bounded and fair batches, reads through GSI1 only, and overlapping runs."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from relaynet import admin, clock, identity, sweep, tasks
from relaynet.config import settings
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import apply

SPEC = """
network: s
agents:
  - {name: boss, instances: 1}
  - {name: worker, instances: 2}
  - {name: solo, instances: 1}
  - {name: idle}
  - {name: late}
"""
HOUR = 3_600_000


def delegate(p, **kw):
    kw.setdefault("objective", "Do the thing")
    return tasks.delegate(p, w.DelegateRequest(**kw))


def stored(net, tid):
    return tasks.load_task(net.network_id, tid)


def set_seen(net, inst_id, ms):
    t.update(*k.instance(net.network_id, inst_id), "SET lastSeenAt = :v", v=ms)


def active(net, inst_id):
    return (t.get(*k.instance(net.network_id, inst_id)) or {}).get("active") or set()


def offers_to(net, inst_id, tid=None):
    return [m for m in t.query(k.mailbox_pk(net.network_id, {"instanceId": inst_id}))
            if m["kind"] == "task_offer" and (tid is None or m.get("taskId") == tid)]


def marker(net, tid):
    task = stored(net, tid)
    return t.get(*k.wait_marker(net.network_id, task.get("wait") or routing_key(task)))


def routing_key(task):
    from relaynet import routing

    return routing.wait_key(task)


@pytest.fixture
def net(table):
    return apply(SPEC)


# -- step 1: expired offers ----------------------------------------------------------------------

def test_an_expired_offer_goes_to_another_eligible_instance(net):
    out = delegate(net.principals["boss0"], toAgent="worker")
    first = out["assignee"]
    other = next(net.principals[n].instance_id for n in ("worker0", "worker1") if net.principals[n].instance_id != first)
    due = int(stored(net, out["taskId"])["offerExpiresAt"])
    for p in ("worker0", "worker1"):
        set_seen(net, net.principals[p].instance_id, due)  # both still live then
    assert sweep.run(now_ms=due - 1)["offered"] == 0  # not yet expired: left alone
    stats = sweep.run(now_ms=due)
    assert stats["expired"] == 1 and stats["offered"] == 1
    task = stored(net, out["taskId"])
    assert task["state"] == "offered" and task["assignee"] == other and task["attempts"] == 2
    assert [(h["state"], h["actor"]) for h in task["history"]] == [
        ("pending", net.principals["boss0"].actor), ("offered", {"system": "router"}),
        ("pending", {"system": "router"}), ("offered", {"system": "router"})]
    assert task["history"][2]["reason"] == "offer expired"
    assert out["taskId"] not in active(net, first) and out["taskId"] in active(net, other)
    assert len(offers_to(net, other, out["taskId"])) == 1


def test_every_instance_gets_a_turn_before_one_is_offered_a_task_again(net):
    out = delegate(net.principals["boss0"], toAgent="worker")
    seen = []
    for _ in range(4):
        task = stored(net, out["taskId"])
        seen.append(task["assignee"])
        for p in ("worker0", "worker1"):
            set_seen(net, net.principals[p].instance_id, int(task["offerExpiresAt"]))
        sweep.run(now_ms=int(task["offerExpiresAt"]))
    assert seen[0] != seen[1] and seen[2] == seen[0] and seen[3] == seen[1]
    assert stored(net, out["taskId"])["attempts"] == 5


def test_an_expired_offer_goes_back_to_the_only_eligible_instance(net):
    out = delegate(net.principals["boss0"], toAgent="solo")
    task = stored(net, out["taskId"])
    set_seen(net, out["assignee"], int(task["offerExpiresAt"]))  # still live when it expires
    assert sweep.run(now_ms=int(task["offerExpiresAt"]))["offered"] == 1
    again = stored(net, out["taskId"])
    assert again["assignee"] == out["assignee"] and again["attempts"] == 2
    assert len(offers_to(net, out["assignee"], out["taskId"])) == 2


def test_an_expired_offer_of_an_instance_gone_offline_waits_for_it(net):
    out = delegate(net.principals["boss0"], toAgent="solo")
    expiry = int(stored(net, out["taskId"])["offerExpiresAt"])
    stats = sweep.run(now_ms=expiry + settings().presence_timeout * 1000 + 1)  # solo0 is offline by then
    assert stats["expired"] == 1 and stats["parked"] == 1 and stats["offered"] == 0
    task = stored(net, out["taskId"])
    assert task["state"] == "pending" and "assignee" not in task and task["attempts"] == 1
    assert out["taskId"] not in active(net, out["assignee"])
    assert [s["id"] for s in tasks.unroutable(net.network_id)] == [out["taskId"]]


# -- step 2: pending tasks, presence ---------------------------------------------------------------

def test_a_parked_task_is_offered_by_the_first_run_after_its_target_gains_an_instance(net):
    out = delegate(net.principals["boss0"], toAgent="late")
    assert out["state"] == "pending"
    assert sweep.run()["offered"] == 0
    assert stored(net, out["taskId"])["state"] == "pending"
    launched = admin.launch("s", "late")
    stats = sweep.run()
    assert stats["offered"] == 1 and stats["groups_ready"] == 1
    task = stored(net, out["taskId"])
    assert task["state"] == "offered" and task["assignee"] == launched["instanceId"] and task["attempts"] == 1
    assert len(offers_to(net, launched["instanceId"], out["taskId"])) == 1


def test_an_offline_instance_gets_no_offers_and_gets_them_again_when_it_calls(net, monkeypatch):
    monkeypatch.setenv("RELAYNET_PRESENCE_TIMEOUT_SECONDS", "120")
    settings.cache_clear()
    solo = net.principals["solo0"]
    set_seen(net, solo.instance_id, clock.now_ms() - 121_000)
    out = delegate(net.principals["boss0"], toAgent="solo")
    assert out["state"] == "pending"
    assert sweep.run()["offered"] == 0
    assert offers_to(net, solo.instance_id) == []
    identity.touch(solo)  # any authenticated call
    assert sweep.run()["offered"] == 1
    assert stored(net, out["taskId"])["assignee"] == solo.instance_id


def test_a_stopped_instance_gets_no_offers_until_it_is_restarted(net):
    out = delegate(net.principals["boss0"], toAgent="solo")
    tasks.return_to_pending(net.network_id, out["assignee"])
    t.update(*k.instance(net.network_id, out["assignee"]), "SET #s = :x", names={"#s": "status"}, x="stopped")
    stats = sweep.run()
    assert stats["parked"] == 1 and stats["offered"] == 0
    t.update(*k.instance(net.network_id, out["assignee"]), "SET #s = :x", names={"#s": "status"}, x="available")
    assert sweep.run()["offered"] == 1


# -- bounded, fair, never starved ----------------------------------------------------------------

def test_batches_are_bounded_and_shared_fairly_between_groups(net):
    boss = net.principals["boss0"]
    for p in ("worker0", "worker1", "solo0"):
        set_seen(net, net.principals[p].instance_id, 0)
    ids = {agent: [delegate(boss, toAgent=agent)["taskId"] for _ in range(7)] for agent in ("worker", "solo")}
    for p in ("worker0", "worker1", "solo0"):
        set_seen(net, net.principals[p].instance_id, clock.now_ms())
    first = sweep.run(batch=6)
    assert first["offered"] == 6 and first["groups_ready"] == 2
    states = {a: [stored(net, i)["state"] for i in ids[a]] for a in ids}
    assert states["worker"].count("offered") == 3 and states["solo"].count("offered") == 3
    assert states["worker"][:3] == ["offered"] * 3  # oldest first within a group
    assert sweep.run(batch=6)["offered"] == 6
    assert sweep.run(batch=6)["offered"] == 2
    assert sweep.run(batch=6)["offered"] == 0


def test_tasks_nobody_can_take_never_starve_the_others_and_cost_no_writes(net):
    boss = net.principals["boss0"]
    stuck = [delegate(boss, toAgent="idle")["taskId"] for _ in range(12)]
    versions = {tid: stored(net, tid)["version"] for tid in stuck}
    out = delegate(boss, toAgent="worker")
    expiry = int(stored(net, out["taskId"])["offerExpiresAt"])
    for p in ("worker0", "worker1"):
        set_seen(net, net.principals[p].instance_id, expiry)
    for _ in range(3):
        stats = sweep.run(now_ms=expiry, batch=5)
        assert stats["groups"] == 1 and stats["groups_ready"] == 0 and stats["offered"] == 1
        expiry = int(stored(net, out["taskId"])["offerExpiresAt"])
        for p in ("worker0", "worker1"):
            set_seen(net, net.principals[p].instance_id, expiry)
    assert stored(net, out["taskId"])["attempts"] == 4
    assert {tid: stored(net, tid)["version"] for tid in stuck} == versions
    assert int(marker(net, stuck[0])["gen"]) == 12  # one marker, refreshed by each parked task


def test_the_sweep_reads_through_the_routing_index_never_a_scan(net):
    boss = net.principals["boss0"]
    for _ in range(3):
        delegate(boss, toAgent="idle")
    out = delegate(boss, toAgent="worker")
    admin.launch("s", "idle")
    expiry = int(stored(net, out["taskId"])["offerExpiresAt"])
    for p in ("worker0", "worker1"):
        set_seen(net, net.principals[p].instance_id, expiry)
    calls = []

    def record(params, model, **_):
        calls.append((model.name, params.get("IndexName"), params.get("ExpressionAttributeValues", {}).get(":pk")))

    events = t.client().meta.events
    events.register("before-parameter-build.dynamodb.*", record)
    try:
        stats = sweep.run(now_ms=expiry)
    finally:
        events.unregister("before-parameter-build.dynamodb.*", record)
    assert stats["offered"] == 4 and stats["expired"] == 1
    ops = {c[0] for c in calls}
    assert ops <= {"Query", "TransactWriteItems"}, ops
    queries = [c for c in calls if c[0] == "Query"]
    assert all(idx == "GSI1" or pk == {"S": k.net(net.network_id)} for _, idx, pk in queries), queries
    routing = [pk["S"] for _, _, pk in queries if pk["S"].startswith(("ROUTE", "WAITING"))]
    # each routing shard and each marker shard once (and the partitions from before the shards),
    # then one wait group and one directory
    assert sorted(routing) == sorted([*k.route_pks(), k.ROUTE, *k.waiting_pks(), k.WAITING])
    assert len(queries) == len(routing) + 2


def test_a_bad_task_never_stops_the_run(net, monkeypatch):
    boss = net.principals["boss0"]
    ids = [delegate(boss, toAgent="late")["taskId"] for _ in range(3)]
    admin.launch("s", "late")
    real = t.transact

    def flaky(actions, token=None):
        if ids[0] in str(actions[0]):
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "Item size too large"}},
                              "TransactWriteItems")
        return real(actions, token)

    monkeypatch.setattr(t, "transact", flaky)
    stats = sweep.run()
    assert stats["errors"] == 1 and stats["offered"] == 2


# -- wait-group markers --------------------------------------------------------------------------

def test_a_wait_groups_marker_goes_once_the_group_is_empty(net):
    boss = net.principals["boss0"]
    ids = [delegate(boss, toAgent="late")["taskId"] for _ in range(3)]
    assert int(marker(net, ids[0])["gen"]) == 3
    tasks.update(boss, w.TaskUpdateRequest(taskId=ids[0], status="cancelled"))
    admin.launch("s", "late")
    assert sweep.run()["offered"] == 2
    assert sweep.run()["groups_closed"] == 0  # empty, but tasks were parked in it a moment ago
    later = clock.now_ms() + sweep.MARKER_GRACE_MS + 1
    assert sweep.run(now_ms=later)["groups_closed"] == 1
    assert marker(net, ids[1]) is None
    delegate(boss, toAgent="idle")  # another group; the late one is gone for good
    assert sweep.run(now_ms=later)["groups"] == 1


def test_a_marker_is_kept_while_a_task_is_parked_in_it(net):
    boss = net.principals["boss0"]
    tid = delegate(boss, toAgent="idle")["taskId"]
    tasks.update(boss, w.TaskUpdateRequest(taskId=tid, status="cancelled"))
    again = delegate(boss, toAgent="idle")["taskId"]
    later = clock.now_ms() + HOUR
    assert sweep.run(now_ms=later)["groups_closed"] == 0
    m = marker(net, again)
    assert m is not None and m["lastCheckedAt"] == later  # checked once; next in 10 minutes


def test_a_group_emptied_by_cancels_is_closed_though_nobody_is_eligible(net):
    boss = net.principals["boss0"]
    tid = delegate(boss, toAgent="idle")["taskId"]
    tasks.update(boss, w.TaskUpdateRequest(taskId=tid, status="cancelled"))
    assert sweep.run()["groups_closed"] == 0  # within the grace
    assert sweep.run(now_ms=clock.now_ms() + HOUR)["groups_closed"] == 1
    assert sweep.run(now_ms=clock.now_ms() + HOUR)["groups"] == 0


def test_a_marker_is_never_closed_under_a_task_parked_after_it_was_read(net, monkeypatch):
    boss = net.principals["boss0"]
    tid = delegate(boss, toAgent="idle")["taskId"]
    tasks.update(boss, w.TaskUpdateRequest(taskId=tid, status="cancelled"))
    real_empty, parked = sweep.store.group_empty, []

    def empty_then_park(m):
        result = real_empty(m)
        parked.append(delegate(boss, toAgent="idle")["taskId"])  # lands between the check and the delete
        return result

    monkeypatch.setattr(sweep.store, "group_empty", empty_then_park)
    assert sweep.run(now_ms=clock.now_ms() + HOUR)["groups_closed"] == 0
    assert marker(net, parked[0]) is not None


# -- overlapping runs (moto in server mode) -------------------------------------------------------

RACE = "network: r\nagents:\n  - {name: boss, instances: 1}\n  - {name: worker}\n"


def _at_once(fn, n=2):
    barrier = threading.Barrier(n)

    def go(_):
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(go, range(n)))


def _assert_each_offered_once(net, ids, attempts):
    holders: dict[str, list[str]] = {}
    insts = [i for i in t.query(k.net(net.network_id), sk_prefix="INST#")]
    for inst in insts:
        for tid in inst.get("active") or ():
            holders.setdefault(tid, []).append(inst["id"])
    for tid in ids:
        task = stored(net, tid)
        assert task["state"] == "offered" and task["attempts"] == attempts, task
        assert holders.get(tid) == [task["assignee"]], (tid, holders.get(tid))
        thread = t.query(k.thread_pk(net.network_id, task["threadId"]), sk_prefix="MSG#")
        assert sum(m["kind"] == "task_offer" for m in thread) == attempts
        assert [h["state"] for h in task["history"]] == ["pending"] + ["offered", "pending"] * (attempts - 1) + ["offered"]


def test_two_sweeps_at_once_never_offer_a_task_to_two_instances(server_table):
    net = apply(RACE)
    boss = net.principals["boss0"]
    ids = [delegate(boss, toAgent="worker")["taskId"] for _ in range(16)]
    for _ in range(3):
        admin.launch("r", "worker")
    runs = _at_once(sweep.run)
    print("overlapping runs:", runs)
    assert sum(r["offered"] for r in runs) == 16
    _assert_each_offered_once(net, ids, attempts=1)
    expiry = max(int(stored(net, tid)["offerExpiresAt"]) for tid in ids)
    for inst in t.query(k.net(net.network_id), sk_prefix="INST#"):
        set_seen(net, inst["id"], expiry)
    runs = _at_once(lambda: sweep.run(now_ms=expiry))
    assert sum(r["expired"] for r in runs) == 16 and sum(r["offered"] for r in runs) == 16
    _assert_each_offered_once(net, ids, attempts=2)
