"""Delivery you can trust (issue 5; PROTOCOL.md 3, 4.3, 4.4, 4.5): exactly once, in order, never
to the sender, nothing stored for a 404, group fan-out past one transaction, retries that resume,
presence written at most once a minute."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from relaynet import clock, identity, ids, messaging
from relaynet.errors import Conflict, NotFound, PermissionDenied, RateLimited
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import apply

MEMBERS = [f"m{i:03d}" for i in range(150)]


pytestmark = pytest.mark.usefixtures("moto_fast_transactions")


def _crowd_spec(members=MEMBERS) -> str:
    """``boss`` (1 instance) and 150 member agents (m000 and m149 with an instance) in group
    ``crowd``, of which ``boss`` is a member too."""
    lines = ["network: crowd", "agents:", "  - {name: boss, instances: 1}"]
    lines += [f"  - {{name: {m}, instances: {1 if m in ('m000', 'm149') else 0}}}" for m in members]
    lines += ["groups:", f"  - {{slug: crowd, members: [boss, {', '.join(members)}]}}"]
    return "\n".join(lines) + "\n"


def _all_keys() -> set[tuple[str, str]]:
    """Every (PK, SK) in the table (moto in-process: a scan is cheap)."""
    out, kwargs = set(), {"TableName": t.table_name(), "ProjectionExpression": "PK, SK"}
    while True:
        page = t.client().scan(**kwargs)
        out |= {(i["PK"]["S"], i["SK"]["S"]) for i in page["Items"]}
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _mailbox(net: str, agent: str) -> list[dict]:
    return t.query(k.mailbox_pk(net, {"agent": agent}), sk_prefix="MSG#")


def _thread_messages(net: str, thread_id: str) -> list[dict]:
    return t.query(k.thread_pk(net, thread_id), sk_prefix="MSG#")


# exactly once, in order --------------------------------------------------------------------

def test_two_instances_fetching_while_a_third_sends_200_each_message_once_and_in_order(server_table):
    net = apply("network: race\nagents:\n  - {name: coder, instances: 2}\n  - {name: boss, instances: 1}\n")
    boss, fetchers = net.principals["boss0"], [net.principals["coder0"], net.principals["coder1"]]
    sent: list[str] = []
    done = threading.Event()

    def send():
        try:
            for i in range(200):
                sent.append(messaging.ask(boss, w.AskRequest(body=f"m{i}", toAgent="coder"))["messageId"])
        finally:
            done.set()

    def fetch(p):
        got: list[str] = []
        for _ in range(5000):  # a bound, never reached: the loop ends on an empty inbox after the sender
            finished = done.is_set()
            out = messaging.inbox(p)
            got += [m["id"] for m in out["messages"]]
            if finished and not out["messages"] and not out["more"]:
                return got
            done.wait(0.05)  # poll as an agent would, leaving the sender room to send
        raise AssertionError("fetcher did not drain the mailbox")

    with ThreadPoolExecutor(3) as pool:
        sender = pool.submit(send)
        results = [pool.submit(fetch, p) for p in fetchers]
        sender.result()
        a, b = (r.result() for r in results)
    assert len(sent) == 200
    assert sorted(a + b) == sorted(sent)  # none lost
    assert len(a) + len(b) == 200 and not set(a) & set(b)  # none twice
    position = {m: i for i, m in enumerate(sent)}
    for got in (a, b):
        assert [position[m] for m in got] == sorted(position[m] for m in got)  # each in sending order
    assert sent == sorted(sent)  # ids strictly increase in one process


def test_a_burst_within_one_millisecond_arrives_in_order_exactly_once(demo, monkeypatch):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    frozen = clock.now_ms() + 1000
    monkeypatch.setattr(ids, "now_ms", lambda: frozen)  # every id of the burst in one millisecond
    sent = [messaging.ask(planner, w.AskRequest(body=f"burst {i}", toAgent="reviewer"))["messageId"] for i in range(50)]
    assert len({m[4:14] for m in sent}) == 1  # one ULID timestamp
    first = messaging.inbox(reviewer)
    assert [m["id"] for m in first["messages"]] == sent and first["more"] is False
    assert [m["body"] for m in first["messages"]] == [f"burst {i}" for i in range(50)]
    assert messaging.inbox(reviewer) == {"messages": [], "more": False}


def test_the_inbox_hands_out_100_at_a_time_and_never_the_callers_own_messages(demo):
    coder0, coder1, planner = demo.principals["coder0"], demo.principals["coder1"], demo.principals["planner0"]
    own = [messaging.ask(coder0, w.AskRequest(body=f"own {i}", toAgent="coder"))["messageId"] for i in range(3)]
    sent = [messaging.ask(planner, w.AskRequest(body=f"m{i}", toAgent="coder"))["messageId"] for i in range(120)]
    first = messaging.inbox(coder0)
    assert [m["id"] for m in first["messages"]] == sent[:100] and first["more"] is True
    second = messaging.inbox(coder0)
    assert [m["id"] for m in second["messages"]] == sent[100:] and second["more"] is False
    assert messaging.inbox(coder0) == {"messages": [], "more": False}
    assert [m["id"] for m in messaging.inbox(coder1)["messages"]] == own  # left for the agent's other instance


def test_mail_to_the_instance_and_to_the_agent_merge_oldest_first(demo):
    planner, coder0 = demo.principals["planner0"], demo.principals["coder0"]
    order = []
    for i in range(6):
        req = (w.AskRequest(body=f"i{i}", toInstance=coder0.instance_id) if i % 2
               else w.AskRequest(body=f"a{i}", toAgent="coder"))
        order.append(messaging.ask(planner, req)["messageId"])
    assert [m["id"] for m in messaging.inbox(coder0)["messages"]] == order


def test_reading_keeps_the_message_in_its_thread_and_every_message_says_how_to_act(demo):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    out = messaging.ask(planner, w.AskRequest(body="review?", toAgent="reviewer"))
    (msg,) = messaging.inbox(reviewer)["messages"]
    assert f"network_reply(threadId='{out['threadId']}'" in msg["instructions"]
    assert "plain text output reaches no one" in msg["instructions"]
    assert [m["id"] for m in _thread_messages(demo.network_id, out["threadId"])] == [out["messageId"]]
    messaging.reply(reviewer, w.ReplyRequest(threadId=out["threadId"], body="done"))
    (answer,) = messaging.inbox(planner)["messages"]
    assert answer["kind"] == "reply" and "network_reply" in answer["instructions"]
    assert len(_thread_messages(demo.network_id, out["threadId"])) == 2


@pytest.mark.parametrize("kind,expect", [
    ("task_offer", "network_task_update(taskId='task_1', status='accepted') before doing any work"),
    ("task_update", "network_task_get(taskId='task_1')"),
    ("notice", "plain text output reaches no one"),
])
def test_instructions_name_the_tool_for_every_kind(kind, expect):
    text = messaging.instructions({"kind": kind, "threadId": "thr_1", "taskId": "task_1"})
    assert expect in text
    if kind == "task_offer":
        assert "never work on a scope another instance holds" in text


def test_a_large_message_is_stored_once_and_mailboxes_point_at_it(demo):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    body = "x" * 20_000
    out = messaging.ask(planner, w.AskRequest(body=body, toAgent="reviewer"))
    (entry,) = _mailbox(demo.network_id, "reviewer")
    assert entry["ref"] == "thread" and "body" not in entry
    (msg,) = messaging.inbox(reviewer)["messages"]
    assert msg["id"] == out["messageId"] and msg["body"] == body and msg["kind"] == "ask"
    assert "network_reply" in msg["instructions"]


# 404 stores nothing, 403 for non-participants ----------------------------------------------

def test_a_send_to_an_unknown_agent_group_instance_task_or_thread_is_404_and_stores_nothing(demo):
    planner = demo.principals["planner0"]
    before = _all_keys()
    ghost_inst, ghost_thr, ghost_task = ("inst_01ABCDEFGHJKMNPQRSTVWXYZ01", "thr_01ABCDEFGHJKMNPQRSTVWXYZ01",
                                         "task_01ABCDEFGHJKMNPQRSTVWXYZ01")
    for req in (w.AskRequest(body="x", toAgent="nobody"),  # neither an agent nor a group
                w.AskRequest(body="x", toAgent="ghost-group"),
                w.AskRequest(body="x", toInstance=ghost_inst),
                w.AskRequest(body="x", threadId=ghost_thr),
                w.AskRequest(body="x", toAgent="reviewers", threadId=ghost_thr),
                w.AskRequest(body="x", toAgent="coder", taskId=ghost_task)):
        with pytest.raises(NotFound) as err:
            messaging.ask(planner, req)
        if req.toAgent in ("nobody", "ghost-group"):
            assert {"coder", "reviewers"} <= set(err.value.details["available"])
    with pytest.raises(NotFound):
        messaging.reply(planner, w.ReplyRequest(threadId=ghost_thr, body="x"))
    with identity.request_key("network_ask#x#k404"):  # a keyed send that fails leaves no send record
        with pytest.raises(NotFound):
            messaging.ask(planner, w.AskRequest(body="x", toAgent="nobody"))
    assert _all_keys() == before


def test_only_a_participant_may_post_in_a_thread(demo):
    planner, coder = demo.principals["planner0"], demo.principals["coder0"]
    thread = messaging.ask(planner, w.AskRequest(body="private", toAgent="reviewer"))["threadId"]
    before = _all_keys()
    with pytest.raises(PermissionDenied):
        messaging.reply(coder, w.ReplyRequest(threadId=thread, body="me too"))
    with pytest.raises(PermissionDenied):
        messaging.ask(coder, w.AskRequest(body="me too", threadId=thread))
    assert _all_keys() == before


def test_an_agent_addressed_through_a_group_or_an_instance_becomes_a_participant(demo):
    planner, reviewer, coder1 = demo.principals["planner0"], demo.principals["reviewer0"], demo.principals["coder1"]
    by_group = messaging.ask(planner, w.AskRequest(body="via group", toAgent="reviewers"))["threadId"]
    assert messaging.reply(reviewer, w.ReplyRequest(threadId=by_group, body="ok"))["recipients"] == [{"agent": "planner"}]
    by_instance = messaging.ask(planner, w.AskRequest(body="via instance", toInstance=coder1.instance_id))["threadId"]
    assert messaging.reply(coder1, w.ReplyRequest(threadId=by_instance, body="ok"))["recipients"] == [{"agent": "planner"}]


def test_a_reply_goes_to_the_most_recent_other_participant(demo):
    planner, reviewer, coder0 = demo.principals["planner0"], demo.principals["reviewer0"], demo.principals["coder0"]
    thread = messaging.ask(planner, w.AskRequest(body="who reviews?", toAgent="reviewer"))["threadId"]
    messaging.ask(planner, w.AskRequest(body="and you, coder?", toAgent="coder", threadId=thread))
    # planner posted everything so far: its reply goes to the last addressee
    assert messaging.reply(planner, w.ReplyRequest(threadId=thread, body="anyone?"))["recipients"] == [{"agent": "coder"}]
    messaging.reply(reviewer, w.ReplyRequest(threadId=thread, body="me"))
    messaging.reply(coder0, w.ReplyRequest(threadId=thread, body="me too"))
    assert messaging.reply(planner, w.ReplyRequest(threadId=thread, body="thanks"))["recipients"] == [{"agent": "coder"}]
    assert messaging.reply(coder0, w.ReplyRequest(threadId=thread, body="np"))["recipients"] == [{"agent": "planner"}]
    assert messaging.reply(reviewer, w.ReplyRequest(threadId=thread, body="bye"))["recipients"] == [{"agent": "coder"}]


def test_an_instance_addressed_by_itself_gets_nothing_in_its_mailbox(demo):
    coder0 = demo.principals["coder0"]
    out = messaging.ask(coder0, w.AskRequest(body="note to self", toInstance=coder0.instance_id))
    assert t.query(k.mailbox_pk(demo.network_id, {"instanceId": coder0.instance_id})) == []
    assert [m["id"] for m in _thread_messages(demo.network_id, out["threadId"])] == [out["messageId"]]


# group fan-out past one transaction --------------------------------------------------------

@pytest.fixture
def crowd(table):
    return apply(_crowd_spec())


def _fail_transaction(monkeypatch, number: int):
    """Make the ``number``-th transaction from now raise once, as a throttled request would
    (``monkeypatch.undo()`` restores it)."""
    real, count = t.transact, {"n": 0}

    def flaky(actions, token=None):
        count["n"] += 1
        if count["n"] == number:
            raise RuntimeError("simulated throttling")
        return real(actions, token)

    monkeypatch.setattr(t, "transact", flaky)
    return count


def test_a_group_of_150_gets_one_copy_each_and_the_senders_agent_none(crowd, monkeypatch):
    boss = crowd.principals["boss0"]
    for size, failures in ((200, 0), (4000, 1)):  # a short body inline; a long one by pointer, its chunk retried
        tries = _fail_transaction(monkeypatch, 2 if failures else 0)  # 2: the chunk's first try fails
        out = messaging.ask(boss, w.AskRequest(body="b" * size, toAgent="crowd"))
        monkeypatch.undo()
        assert tries["n"] == 2 + failures  # the first transaction, then the chunk (once more after a failure)
        assert sorted(r["agent"] for r in out["recipients"]) == MEMBERS
        for m in MEMBERS:
            assert [e["SK"] for e in _mailbox(crowd.network_id, m)] == [f"MSG#{out['messageId']}"], m
        assert _mailbox(crowd.network_id, "boss") == []
        assert messaging.inbox(boss)["messages"] == []
        for name in ("m000", "m149"):  # in the first transaction and in the chunk
            (msg,) = messaging.inbox(crowd.principals[f"{name}0"])["messages"]
            assert msg["id"] == out["messageId"] and msg["body"] == "b" * size and msg["to"] == {"group": "crowd"}
        assert len(_thread_messages(crowd.network_id, out["threadId"])) == 1
        for m in MEMBERS:  # empty the mailboxes for the next round
            for e in _mailbox(crowd.network_id, m):
                t.client().delete_item(TableName=t.table_name(), Key=t.key(e["PK"], e["SK"]))


def test_a_fan_out_that_fails_midway_is_completed_by_a_retry_with_the_same_key(crowd, monkeypatch):
    boss, first_member, last_member = crowd.principals["boss0"], crowd.principals["m0000"], crowd.principals["m1490"]
    req = w.AskRequest(body="all hands", toAgent="crowd")
    # the second chunk's transaction fails every attempt: the first call gives up with 429
    real, calls = t.transact, {"n": 0}

    def failing_chunk(actions, token=None):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("simulated throttling")
        return real(actions, token)

    monkeypatch.setattr(t, "transact", failing_chunk)
    with identity.request_key("network_ask#boss#k-1"):
        with pytest.raises(RateLimited) as err:
            messaging.ask(boss, req)
    assert "retry with the same Idempotency-Key" in err.value.message
    monkeypatch.setattr(t, "transact", real)
    (early,) = messaging.inbox(first_member)["messages"]  # a member of the first transaction reads it now
    assert messaging.inbox(last_member)["messages"] == []  # the rest is not delivered yet
    with identity.request_key("network_ask#boss#k-1"):
        again = messaging.ask(boss, req)
    assert again["messageId"] == early["id"]
    assert messaging.inbox(first_member)["messages"] == []  # never a second copy
    (late,) = messaging.inbox(last_member)["messages"]
    assert late["id"] == early["id"]
    for m in MEMBERS[1:-1]:
        assert len(_mailbox(crowd.network_id, m)) == 1, m
    assert len(_thread_messages(crowd.network_id, again["threadId"])) == 1
    with identity.request_key("network_ask#boss#k-1"):  # the same key with another body
        with pytest.raises(Conflict) as err:
            messaging.ask(boss, w.AskRequest(body="other", toAgent="crowd"))
    assert err.value.reason == "already_exists"


def test_a_send_rerun_after_its_commit_with_the_same_key_creates_nothing_new(demo):
    """The Lambda died after the transaction committed, before powertools stored the response:
    the retry runs the domain call again, which finds its send record."""
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    req = w.AskRequest(body="exactly once", toAgent="reviewer")
    with identity.request_key("network_ask#planner#k-2"):
        first = messaging.ask(planner, req)
    keys = _all_keys()
    with identity.request_key("network_ask#planner#k-2"):
        assert messaging.ask(planner, req) == first
    assert _all_keys() == keys
    assert [m["id"] for m in messaging.inbox(reviewer)["messages"]] == [first["messageId"]]
    with identity.request_key("network_reply#reviewer#k-3"):
        answer = messaging.reply(reviewer, w.ReplyRequest(threadId=first["threadId"], body="got it"))
    with identity.request_key("network_reply#reviewer#k-3"):
        assert messaging.reply(reviewer, w.ReplyRequest(threadId=first["threadId"], body="got it")) == answer
    assert [m["body"] for m in messaging.inbox(planner)["messages"]] == ["got it"]


def test_without_a_key_every_send_is_a_new_message(demo):
    planner = demo.principals["planner0"]
    a = messaging.ask(planner, w.AskRequest(body="same", toAgent="reviewer"))
    b = messaging.ask(planner, w.AskRequest(body="same", toAgent="reviewer"))
    assert a["messageId"] != b["messageId"]


def test_a_failed_fetch_puts_its_messages_back(demo, monkeypatch):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    sent = messaging.ask(planner, w.AskRequest(body="y" * 5000, toAgent="reviewer"))["messageId"]

    def broken(*a, **kw):
        raise RuntimeError("simulated read failure")

    monkeypatch.setattr(t, "batch_get", broken)
    with pytest.raises(RuntimeError):
        messaging.inbox(reviewer)
    monkeypatch.undo()
    assert [m["id"] for m in messaging.inbox(reviewer)["messages"]] == [sent]


# presence ----------------------------------------------------------------------------------

def test_presence_is_written_at_most_once_a_minute_per_instance(demo, monkeypatch):
    from tests.api.conftest import call

    identity.forget_presence()
    me = demo.principals["coder0"]
    updates: list[dict] = []

    def count(params, **_):
        if params["Key"]["SK"]["S"] == f"INST#{me.instance_id}":
            updates.append(params)

    t.client().meta.events.register("before-parameter-build.dynamodb.UpdateItem", count)
    try:
        base = clock.now_ms()
        for minute in (1, 2, 3):  # three minutes after launch, many calls in each
            monkeypatch.setattr(clock, "now_ms", lambda: base + minute * 60_000 + 1)
            for tool in ("network_inbox", "network_whoami", "network_inbox", "network_discover", "network_inbox"):
                assert call(tool, {}, demo.token("coder0"))[0] == 200
            assert len(updates) == minute
            stored = t.get(*k.instance(demo.network_id, me.instance_id))["lastSeenAt"]
            assert stored == base + minute * 60_000 + 1
    finally:
        t.client().meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", count)


# what the agent is told ---------------------------------------------------------------------

def test_the_mcp_bridge_says_only_tool_calls_reach_anyone_and_claims_are_not_permission():
    from relaynet import catalogue, mcp_bridge

    text = mcp_bridge.INSTRUCTIONS["worker"]
    assert "Only tool calls reach other agents" in text and "plain text output is seen by no one" in text
    assert "Claims are coordination, not permission" in text
    assert "never work on a scope another instance holds" in text
    tools = {t.name: t.description for t in mcp_bridge.mcp_tools("worker")}
    for name in ("network_ask", "network_reply", "network_inbox", "network_delegate", "network_task_update"):
        assert catalogue.HOW_TO_ACT in tools[name], name
    for name in ("network_claim", "network_release"):
        assert "never work on a scope another instance holds" in tools[name], name
