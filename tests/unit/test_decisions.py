"""Domain decisions as pure functions over entities: no moto, no table, no network.

Reply routing (PROTOCOL.md 4.5) over a :class:`Thread`, the posters bookkeeping that feeds it,
a stopped instance's task going back to pending (PROTOCOL.md 6 control_stop_agent), and where a
task document lands in the routing and listing indexes (docs/architecture.md "The table").
"""

from __future__ import annotations

import pytest

from relaynet import messaging, tasks
from relaynet.store import keys as k
from relaynet.store import tasks as task_store
from relaynet.store.mailboxes import Thread
from relaynet.store.tasks import Before

NET = "net_1"


def thread(**fields) -> Thread:
    return Thread(id="thr_1", subject="s", participants={"a", "b"}, **fields)


class TestReplyTarget:
    def test_a_reply_goes_to_the_last_poster_other_than_the_speaker(self):
        assert messaging.reply_target(thread(lastPoster="a", prevPoster="b"), "b") == {"agent": "a"}

    def test_when_the_speaker_posted_last_it_goes_to_the_poster_before(self):
        assert messaging.reply_target(thread(lastPoster="b", prevPoster="a"), "b") == {"agent": "a"}

    def test_when_the_speaker_posted_everything_it_goes_to_the_last_addressee(self):
        assert messaging.reply_target(thread(lastPoster="b", lastTo={"group": "crew"}), "b") == {"group": "crew"}

    def test_a_thread_nobody_else_posted_in_and_nobody_was_addressed_in_has_no_target(self):
        assert messaging.reply_target(thread(lastPoster="b"), "b") is None
        assert messaging.reply_target(thread(), "b") is None

    def test_a_representative_is_a_poster_like_any_other(self):
        assert messaging.reply_target(thread(lastPoster="rep:ops", prevPoster="a"), "a") == {"agent": "rep:ops"}


class TestPosters:
    def test_a_new_poster_pushes_the_last_one_back(self):
        assert messaging.posters_after(thread(lastPoster="a", prevPoster="c"), "b") == ("b", "a")

    def test_the_same_poster_twice_keeps_the_one_before(self):
        assert messaging.posters_after(thread(lastPoster="a", prevPoster="b"), "a") == ("a", "b")

    def test_the_first_post_of_a_new_thread(self):
        assert messaging.posters_after(None, "a") == ("a", None)


class TestThreadEntity:
    def test_a_stored_meta_item_validates_and_keeps_what_routing_needs(self):
        item = {"PK": "NET#n#THR#thr_1", "SK": "META", "id": "thr_1", "subject": "s", "participants": {"a"},
                "version": 3, "lastPoster": "a", "lastTo": {"agent": "b"}, "createdAt": "2026-01-01T00:00:00Z"}
        meta = Thread.model_validate(item)
        assert (meta.version, meta.lastPoster, meta.lastTo, meta.participants) == (3, "a", {"agent": "b"}, {"a"})

    def test_a_meta_with_a_malformed_version_is_refused(self):
        with pytest.raises(ValueError):
            Thread.model_validate({"id": "thr_1", "version": "three"})


def offered_task() -> dict:
    return {"id": "task_1", "networkId": NET, "title": "t", "objective": "o", "state": "offered",
            "assignee": "inst_a", "offerExpiresAt": 2_000, "declined": ["inst_a", "inst_b"],
            "creator": {"agent": "boss", "instanceId": "inst_boss"}, "target": {"agent": "worker"},
            "history": [{"state": "pending"}, {"state": "offered"}], "threadId": "thr_1", "version": 4}


class TestRequeue:
    def test_a_stopped_instances_task_goes_back_to_pending_due_now_with_the_instance_declined_last(self):
        task = offered_task()
        notices = tasks._requeue(task, "inst_a", "instance stopped", 5_000)
        assert task["state"] == "pending" and "assignee" not in task and "offerExpiresAt" not in task
        assert task["declined"] == ["inst_b", "inst_a"]
        assert task["dueAt"] == 5_000
        assert task["history"][-1]["state"] == "pending" and task["history"][-1]["reason"] == "instance stopped"
        assert task["history"][-1]["actor"] == tasks.ROUTER
        # the creator's agent is told, in the task's thread and in its mailbox
        puts = [a["Put"]["Item"] for a in notices]
        assert len(puts) == 2 and all(p["kind"]["S"] == "task_update" for p in puts)
        assert {p["PK"]["S"] for p in puts} == {f"NET#{NET}#THR#thr_1", f"NET#{NET}#MBOX#A#boss"}

    def test_a_task_of_a_representative_needs_no_notice(self):
        task = {**offered_task(), "creator": {"representative": "ops"}}
        assert tasks._requeue(task, "inst_a", "instance stopped", 5_000) == []

    @pytest.mark.parametrize("change", [{"state": "completed"}, {"state": "pending"}, {"assignee": "inst_other"}])
    def test_only_a_live_task_of_that_instance_is_requeued(self, change):
        assert tasks._requeueable(offered_task(), "inst_a")
        assert not tasks._requeueable({**offered_task(), **change}, "inst_a")
        assert not tasks._requeueable(None, "inst_a")


class TestTaskItem:
    def test_an_offered_task_is_due_in_the_routing_index_when_its_offer_expires(self):
        item = task_store.item(offered_task(), 1_000)
        # its routing shard (ROUTE#<n>, n from the network and task: store/keys.py), due at the expiry
        assert item["GSI1PK"] == k.route_pk(NET, "task_1") and item["GSI1PK"].startswith("ROUTE#")
        assert item["GSI1SK"] == f"{2_000:013d}#{NET}#task_1"
        assert (item["GSI2PK"], item["GSI2SK"]) == (f"NET#{NET}#TASKS", "task_1")

    def test_a_parked_task_sits_in_its_wait_group_and_a_working_one_in_no_routing_index(self):
        parked = {**offered_task(), "state": "pending", "wait": "w1", "parkedAt": 7}
        assert task_store.item(parked, 1_000)["GSI1PK"] == f"WAIT#{NET}#w1"
        working = {**offered_task(), "state": "working", "GSI1PK": "ROUTE", "GSI1SK": "stale"}
        assert "GSI1PK" not in task_store.item(working, 1_000)

    def test_a_new_task_is_put_only_if_absent_and_a_read_one_only_at_its_version(self):
        task = offered_task()
        new = task_store.put(dict(task), Before(None), 1_000)["Put"]
        assert new["ConditionExpression"] == "attribute_not_exists(PK)" and new["Item"]["version"] == {"N": "1"}
        again = task_store.put(task, Before(offered_task()), 1_000)["Put"]
        assert again["ConditionExpression"] == "version = :v"
        assert again["ExpressionAttributeValues"][":v"] == {"N": "4"} and task["version"] == 5
