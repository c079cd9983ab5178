"""The repositories of relaynet.store on DynamoDB Local (``server_table``): each write's condition
holds against the real store, a stale read loses, and what one write puts another reads back.

The domain's behaviour over them is tested through the tools elsewhere; these tests pin what the
domain relies on from each repository: a thread written at a stale version is refused, a mailbox
entry is taken once, a task put at a stale version is refused, a claim announcement is granted
once and never after it was touched or defeated, a high-water mark only rises, a claim's region
reads nothing of a disjoint subtree, an ended claim leaves the tree, a used confirmation cannot be used again, and a stop built
from a stale read of the instance's ``active`` set is refused.
"""

from __future__ import annotations

import pytest

from relaynet import clock, ids, messaging
from relaynet.control import instances
from relaynet.identity import Principal, authorize
from relaynet.models import worker as w
from relaynet.store import claims as claim_store
from relaynet.store import directory as dir_store
from relaynet.store import events as event_store
from relaynet.store import keys as k
from relaynet.store import mailboxes as mail_store
from relaynet.store import table as t
from relaynet.store import tasks as task_store
from relaynet.store import unit_of_work as uow
from relaynet.store.mailboxes import Thread
from relaynet.store.tasks import Before
from tests.conftest import apply

SPEC = """
network: repo
agents:
  - {name: boss, instances: 1}
  - {name: coder, instances: 2}
representatives:
  - {name: ops, grants: {repo: operate}}
"""
OPS = Principal("representative", rep="ops")


@pytest.fixture
def net(server_table):
    return apply(SPEC)


def message(thread_id: str, body: str) -> dict:
    return messaging.new_message("ask", thread_id, {"agent": "boss"}, {"agent": "coder"}, body, "s")


class TestMailboxes:
    def test_a_thread_post_at_a_stale_version_is_refused_and_changes_nothing(self, net):
        nid = net.network_id
        t.transact([mail_store.create_thread(Thread(id="thr_a", subject="s", participants={"boss"}), nid)])
        seen = mail_store.get_thread(nid, "thr_a")
        t.transact([mail_store.post_to_thread(nid, seen, "boss", None, {"agent": "coder"}, {"coder"})])
        with pytest.raises(t.TransactionCancelled) as lost:
            t.transact([mail_store.post_to_thread(nid, seen, "coder", "boss", None, {"coder"})])
        assert lost.value.reasons == ["ConditionalCheckFailed"]
        now = mail_store.get_thread(nid, "thr_a")
        assert (now.version, now.lastPoster, now.lastTo, now.participants) == (1, "boss", {"agent": "coder"},
                                                                              {"boss", "coder"})

    def test_a_delivered_entry_is_taken_once_and_a_large_one_reads_its_thread_copy(self, net):
        nid = net.network_id
        small, large = message("thr_b", "hi"), message("thr_b", "x" * 5000)
        for msg in (small, large):
            mail_store.deliver(nid, msg, [{"agent": "coder"}], [])
        entries = mail_store.undelivered(nid, {"agent": "coder"}, 10, not_from_instance="inst_none")
        assert [e["SK"] for e in entries] == sorted(e["SK"] for e in entries)
        assert [e.get("ref") for e in entries] == [None, "thread"]  # the 5 KB body is not copied per mailbox
        taken = mail_store.take(entries)
        assert [m["body"] for m in mail_store.documents(nid, taken)] == ["hi", "x" * 5000]
        assert mail_store.take(entries) == []  # another fetcher with the same read gets nothing
        assert mail_store.count_undelivered(nid, {"agent": "coder"}, 10) == 0
        assert [m["id"] for m in mail_store.thread_messages(nid, "thr_b")] == [small["id"], large["id"]]

    def test_a_send_record_makes_a_second_first_transaction_already_sent(self, net):
        nid = net.network_id
        record = mail_store.send_record_key(nid, "network_ask#inst#key-1")
        msg = message("thr_c", "once")
        mail_store.deliver(nid, msg, [{"agent": "coder"}], [], {"messageId": msg["id"]}, record, "h1")
        with pytest.raises(mail_store.AlreadySent):
            mail_store.deliver(nid, message("thr_c", "twice"), [{"agent": "coder"}], [], {}, record, "h1")
        stored = mail_store.get_send_record(record)
        assert (stored.messageId, stored.requestHash, stored.response) == (msg["id"], "h1", {"messageId": msg["id"]})
        assert mail_store.count_undelivered(nid, {"agent": "coder"}, 10) == 1


class TestTasks:
    def test_a_task_put_at_a_stale_version_is_refused(self, net):
        nid = net.network_id
        task = {"id": ids.new_id("task"), "networkId": nid, "title": "t", "state": "pending", "dueAt": 1}
        uow.apply([task_store.put(task, Before(None), 1)])
        read = task_store.get(nid, task["id"])
        assert uow.commit([task_store.put({**read, "state": "offered", "offerExpiresAt": 9, "assignee": "i"},
                                          Before(read), 2)])
        lost = uow.commit([task_store.put({**read, "state": "cancelled"}, Before(read), 3)])
        assert not lost and lost.refused_at(0)
        assert task_store.get(nid, task["id"])["state"] == "offered"
        assert not uow.commit([task_store.put(dict(task), Before(None), 4)])  # a second create of the same id
        assert [i["id"] for i in task_store.walk_newest(nid, None, 10)] == [task["id"]]
        assert task_store.exists(nid, task["id"]) and not task_store.exists(nid, "task_none")


class TestClaims:
    def test_an_announcement_is_granted_once_and_a_touched_or_defeated_one_never(self, net):
        nid, now = net.network_id, clock.now_ms()
        pk = k.claim_tree_pk(nid, "path", None)

        def announced(inst, n):
            item = {"PK": pk, "SK": claim_store.tree_sk("a", inst, "a/**"), "kind": "claim", "state": "pending",
                    "attempt": f"att{n}", "rev": 0, "id": f"clm_{n}", "scopeType": "path", "scope": "a/**",
                    "holder": {"instanceId": inst}, "anchor": "a", "announcedAt": now}
            assert claim_store.announce(item) is None
            return item

        mine, rival = announced("i1", 1), announced("i2", 2)
        assert claim_store.announce({**mine, "attempt": "att9"})["attempt"] == "att1"  # one per instance and scope
        grant = claim_store.grant_action(mine, token=now, expires_ms=now + 60_000, task_id=None, ref_ttl=0)
        uow.apply([claim_store.defeat_action(rival, "clm_1"), grant])
        # the rival's grant: it was defeated
        assert not uow.commit([claim_store.grant_action(rival, token=now, expires_ms=now, task_id=None, ref_ttl=0)])
        assert not uow.commit([grant])  # granted once only
        third = announced("i3", 3)
        uow.apply([claim_store.touch_action(third)])
        # touched since it was read (rev 0)
        assert not uow.commit([claim_store.grant_action(third, token=now, expires_ms=now, task_id=None, ref_ttl=0)])
        assert claim_store.withdraw(pk, third["SK"], "att3") and not claim_store.withdraw(pk, third["SK"], "att3")

    def test_a_high_water_mark_only_rises_and_an_ended_claim_leaves_the_tree(self, net):
        nid, now = net.network_id, clock.now_ms()
        pk = k.claim_tree_pk(nid, "path", None)
        uow.apply([claim_store.high_water_action(pk, "a", 5, now)])
        assert not uow.commit([claim_store.high_water_action(pk, "a", 5, now)])
        uow.apply([claim_store.high_water_action(pk, "a", 6, now)])
        tree = {"PK": pk, "SK": claim_store.tree_sk("a", "i1", "a/**"), "kind": "claim", "state": "granted",
                "attempt": "x", "rev": 0, "id": "clm_1", "scopeType": "path", "scope": "a/**",
                "holder": {"instanceId": "i1"}, "expiresAt": now + 60_000, "fencingToken": 7}
        uow.apply([t.tx_put(tree), claim_store.ref_put(nid, tree, 0)])
        assert [i["SK"] for i in claim_store.read_around(pk, ("a",))] == [tree["SK"], claim_store.high_water_sk("a")]
        assert claim_store.read_around(pk, ("b",)) == []  # a disjoint subtree reads nothing of it
        uow.apply(claim_store.end_actions(nid, tree, now, "released"))
        assert [i["SK"] for i in claim_store.read_around(pk, ("a", "x.py"))] == [claim_store.high_water_sk("a")]
        assert claim_store.get_ended(nid, "clm_1")["endReason"] == "released" and claim_store.exists(nid, "clm_1")
        assert not uow.commit(claim_store.end_actions(nid, tree, now, "released"))  # ending it twice


class TestDirectory:
    def test_a_confirmation_is_consumed_once_and_only_for_its_operation(self, net):
        nid, now = net.network_id, clock.now_ms()
        dir_store.put_confirmation("ops", "conf_1", "stop", nid, "inst_x", now + 60_000)
        with pytest.raises(t.TransactionCancelled):  # for another operation
            t.transact([dir_store.consume_confirmation_action("ops", "conf_1", "restart", nid, "inst_x", now)])
        t.transact([dir_store.consume_confirmation_action("ops", "conf_1", "stop", nid, "inst_x", now)])
        with pytest.raises(t.TransactionCancelled):  # used
            t.transact([dir_store.consume_confirmation_action("ops", "conf_1", "stop", nid, "inst_x", now)])
        dir_store.put_confirmation("ops", "conf_2", "stop", nid, "inst_x", now - 1)
        assert not dir_store.consume_confirmation("ops", "conf_2", "stop", nid, "inst_x", now)  # expired

    def test_a_stop_built_from_a_stale_active_set_is_refused(self, net):
        nid = net.network_id
        inst_id = net.principals["coder0"].instance_id
        t.transact([task_store.instance_sets(nid, inst_id, "task_1", add=("active",))])
        seen = sorted(dir_store.instance(nid, inst_id)["active"])
        t.transact([task_store.offer_to_instance(nid, inst_id, "task_2", clock.now_ms())])  # lands in between
        with pytest.raises(t.TransactionCancelled):
            t.transact([dir_store.stop_instance_action(nid, inst_id, clock.now_ms(), seen)])
        assert dir_store.instance(nid, inst_id).get("status") != "stopped"
        fresh = sorted(dir_store.instance(nid, inst_id)["active"])
        t.transact([dir_store.stop_instance_action(nid, inst_id, clock.now_ms(), fresh)])
        stopped = dir_store.instance(nid, inst_id)
        assert stopped["status"] == "stopped" and not stopped.get("active") and not stopped.get("held")


def test_a_stop_releases_claims_and_requeues_tasks_in_the_one_transaction_that_consumes_it(net, monkeypatch):
    """control_stop_agent's second step: one TransactWriteItems, and a used confirmation is 400."""
    from relaynet import claims, tasks
    from relaynet.errors import InvalidArgument

    nid = net.network_id
    coder = net.principals["coder0"]
    claims.claim(coder, w.ClaimRequest(scope="src/**"))
    task = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective="fix it", toInstance=coder.instance_id))
    assert task["state"] == "offered"
    transactions = []
    real = t.transact
    monkeypatch.setattr(t, "transact", lambda actions, token=None: (transactions.append(len(actions)),
                                                                   real(actions, token))[1])
    first = instances.stop_agent(OPS, None, coder.instance_id, None)
    out = instances.stop_agent(OPS, None, coder.instance_id, first["confirmationId"])
    assert out == {"instanceId": coder.instance_id, "status": "stopped", "releasedClaims": 1,
                   "requeuedTasks": [task["taskId"]]}
    assert len(transactions) == 1  # confirmation, instance, token, event, claim (4), task put + 2 notices
    assert task_store.get(nid, task["taskId"])["state"] == "pending"
    assert claims.active_for_network(nid) == [] and claim_store.refs(nid) == []
    assert authorize(net.token("coder0")) is None  # the token is revoked
    kinds = [e["kind"] for e in event_store.newest_first(nid, None, 10, clock.now_ms() // 1000)]
    assert kinds[:2] == ["instance", "claim"]
    with pytest.raises(InvalidArgument):
        instances.stop_agent(OPS, None, coder.instance_id, first["confirmationId"])


class TestAg2Deliveries:
    """store/ag2.py's delivery markers: what makes a connection get each envelope once when the
    hello's replay, the stream notifier and a retried stream batch all find it (docs/protocol.md 12)."""

    def test_of_eight_threads_claiming_one_delivery_exactly_one_wins(self, server_table):
        import threading

        from relaynet.store import ag2 as ag2_store

        ag2_store.put_connection("c-race", clock.now_ms())
        won: list[bool] = []
        barrier = threading.Barrier(8)

        def claim() -> None:
            barrier.wait()
            won.append(ag2_store.claim_delivery("c-race", "coder", "env_1", clock.now_ms()))

        threads = [threading.Thread(target=claim) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(won) == [False] * 7 + [True]
        # per recipient and per connection: another agent on it, or the agent's next connection, may have it
        assert ag2_store.claim_delivery("c-race", "reviewer", "env_1", clock.now_ms())
        ag2_store.put_connection("c-next", clock.now_ms())
        assert ag2_store.claim_delivery("c-next", "coder", "env_1", clock.now_ms())

    def test_a_released_delivery_can_be_claimed_again_and_a_disconnect_deletes_the_markers(self, server_table):
        from relaynet.store import ag2 as ag2_store

        ag2_store.put_connection("c-gone", clock.now_ms())
        for n in range(30):  # more than one BatchWriteItem's 25
            assert ag2_store.claim_delivery("c-gone", "coder", f"env_{n:02d}", clock.now_ms())
        ag2_store.release_delivery("c-gone", "coder", "env_00")
        assert ag2_store.claim_delivery("c-gone", "coder", "env_00", clock.now_ms())
        assert ag2_store.delete_connection("c-gone")["connection_id"] == "c-gone"
        assert t.query("AG2#CONN#c-gone") == []
        assert ag2_store.delete_connection("c-gone") is None


def test_commit_listeners_see_each_committed_put_as_the_stream_will_and_never_a_refused_one(server_table, caplog):
    """relaynet.store.table.on_commit (push at the write, docs/architecture.md): the items a
    PutItem or a transaction's Puts wrote, in DynamoDB JSON, after DynamoDB answered; nothing for
    a refused write; a listener that raises is logged and the write still succeeds."""
    seen: list[list[dict]] = []
    remove = t.on_commit(seen.append)
    try:
        assert t.put({"PK": "T#1", "SK": "A", "n": 1}, "attribute_not_exists(PK)") is True
        assert t.put({"PK": "T#1", "SK": "A", "n": 2}, "attribute_not_exists(PK)") is False  # refused: no call
        t.transact([t.tx_put({"PK": "T#1", "SK": "B", "n": 3}),
                    t.tx_delete("T#1", "A"),
                    t.tx_put({"PK": "T#1", "SK": "C", "n": 4})])
        with pytest.raises(t.TransactionCancelled):
            t.transact([t.tx_put({"PK": "T#1", "SK": "B", "n": 5}, "attribute_not_exists(PK)")])
        assert seen == [[t.encode({"PK": "T#1", "SK": "A", "n": 1})],
                        [t.encode({"PK": "T#1", "SK": "B", "n": 3}), t.encode({"PK": "T#1", "SK": "C", "n": 4})]]

        def broken(images):
            raise RuntimeError("listener down")

        remove_broken = t.on_commit(broken)
        assert t.put({"PK": "T#1", "SK": "D"}) is True and t.get("T#1", "D") == {"PK": "T#1", "SK": "D"}
        assert "a commit listener failed" in caplog.text and len(seen) == 3  # the others still heard it
        remove_broken()
    finally:
        remove()
    t.put({"PK": "T#1", "SK": "E"})
    assert len(seen) == 3
