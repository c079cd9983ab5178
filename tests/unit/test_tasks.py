"""Tasks: delegation (PROTOCOL.md 4.6), reads (4.7) and the state machine (4.8), on moto.

Most tests share one network per class (a fresh table costs more than the test); each drives its
own tasks and looks up who got them, so the order of tests does not matter.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from moto import mock_aws

from relaynet import admin, claims, clock, sweep, tasks
from relaynet.errors import InvalidArgument, InvalidTransition, NotFound, PermissionDenied
from relaynet.identity import Principal, authorize
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.taskstate import ALLOWED_BY_CALLERS, REQUESTABLE, STATES, TERMINAL, allowed_from
from tests.conftest import TEMPLATE, apply

SPEC = """
network: tm
agents:
  - {name: boss, instances: 2, groups: [crew]}
  - {name: worker, instances: 2, groups: [crew]}
  - {name: other, instances: 1}
  - {name: sleepy, instances: 1}
  - {name: idle}
  - {name: owner, instances: 1, responsibilities: [{resource: github.com/acme/api, actions: [implement]}]}
  - {name: anyone, responsibilities: [{actions: [review]}]}
  - {name: bossy, instances: 1, responsibilities: [{resource: github.com/acme/api}]}
groups:
  - {slug: crew, members: [boss, worker]}
resources:
  - {key: github.com/acme/api}
representatives:
  - {name: ops, grants: {tm: operate}}
"""
OPS = Principal("representative", rep="ops")


@pytest.fixture(scope="class")
def net():
    """One network for a whole class of tests (see the module docstring)."""
    from relaynet_local.template import create_table

    with mock_aws():
        t.reset()
        create_table(boto3.client("dynamodb"), TEMPLATE, "relaynet-test")
        yield apply(SPEC)
        t.reset()


@pytest.fixture
def fresh(net):
    """After the test, delete what it wrote outside the directory: moto copies the whole table
    for every transaction, so a table that keeps growing makes every later test slower."""
    yield net
    keep = ("TOKEN#", "NETNAME#", "REP#", "CONFIG#")
    client = t.client()
    doomed = []
    for page in client.get_paginator("scan").paginate(TableName=t.table_name(), ProjectionExpression="PK, SK"):
        doomed += [i for i in page["Items"] if not i["PK"]["S"].startswith(keep) and i["PK"]["S"] != k.net(net.network_id)]
    for start in range(0, len(doomed), 25):
        client.batch_write_item(RequestItems={t.table_name(): [{"DeleteRequest": {"Key": i}} for i in doomed[start:start + 25]]})


def delegate(p, **kw):
    kw.setdefault("objective", "Add a health endpoint")
    return tasks.delegate(p, w.DelegateRequest(**kw))


def update(p, task_id, status, reason=None, **kw):
    return tasks.update(p, w.TaskUpdateRequest(taskId=task_id, status=status, reason=reason), **kw)


def stored(net, task_id):
    return tasks.load_task(net.network_id, task_id)


def by_instance(net, inst_id):
    return next(p for p in net.principals.values() if p.instance_id == inst_id)


def instance(net, p):
    return t.get(*k.instance(net.network_id, p.instance_id))


def set_seen(net, p, ms):
    t.update(*k.instance(net.network_id, p.instance_id), "SET lastSeenAt = :v", v=ms)


def mailbox(net, address, task_id):
    return [m for m in t.query(k.mailbox_pk(net.network_id, address)) if m.get("taskId") == task_id]


def pending_with_eligible(net):
    """A pending task for `sleepy`, whose one instance was offline at delegation and is back now."""
    sleepy = net.principals["sleepy0"]
    set_seen(net, sleepy, 0)
    out = delegate(net.principals["boss0"], toAgent="sleepy")
    assert out["state"] == "pending"
    set_seen(net, sleepy, clock.now_ms())
    return out["taskId"], sleepy


def offered(net):
    out = delegate(net.principals["boss0"], toAgent="worker")
    assert out["state"] == "offered"
    return out["taskId"], by_instance(net, out["assignee"])


def drive(net, state):
    """A fresh task in ``state``; returns (task id, {"creator", "eligible" or "assignee"})."""
    boss = net.principals["boss0"]
    if state == "pending":
        tid, sleepy = pending_with_eligible(net)
        return tid, {"creator": boss, "eligible": sleepy}
    tid, inst = offered(net)
    steps = {"offered": [], "accepted": ["accepted"], "working": ["accepted", "working"],
             "blocked": ["accepted", "blocked"], "completed": ["accepted", "working", "completed"],
             "failed": ["accepted", "working", "failed"], "cancelled": ["accepted", "working"]}[state]
    for step in steps:
        update(inst, tid, step, reason="because" if step in ("blocked", "completed", "failed") else None)
    if state == "cancelled":
        update(boss, tid, "cancelled")
    assert stored(net, tid)["state"] == state
    return tid, {"creator": boss, "assignee": inst}


DISALLOWED = [(src, dst) for src in STATES for dst in REQUESTABLE if (src, dst) not in ALLOWED_BY_CALLERS]


@pytest.mark.usefixtures("fresh")
class TestStateMachine:
    """PROTOCOL.md 4.8: one test per allowed transition and per permission rule."""

    def test_the_table_has_the_protocols_thirteen_caller_moves(self):
        assert len(ALLOWED_BY_CALLERS) == 13 and len(DISALLOWED) == 35
        assert allowed_from("pending") == ["accepted", "cancelled"]
        assert allowed_from("offered") == ["accepted", "cancelled"]
        assert allowed_from("accepted") == ["working", "blocked", "cancelled"]
        assert allowed_from("working") == ["blocked", "completed", "failed", "cancelled"]
        assert allowed_from("blocked") == ["working", "cancelled"]
        assert all(allowed_from(s) == [] for s in TERMINAL)

    @pytest.mark.parametrize(("src", "dst"), DISALLOWED, ids=[f"{s}->{d}" for s, d in DISALLOWED])
    def test_every_disallowed_move_is_409_with_the_allowed_states(self, net, src, dst):
        tid, who = drive(net, src)
        caller = who["creator"] if dst == "cancelled" else who.get("assignee") or who["eligible"]
        before = stored(net, tid)
        with pytest.raises(InvalidTransition) as err:
            update(caller, tid, dst, reason="some reason")
        assert err.value.status == 409
        assert err.value.details == {"reason": "invalid_transition", "allowed": allowed_from(src), "current": src}
        after = stored(net, tid)
        assert after["version"] == before["version"] and after["history"] == before["history"]

    # -- allowed transitions ----------------------------------------------------------------

    def test_pending_to_accepted_by_an_eligible_instance_pulls_the_task(self, net):
        tid, sleepy = pending_with_eligible(net)
        task = update(sleepy, tid, "accepted")["task"]
        assert task["state"] == "accepted" and task["assignee"] == sleepy.instance_id
        assert task["history"][-1]["actor"] == sleepy.actor
        inst = instance(net, sleepy)
        assert tid in inst["active"] and tid in inst["held"]
        assert sleepy.agent in t.get(*k.thread(net.network_id, task["threadId"]))["participants"]
        assert [m["state"] for m in mailbox(net, {"agent": "boss"}, tid)] == ["accepted"]

    def test_offered_to_accepted_by_the_offered_instance(self, net):
        tid, inst = offered(net)
        task = update(inst, tid, "accepted")["task"]
        assert task["state"] == "accepted" and task["assignee"] == inst.instance_id
        assert "offerExpiresAt" not in task
        assert tid in instance(net, inst)["held"]

    def test_offered_to_pending_is_the_hubs_move_when_the_offer_expires(self, net):
        tid, inst = offered(net)
        task = stored(net, tid)
        sweep.run(now_ms=int(task["offerExpiresAt"]) + 1, batch=500)
        after = stored(net, tid)
        expiry = after["history"][2]
        assert expiry["state"] == "pending" and expiry["actor"] == {"system": "router"}
        assert expiry["reason"] == "offer expired"

    def test_an_offer_already_past_its_expiry_is_expired_first_by_the_update(self, net):
        tid, inst = offered(net)
        t.update(*k.task(net.network_id, tid), "SET offerExpiresAt = :past", past=1)
        task = update(inst, tid, "accepted")["task"]  # still eligible: a pull-accept
        assert [h["state"] for h in task["history"]] == ["pending", "offered", "pending", "accepted"]
        assert task["history"][2]["actor"] == {"system": "router"}
        inst_item = instance(net, inst)
        assert tid in inst_item["active"] and tid in inst_item["held"]

    @pytest.mark.parametrize(("steps", "last"), [
        ((), "working"), ((), "blocked"), (("working",), "blocked"), (("working",), "completed"),
        (("working",), "failed"), (("blocked",), "working")])
    def test_the_assignee_moves_its_task(self, net, steps, last):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        for step in steps:
            update(inst, tid, step, reason="waiting on review" if step == "blocked" else None)
        reason = "CI run 42: 12/12 tests pass" if last in ("blocked", "completed", "failed") else None
        task = update(inst, tid, last, reason=reason)["task"]
        assert task["state"] == last
        assert task["history"][-1] == {"state": last, "actor": inst.actor, "at": task["updatedAt"],
                                       **({"reason": reason} if reason else {})}
        held = instance(net, inst).get("held") or set()
        assert (tid in held) == (last not in TERMINAL)
        notices = mailbox(net, {"agent": "boss"}, tid)
        assert [m["state"] for m in notices] == ["accepted", *steps, last]
        assert all(m["kind"] == "task_update" for m in notices)

    @pytest.mark.parametrize("src", ["pending", "offered", "accepted", "working", "blocked"])
    def test_the_creator_may_cancel_from_any_non_terminal_state(self, net, src):
        tid, who = drive(net, src)
        task = update(who["creator"], tid, "cancelled", reason="scope changed")["task"]
        assert task["state"] == "cancelled" and task["history"][-1]["reason"] == "scope changed"
        assert [m["state"] for m in mailbox(net, {"agent": "boss"}, tid)][-1] == "cancelled"
        inst = who.get("assignee")
        if inst is not None:  # the assignee hears of it, and no longer carries it
            told = mailbox(net, {"instanceId": inst.instance_id}, tid)
            assert [m["kind"] for m in told if m["kind"] == "task_update"] == ["task_update"]
            item = instance(net, inst)
            assert tid not in (item.get("active") or set()) and tid not in (item.get("held") or set())

    def test_another_instance_of_the_creators_agent_may_cancel(self, net):
        tid, _ = offered(net)
        assert update(net.principals["boss1"], tid, "cancelled")["task"]["state"] == "cancelled"

    def test_a_representative_may_cancel(self, net):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        task = tasks.cancel(OPS, net.network_id, tid, "priorities changed")["task"]
        assert task["history"][-1]["actor"] == {"representative": "ops"}
        assert mailbox(net, {"instanceId": inst.instance_id}, tid)[-1]["state"] == "cancelled"

    def test_a_terminal_move_runs_on_terminal_to_release_claims(self, net):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        update(inst, tid, "working")
        claims.claim(inst, w.ClaimRequest(scope=f"src/{tid}/**", taskId=tid))
        update(inst, tid, "completed", reason="done: PR #7", on_terminal=claims.release_for_task)
        assert claims.active_for_task(net.network_id, tid) == []

    def test_a_terminal_move_releases_the_tasks_claims_in_its_own_transaction(self, net):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        update(inst, tid, "working")
        for n in range(2):
            claims.claim(inst, w.ClaimRequest(scope=f"src/{tid}/{n}/**", taskId=tid))
        other = claims.claim(inst, w.ClaimRequest(scope=f"docs/{tid}/**"))  # not the task's: kept
        writes = []
        t.client().meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **kw: writes.append(1),
                                        unique_id="count-transactions")
        try:
            update(inst, tid, "completed", reason="done: PR #8", on_terminal=claims.release_for_task)
        finally:
            t.client().meta.events.unregister("before-call.dynamodb.TransactWriteItems", unique_id="count-transactions")
        assert len(writes) == 1  # the task, its notices and both claims' moves: one TransactWriteItems
        assert claims.active_for_task(net.network_id, tid) == []
        assert [c["claimId"] for c in claims.active_for_network(net.network_id)
                if c["claimId"] == other["claimId"]] == [other["claimId"]]
        assert claims.release(inst, w.ReleaseRequest(claimId=other["claimId"]))["released"] is True

    def test_claims_past_one_transaction_are_released_after_the_move(self, net):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        update(inst, tid, "working")
        for n in range(40):  # 3 actions a claim: 120 do not fit next to the task's own
            claims.claim(inst, w.ClaimRequest(scope=f"many/{tid}/{n}.py", taskId=tid))
        update(inst, tid, "completed", reason="done", on_terminal=claims.release_for_task)
        assert stored(net, tid)["state"] == "completed"
        assert claims.active_for_task(net.network_id, tid) == []

    def test_a_claim_renewed_while_the_move_is_written_is_still_released(self, net):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        update(inst, tid, "working")
        claims.claim(inst, w.ClaimRequest(scope=f"src/{tid}/**", taskId=tid, ttlSeconds=60))

        class RenewedMeanwhile(type(claims.release_for_task)):
            """Renews the claim after its release was read: the move's transaction is cancelled."""
            renewals = 0

            def actions(self, net_id, task_id, now_ms):
                out = super().actions(net_id, task_id, now_ms)
                if self.renewals < 5:
                    self.renewals += 1
                    claims.claim(inst, w.ClaimRequest(scope=f"src/{tid}/**", taskId=tid, ttlSeconds=120))
                return out

        hook = RenewedMeanwhile()
        task = update(inst, tid, "completed", reason="done", on_terminal=hook)["task"]
        assert task["state"] == "completed" and hook.renewals == 2  # both attempts carrying it lost
        assert claims.active_for_task(net.network_id, tid) == []  # released after the move

    def test_a_claim_taken_for_the_task_while_the_move_is_written_is_still_released(self, net):
        # PROTOCOL.md 4.8: every claim carrying the task that is active when it ends is released,
        # also one committed between the move's read of the claims and its transaction
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        update(inst, tid, "working")

        class ClaimedMeanwhile(type(claims.release_for_task)):
            """Takes a new claim for the task after the claims were read."""
            taken = 0

            def actions(self, net_id, task_id, now_ms):
                out = super().actions(net_id, task_id, now_ms)
                self.taken += 1
                claims.claim(inst, w.ClaimRequest(scope=f"late/{tid}/{self.taken}/**", taskId=tid))
                return out

        hook = ClaimedMeanwhile()
        assert update(inst, tid, "completed", reason="done", on_terminal=hook)["task"]["state"] == "completed"
        assert hook.taken == 2 and claims.active_for_task(net.network_id, tid) == []

    def test_a_cancel_notifies_an_assignee_whose_agent_the_task_does_not_keep(self, net):
        # a task stored before the assignee's agent was kept with it: the notice reads the instance
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        pk, sk = k.task(net.network_id, tid)
        t.client().update_item(TableName=t.table_name(), Key={"PK": {"S": pk}, "SK": {"S": sk}},
                               UpdateExpression="REMOVE assigneeAgent")
        assert "assigneeAgent" not in stored(net, tid)
        tasks.cancel(OPS, net.network_id, tid, "not needed")
        notice = mailbox(net, {"instanceId": inst.instance_id, "agent": inst.agent}, tid)[-1]
        assert notice["state"] == "cancelled"

    # -- permissions ----------------------------------------------------------------------

    def test_an_instance_that_is_not_eligible_may_not_pull(self, net):
        tid, _ = pending_with_eligible(net)
        with pytest.raises(PermissionDenied):
            update(net.principals["other0"], tid, "accepted")

    def test_an_offline_instance_may_not_pull(self, net):
        tid, sleepy = pending_with_eligible(net)
        set_seen(net, sleepy, 0)
        try:
            with pytest.raises(PermissionDenied):
                update(sleepy, tid, "accepted")
        finally:
            set_seen(net, sleepy, clock.now_ms())

    def test_only_the_offered_instance_may_accept_an_offer(self, net):
        tid, inst = offered(net)
        sibling = next(net.principals[n] for n in ("worker0", "worker1") if net.principals[n] != inst)
        with pytest.raises(PermissionDenied):
            update(sibling, tid, "accepted")
        with pytest.raises(PermissionDenied):
            update(net.principals["boss0"], tid, "accepted")

    @pytest.mark.parametrize("status", ["working", "blocked", "completed", "failed"])
    def test_only_the_assignee_reports_progress(self, net, status):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        if status in ("completed", "failed"):
            update(inst, tid, "working")
        sibling = next(net.principals[n] for n in ("worker0", "worker1") if net.principals[n] != inst)
        for caller in (sibling, net.principals["boss0"], OPS):
            with pytest.raises(PermissionDenied):
                update(caller, tid, status, reason="x", network_id=net.network_id)

    def test_only_the_creator_or_a_representative_cancels(self, net):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        for caller in (inst, net.principals["other0"], net.principals["worker0"], net.principals["worker1"]):
            with pytest.raises(PermissionDenied):
                update(caller, tid, "cancelled")

    def test_permission_is_checked_before_state(self, net):
        tid, who = drive(net, "completed")
        with pytest.raises(PermissionDenied):  # the creator may never complete; the state would refuse too
            update(who["creator"], tid, "working")
        with pytest.raises(PermissionDenied):  # not the assignee
            update(net.principals["other0"], tid, "cancelled")
        with pytest.raises(InvalidTransition):  # the assignee may work, but not from here
            update(who["assignee"], tid, "working")

    def test_the_eligible_instance_hears_accept_first(self, net):
        tid, sleepy = pending_with_eligible(net)
        with pytest.raises(InvalidTransition) as err:
            update(sleepy, tid, "working")
        assert err.value.details["allowed"] == ["accepted", "cancelled"]

    @pytest.mark.parametrize("status", ["blocked", "completed", "failed"])
    @pytest.mark.parametrize("reason", [None, "", "   "])
    def test_blocked_completed_and_failed_need_a_reason(self, net, status, reason):
        tid, inst = offered(net)
        update(inst, tid, "accepted")
        update(inst, tid, "working")
        with pytest.raises(InvalidArgument) as err:
            update(inst, tid, status, reason=reason)
        assert err.value.details["fields"][0]["field"] == "reason"
        assert stored(net, tid)["state"] == "working"

    def test_a_reason_is_optional_elsewhere_and_recorded_when_given(self, net):
        tid, inst = offered(net)
        task = update(inst, tid, "accepted", reason="on it")["task"]
        assert task["history"][-1]["reason"] == "on it"
        task = update(inst, tid, "working")["task"]
        assert "reason" not in task["history"][-1]

    def test_an_unknown_task_is_404(self, net):
        with pytest.raises(NotFound):
            update(net.principals["worker0"], "task_01ABCDEFGHJKMNPQRSTVWXYZ01", "accepted")

    def test_a_missing_reason_is_400_before_an_unknown_task_is_404(self, net):
        with pytest.raises(InvalidArgument):
            update(net.principals["worker0"], "task_01ABCDEFGHJKMNPQRSTVWXYZ01", "failed")

    def test_a_terminal_task_never_changes_again(self, net):
        for state in ("completed", "failed", "cancelled"):
            tid, who = drive(net, state)
            for status in REQUESTABLE:
                for caller in (who["creator"], who["assignee"]):
                    with pytest.raises((InvalidTransition, PermissionDenied)):
                        update(caller, tid, status, reason="x")
            assert stored(net, tid)["state"] == state

    # -- the plugin surface's progress and list (5.7) -------------------------------------

    def test_progress_is_the_assignees_and_starts_the_work(self, net):
        tid, inst = offered(net)
        with pytest.raises(InvalidTransition) as err:  # accept first
            tasks.progress(inst, tid, {"step": 0})
        assert err.value.details["allowed"] == ["accepted", "cancelled"]
        update(inst, tid, "accepted")
        with pytest.raises(PermissionDenied):
            tasks.progress(net.principals["boss0"], tid, "nope")
        first = tasks.progress(inst, tid, {"step": 1})["task"]
        assert first["state"] == "working" and first["history"][-1]["actor"] == inst.actor
        second = tasks.progress(inst, tid, "tests written")["task"]
        assert second["state"] == "working" and len(second["history"]) == len(first["history"])
        assert [p["payload"] for p in second["progress"]] == [{"step": 1}, "tests written"]
        assert [m["state"] for m in mailbox(net, {"agent": "boss"}, tid)] == ["accepted", "working"]

    def test_list_shows_own_or_all_active_or_all_newest_first(self, net):
        boss, other = net.principals["boss0"], net.principals["other0"]
        done, who = drive(net, "completed")
        live = delegate(boss, toAgent="worker")["taskId"]
        theirs = delegate(other, toAgent="worker")["taskId"]

        def ids(p, **kw):
            return [s["id"] for s in tasks.list_for(p, **kw)["tasks"]]

        assert ids(boss) == [live]
        assert ids(boss, state="all") == [live, done]
        assert ids(boss, scope="all") == [theirs, live]
        assert ids(who["assignee"], state="all") == [theirs, live, done]  # all assigned to a worker instance
        assert ids(boss, scope="all", state="all", limit=2) == [theirs, live]

    # -- delegation (4.6) -----------------------------------------------------------------

    def test_an_unknown_target_is_404_and_nothing_is_written(self, net):
        def items():
            return t.client().scan(TableName=t.table_name(), Select="COUNT")["Count"]

        before = items()
        for kw in ({"toAgent": "ghost"}, {"toInstance": "inst_01ABCDEFGHJKMNPQRSTVWXYZ01"}):
            with pytest.raises(NotFound):
                delegate(net.principals["boss0"], **kw)
        assert items() == before

    def test_an_untargeted_task_needs_a_resource(self, net):
        with pytest.raises(InvalidArgument) as err:
            delegate(net.principals["boss0"])
        assert err.value.details["fields"][0]["field"] == "resource"

    def test_a_known_target_without_a_live_instance_stays_pending(self, net):
        out = delegate(net.principals["boss0"], toAgent="idle")
        assert out == {"taskId": out["taskId"], "state": "pending"}
        task = tasks.get(net.principals["worker0"], w.TaskGetRequest(taskId=out["taskId"]), lambda *_: [])["task"]
        assert task["state"] == "pending" and task["attempts"] == 0 and task["assignee"] is None
        assert out["taskId"] in [s["id"] for s in tasks.unroutable(net.network_id)]

    def test_an_untargeted_task_goes_to_an_agent_responsible_for_the_resource(self, net):
        for _ in range(3):
            out = delegate(net.principals["boss0"], resource="git@github.com:acme/api.git")
            task = stored(net, out["taskId"])
            assert task["target"] == {"resource": "github.com/acme/api"}
            assert by_instance(net, out["assignee"]).agent in {"owner", "bossy"}

    def test_a_responsibility_without_a_resource_makes_its_agent_eligible_for_any_resource(self, net):
        launched = authorize(admin.launch("tm", "anyone")["token"])
        try:
            out = delegate(net.principals["boss0"], resource="github.com/acme/unowned")
            assert out["assignee"] == launched.instance_id
        finally:
            set_seen(net, launched, 0)  # offline from now on: the other tests do not expect it

    def test_never_the_creators_own_agent_unless_named(self, net):
        bossy = net.principals["bossy0"]
        for _ in range(3):  # bossy is responsible, but it is the creator's agent
            assert by_instance(net, delegate(bossy, resource="github.com/acme/api")["assignee"]).agent == "owner"
        for _ in range(3):  # a group the creator's agent belongs to
            assert by_instance(net, delegate(net.principals["boss0"], toAgent="crew")["assignee"]).agent == "worker"
        for _ in range(3):  # naming the own agent counts, but never the creating instance
            assert delegate(net.principals["boss0"], toAgent="boss")["assignee"] == net.principals["boss1"].instance_id
        me = net.principals["boss0"]  # the creating instance itself, only when pinned
        assert delegate(me, toInstance=me.instance_id)["assignee"] == me.instance_id

    def test_a_pinned_instance_that_is_offline_leaves_the_task_pending(self, net):
        sleepy = net.principals["sleepy0"]
        set_seen(net, sleepy, 0)
        try:
            assert delegate(net.principals["boss0"], toInstance=sleepy.instance_id)["state"] == "pending"
        finally:
            set_seen(net, sleepy, clock.now_ms())

    def test_an_offer_carries_a_task_offer_and_the_expiry(self, net):
        out = delegate(net.principals["boss0"], toAgent="worker", title="Health", acceptanceCriteria=["GET /health is 200"])
        (offer,) = mailbox(net, {"instanceId": out["assignee"]}, out["taskId"])
        assert offer["kind"] == "task_offer" and offer["from"] == {"system": "router"}
        assert "GET /health is 200" in offer["body"]
        task = tasks.get(net.principals["boss0"], w.TaskGetRequest(taskId=out["taskId"]), lambda *_: [])["task"]
        assert task["attempts"] == 1 and task["offerExpiresAt"] == offer["offerExpiresAt"]
        assert [h["actor"] for h in task["history"]] == [net.principals["boss0"].actor, {"system": "router"}]


# -- choice among eligible instances (fresh tables) ----------------------------------------------

CHOICE = "network: c\nagents:\n  - {name: boss, instances: 1}\n  - {name: worker, instances: 3}\n"


def _finish(p, tid):
    update(p, tid, "accepted")
    update(p, tid, "working")
    update(p, tid, "completed", reason="done")


def test_fewest_active_tasks_then_least_recently_offered_then_id(table):
    net = apply(CHOICE)
    boss = net.principals["boss0"]
    ws = sorted((net.principals[f"worker{i}"] for i in range(3)), key=lambda p: p.instance_id)
    got = [delegate(boss, toAgent="worker")["assignee"] for _ in range(3)]
    assert got == [p.instance_id for p in ws]  # all idle and never offered: by id
    fourth = delegate(boss, toAgent="worker")  # all carry one: least recently offered -> ws[0]
    assert fourth["assignee"] == ws[0].instance_id
    # ws[1] finishes its task: it now has the fewest active tasks, though offered more recently
    tid = next(s["id"] for s in tasks.recent(net.network_id) if s["assignee"] == ws[1].instance_id)
    _finish(ws[1], tid)
    assert delegate(boss, toAgent="worker")["assignee"] == ws[1].instance_id


def test_a_stopped_instance_is_never_offered_to(table):
    net = apply(CHOICE)
    for n in range(3):
        t.update(*k.instance(net.network_id, net.principals[f"worker{n}"].instance_id),
                 "SET #s = :stopped", names={"#s": "status"}, stopped="stopped")
    assert delegate(net.principals["boss0"], toAgent="worker")["state"] == "pending"


def test_return_to_pending_gives_back_an_instances_tasks(table):
    net = apply(CHOICE)
    boss, w0 = net.principals["boss0"], net.principals["worker0"]
    first = delegate(boss, toInstance=w0.instance_id)["taskId"]
    second = delegate(boss, toInstance=w0.instance_id)["taskId"]
    update(w0, second, "accepted")
    assert sorted(tasks.return_to_pending(net.network_id, w0.instance_id)) == sorted([first, second])
    for tid in (first, second):
        task = stored(net, tid)
        assert task["state"] == "pending" and "assignee" not in task
        assert task["history"][-1] == {"state": "pending", "actor": {"system": "router"},
                                       "reason": "instance stopped", "at": task["updatedAt"]}
    item = t.get(*k.instance(net.network_id, w0.instance_id))
    assert not item.get("active") and not item.get("held")


# -- races (moto in server mode) -----------------------------------------------------------------

RACE = "network: race\nagents:\n  - {name: boss, instances: 1}\n  - {name: worker, instances: 4}\n"


def _race(calls):
    """Run the calls at once; returns [result or exception]."""
    barrier = threading.Barrier(len(calls))

    def go(fn):
        barrier.wait()
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - the losers' errors are the result
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(go, calls))


def test_two_accepts_racing_on_an_offered_task_have_one_winner(server_table):
    net = apply(RACE)
    for _ in range(3):
        out = delegate(net.principals["boss0"], toAgent="worker")
        inst = by_instance(net, out["assignee"])
        results = _race([lambda: update(inst, out["taskId"], "accepted")] * 2)
        wins = [r for r in results if isinstance(r, dict)]
        losses = [r for r in results if not isinstance(r, dict)]
        assert len(wins) == 1 and len(losses) == 1
        assert isinstance(losses[0], InvalidTransition) and losses[0].details["current"] == "accepted"
        assert [h["state"] for h in stored(net, out["taskId"])["history"]] == ["pending", "offered", "accepted"]


def test_two_instances_racing_to_pull_a_pending_task_have_one_winner(server_table):
    net = apply(RACE)
    ws = [net.principals[f"worker{i}"] for i in range(4)]
    for p in ws:
        t.update(*k.instance(net.network_id, p.instance_id), "SET lastSeenAt = :v", v=0)
    for _ in range(3):
        tid = delegate(net.principals["boss0"], toAgent="worker")["taskId"]
        for p in ws:
            t.update(*k.instance(net.network_id, p.instance_id), "SET lastSeenAt = :v", v=clock.now_ms())
        results = _race([lambda p=p: update(p, tid, "accepted") for p in ws[:2]])
        wins = [r for r in results if isinstance(r, dict)]
        assert len(wins) == 1, results
        (loss,) = [r for r in results if not isinstance(r, dict)]
        assert isinstance(loss, InvalidTransition) and loss.status == 409  # lost the race: 409, not 403
        task = stored(net, tid)
        assert task["assignee"] == wins[0]["task"]["assignee"]
        holders = [p for p in ws[:2] if tid in (instance(net, p).get("held") or set())]
        assert [p.instance_id for p in holders] == [task["assignee"]]
        for p in ws:
            t.update(*k.instance(net.network_id, p.instance_id), "SET lastSeenAt = :v", v=0)


def test_an_accept_racing_a_cancel_loses_no_success(server_table):
    net = apply(RACE)
    # Both may win, in one order only: an accept committed before the cancel's read is a legal
    # accepted -> cancelled. What must never happen: both win from "offered" (the later put would
    # overwrite the earlier: a success the history lost), or an accept after the cancel.
    for _ in range(3):
        out = delegate(net.principals["boss0"], toAgent="worker")
        inst = by_instance(net, out["assignee"])
        accept, cancel = _race([lambda: update(inst, out["taskId"], "accepted"),
                                lambda: update(net.principals["boss0"], out["taskId"], "cancelled")])
        states = [h["state"] for h in stored(net, out["taskId"])["history"]]
        assert isinstance(cancel, dict) or isinstance(accept, dict), (accept, cancel)
        if isinstance(accept, dict) and isinstance(cancel, dict):
            assert states == ["pending", "offered", "accepted", "cancelled"]
        elif isinstance(accept, dict):
            assert isinstance(cancel, InvalidTransition) and cancel.details["current"] == "accepted"
            assert states == ["pending", "offered", "accepted"]
        else:
            assert isinstance(accept, InvalidTransition) and accept.details["current"] == "cancelled"
            assert states == ["pending", "offered", "cancelled"]
        assert out["taskId"] not in (instance(net, inst).get("held") or set()) or states[-1] == "accepted"


def test_a_task_completing_under_a_stream_of_its_claims_releases_every_earlier_one(server_table):
    # PROTOCOL.md 4.8 with real threads on DynamoDB Local: while the assignee completes its task,
    # two more of its threads keep claiming files for that task (each claim bumps the HEAD counter
    # the move's transaction checks, so the move keeps being cancelled and retried). The move still
    # commits, and every claim whose call returned before it started is released by it; a later
    # one may stay (claims do not check the task's state). A claim committed between the move's
    # read and its write: test_a_claim_taken_for_the_task_while_the_move_is_written_is_still_released.
    net = apply(RACE)
    out = delegate(net.principals["boss0"], toAgent="worker")
    inst = by_instance(net, out["assignee"])
    tid = out["taskId"]
    update(inst, tid, "accepted")
    update(inst, tid, "working")
    acknowledged: list[tuple[str, float]] = []  # (claim id, when its call returned)
    stop = threading.Event()

    def claimer(n: int) -> None:
        i = 0
        while not stop.is_set() and i < 200:
            got = claims.claim(inst, w.ClaimRequest(scope=f"race/{n}/{i}.py", taskId=tid))
            acknowledged.append((got["claimId"], time.monotonic()))
            i += 1

    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(claimer, n) for n in range(2)]
        while len(acknowledged) < 6:
            time.sleep(0.005)
        started = time.monotonic()
        done = update(inst, tid, "completed", reason="done: PR #9", on_terminal=claims.release_for_task)
        time.sleep(0.05)
        stop.set()
        for f in running:
            f.result()
    assert done["task"]["state"] == "completed"
    active = {c["claimId"] for c in claims.active_for_task(net.network_id, tid)}
    before = [cid for cid, at in acknowledged if at < started]
    assert len(before) >= 6 and [cid for cid in before if cid in active] == []
