"""Idempotency-Key through the real handlers (PROTOCOL.md 2; issue 5): a retry with the same key and
body returns the first response and creates nothing; another body is 409 ``already_exists``; a
retry while the first request runs is 409 ``in_progress`` with Retry-After; a fan-out that failed
midway is completed by its retry; the in-progress record rides in the call's own transaction."""

from __future__ import annotations

import pytest

from relaynet import messaging
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import apply

pytestmark = pytest.mark.usefixtures("moto_fast_transactions")


def _all_keys() -> set[tuple[str, str]]:
    out, kwargs = set(), {"TableName": t.table_name(), "ProjectionExpression": "PK, SK"}
    while True:
        page = t.client().scan(**kwargs)
        out |= {(i["PK"]["S"], i["SK"]["S"]) for i in page["Items"]}
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _created(before: set, after: set) -> set:
    """What a call created, without the idempotency records themselves."""
    return {key for key in after - before if key[0] != "idempotency#relaynet"}


def test_a_send_retried_after_a_timeout_creates_one_message(api, demo):
    token, body = demo.token("planner0"), {"body": "are you there?", "toAgent": "reviewer"}
    before = _all_keys()
    status, first, _ = api("network_ask", body, token, {"Idempotency-Key": "t-1"})  # the client never sees this
    assert status == 200
    after_first = _all_keys()
    status, again, _ = api("network_ask", body, token, {"Idempotency-Key": "t-1"})
    assert status == 200 and again == first
    assert _all_keys() == after_first  # the retry created nothing
    thread = t.query(k.thread_pk(demo.network_id, first["threadId"]), sk_prefix="MSG#")
    assert [m["id"] for m in thread] == [first["messageId"]]
    got = api("network_inbox", {}, demo.token("reviewer0"))[1]["messages"]
    assert [m["id"] for m in got] == [first["messageId"]]
    assert len(_created(before, after_first)) >= 3  # thread, message, mailbox entry (and the send record)


@pytest.fixture
def thread(api, demo):
    return api("network_ask", {"body": "review?", "toAgent": "reviewer"}, demo.token("planner0"))[1]["threadId"]


@pytest.mark.parametrize("tool,who,body", [
    ("network_ask", "planner0", {"body": "hello", "toAgent": "reviewers"}),
    ("network_reply", "reviewer0", {"threadId": "<thread>", "body": "looks good"}),
    ("network_delegate", "planner0", {"objective": "Add a health endpoint", "toAgent": "coder"}),
    ("network_publish_artifact", "coder0", {"uri": "https://ci.example.com/run/7", "type": "test_report"}),
])
def test_every_creating_write_answers_a_repeated_key_with_the_first_response(api, demo, thread, tool, who, body):
    body = {key: (thread if v == "<thread>" else v) for key, v in body.items()}
    token = demo.token(who)
    before = _all_keys()
    status, first, _ = api(tool, body, token, {"Idempotency-Key": f"{tool}-1"})
    assert status == 200, first
    after_first = _all_keys()
    assert _created(before, after_first)
    status, again, _ = api(tool, body, token, {"Idempotency-Key": f"{tool}-1"})
    assert (status, again) == (200, first)
    assert _all_keys() == after_first
    other = {**body, next(key for key in ("body", "objective", "uri") if key in body): "something else"}
    if tool == "network_publish_artifact":
        other["uri"] = "https://ci.example.com/run/8"
    status, err, _ = api(tool, other, token, {"Idempotency-Key": f"{tool}-1"})
    assert status == 409 and err["error"]["details"]["reason"] == "already_exists"
    assert _all_keys() == after_first
    status, fresh, _ = api(tool, body, token, {"Idempotency-Key": f"{tool}-2"})  # a new key is a new write
    assert status == 200 and fresh != first


def test_the_same_key_from_another_instance_is_another_write(api, demo):
    body = {"body": "hi", "toAgent": "reviewer"}
    a = api("network_ask", body, demo.token("coder0"), {"Idempotency-Key": "shared"})[1]
    b = api("network_ask", body, demo.token("coder1"), {"Idempotency-Key": "shared"})[1]
    assert a["messageId"] != b["messageId"]


def test_a_retry_while_the_first_request_runs_is_409_in_progress_with_retry_after(api, demo, monkeypatch):
    """The first request has committed its first write (its in-progress record rides in that
    transaction) but not answered yet when the client retries."""
    token, body, key = demo.token("planner0"), {"body": "slow one", "toAgent": "reviewer"}, {"Idempotency-Key": "slow"}
    real, seen = t.transact, {}

    def transact_then_retry(actions, token_=None):
        real(actions, token_)
        if "retry" not in seen:
            seen["retry"] = None
            seen["retry"] = api("network_ask", body, token, key)  # the client retries before the first answered

    monkeypatch.setattr(t, "transact", transact_then_retry)
    status, first, _ = api("network_ask", body, token, key)
    assert status == 200
    status, err, headers = seen["retry"]
    assert status == 409 and err["error"]["details"]["reason"] == "in_progress"
    assert headers["retry-after"] == "1"
    monkeypatch.setattr(t, "transact", real)
    assert api("network_ask", body, token, key)[1] == first  # once finished, the first response


def test_a_retry_racing_the_first_before_its_first_write_commits_once(api, demo, monkeypatch):
    """Both requests run the domain, but the record's condition lets only one transaction commit;
    the other request answers the winner's response, and one message exists."""
    token, body, key = demo.token("planner0"), {"body": "racing", "toAgent": "reviewer"}, {"Idempotency-Key": "race"}
    real, seen = messaging.ask, {}

    def ask_racing_a_retry(principal, req):
        if "retry" not in seen:
            seen["retry"] = None
            monkeypatch.setattr(messaging, "ask", real)
            seen["retry"] = api("network_ask", body, token, key)  # runs to the end before this one writes
        return real(principal, req)

    monkeypatch.setattr(messaging, "ask", ask_racing_a_retry)
    before = _all_keys()
    status, first, _ = api("network_ask", body, token, key)
    assert status == 200 and seen["retry"][:2] == (200, first)
    thread = t.query(k.thread_pk(demo.network_id, first["threadId"]), sk_prefix="MSG#")
    assert [m["id"] for m in thread] == [first["messageId"]]
    assert len([key for key in _all_keys() - before if key[0] == "idempotency#relaynet"]) == 1


GRAPH = {"initial_speaker": "planner", "transitions": [
    {"when": {"name": "from_speaker", "args": {"agent_id": "planner"}},
     "then": {"name": "agent", "args": {"agent_id": "coder"}}, "priority": 0}],
    "default_target": {"name": "terminate", "args": {"reason": "done"}}, "max_turns": 4}


def _open(api, token, type_, target, **extra):
    body = {"action": "open", "type": type_, "target": target, **extra}
    status, out, _ = api("channels", body, token)
    assert status == 200, out
    return out["channel_id"]


def _refused_after_its_first_success(api, demo, case):
    """(tool, token, body) of a call whose repeat, once the first succeeded, the adapter refuses:
    the turn passed (``not_your_turn``) or the call closed the channel (``channel_closed``)."""
    planner, reviewer = demo.token("planner0"), demo.token("reviewer0")
    if case == "handoff":
        ch = _open(api, planner, "workflow", "coder", knobs={"graph": GRAPH})
        return "handoff", planner, {"channel_id": ch, "content": "draft v1"}
    if case == "consulting prompt":
        ch = _open(api, planner, "consulting", "reviewer")
        return "say", planner, {"channel_id": ch, "content": "is this safe?"}
    ch = _open(api, planner, "consulting", "reviewer", message="is this safe?")
    return "say", reviewer, {"channel_id": ch, "content": "yes"}  # the reply closes it: consulting_complete


@pytest.mark.parametrize("case", ["handoff", "consulting prompt", "consulting reply"])
def test_a_retry_the_turn_or_state_would_refuse_answers_the_first_response(api, demo, case):
    # PROTOCOL.md 2: the key's record is looked up before the turn or state check answers
    tool, token, body = _refused_after_its_first_success(api, demo, case)
    assert [api(tool, body, token)[0] for _ in range(2)] == [200, 409]  # without a key the repeat is refused
    tool, token, body = _refused_after_its_first_success(api, demo, case)
    status, first, _ = api(tool, body, token, {"Idempotency-Key": "turn-1"})
    assert status == 200, first
    after_first = _all_keys()
    status, again, _ = api(tool, body, token, {"Idempotency-Key": "turn-1"})
    assert (status, again) == (200, first)
    assert _all_keys() == after_first
    status, err, _ = api(tool, {**body, "content": "another"}, token, {"Idempotency-Key": "turn-1"})
    assert status == 409 and err["error"]["details"]["reason"] == "already_exists"
    status, err, _ = api(tool, body, token, {"Idempotency-Key": "turn-2"})  # a new key is a new call: refused
    assert status == 409 and err["error"]["details"]["reason"] in ("not_your_turn", "channel_closed")
    assert _all_keys() == after_first


def test_a_retry_the_turn_would_refuse_while_the_first_runs_is_409_in_progress(api, demo, monkeypatch):
    tool, token, body = _refused_after_its_first_success(api, demo, "handoff")
    key = {"Idempotency-Key": "slow-turn"}
    real, seen = t.transact, {}

    def transact_then_retry(actions, token_=None):
        real(actions, token_)
        if "retry" not in seen:
            seen["retry"] = None
            seen["retry"] = api(tool, body, token, key)  # the first has committed, not yet answered

    monkeypatch.setattr(t, "transact", transact_then_retry)
    status, first, _ = api(tool, body, token, key)
    assert status == 200
    status, err, headers = seen["retry"]
    assert status == 409 and err["error"]["details"]["reason"] == "in_progress" and headers["retry-after"] == "1"
    monkeypatch.setattr(t, "transact", real)
    assert api(tool, body, token, key)[:2] == (200, first)


def test_a_keyed_write_costs_one_request_more_than_without_the_key(api, demo):
    """The in-progress record rides in the call's transaction; only the completing UpdateItem is extra."""
    from collections import Counter

    seen: Counter = Counter()

    def count(params, model, **_):
        if not params.get("Key", {}).get("PK", {}).get("S", "").startswith("TOKEN#"):  # the authorizer's read
            seen[model.name] += 1

    t.client().meta.events.register("before-parameter-build.dynamodb", count, unique_id="test-idem-count")
    try:
        token, body = demo.token("planner0"), {"body": "counted", "toAgent": "reviewer"}
        api("network_ask", body, token)
        seen.clear()
        assert api("network_ask", body, token)[0] == 200
        plain = Counter(seen)
        seen.clear()
        assert api("network_ask", body, token, {"Idempotency-Key": "counted-1"})[0] == 200
        keyed = Counter(seen)
    finally:
        t.client().meta.events.unregister("before-parameter-build.dynamodb", unique_id="test-idem-count")
    assert keyed - plain == Counter({"UpdateItem": 1}), (plain, keyed)


def test_a_failed_keyed_send_stores_nothing_and_its_retry_runs_again(api, demo):
    token = demo.token("planner0")
    before = _all_keys()
    for body in ({"body": "x", "toAgent": "ghost"}, {"body": "x", "toInstance": "inst_01ABCDEFGHJKMNPQRSTVWXYZ01"},
                 {"body": "x", "threadId": "thr_01ABCDEFGHJKMNPQRSTVWXYZ01"}):
        for _ in range(2):
            status, err, _ = api("network_ask", body, token, {"Idempotency-Key": "k-404"})
            assert status == 404 and err["error"]["code"] == "not_found"
    status, _, _ = api("network_reply", {"threadId": "thr_01ABCDEFGHJKMNPQRSTVWXYZ01", "body": "x"}, token,
                       {"Idempotency-Key": "k-404"})
    assert status == 404
    assert _all_keys() == before


def test_a_bad_idempotency_key_is_400(api, demo):
    status, err, _ = api("network_ask", {"body": "x", "toAgent": "reviewer"}, demo.token("planner0"),
                         {"Idempotency-Key": "k" * 256})
    assert status == 400 and err["error"]["details"]["fields"][0]["field"] == "Idempotency-Key"


def test_a_fan_out_that_failed_midway_is_completed_by_the_retry_with_its_key(api, table, monkeypatch):
    members = [f"m{i:03d}" for i in range(150)]
    spec = ("network: crowd\nagents:\n  - {name: boss, instances: 1}\n"
            + "".join(f"  - {{name: {m}, instances: {1 if m in ('m000', 'm149') else 0}}}\n" for m in members)
            + f"groups:\n  - {{slug: crowd, members: [boss, {', '.join(members)}]}}\n")
    net = apply(spec)
    tokens = net.tokens["networks"]["crowd"]["instances"]
    m000, m149 = tokens["m000"][0]["token"], tokens["m149"][0]["token"]
    token, body, key = net.token("boss0"), {"body": "all hands", "toAgent": "crowd"}, {"Idempotency-Key": "fan-1"}
    real, calls = t.transact, {"n": 0}

    def throttled_after_the_first(actions, token=None):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("simulated throttling")
        return real(actions, token)

    monkeypatch.setattr(t, "transact", throttled_after_the_first)
    status, err, headers = api("network_ask", body, token, key)
    assert status == 429 and err["error"]["code"] == "rate_limited" and headers["retry-after"] == "1"
    monkeypatch.setattr(t, "transact", real)
    (early,) = api("network_inbox", {}, m000)[1]["messages"]
    assert api("network_inbox", {}, m149)[1]["messages"] == []
    status, out, _ = api("network_ask", body, token, key)
    assert status == 200 and out["messageId"] == early["id"] and sorted(r["agent"] for r in out["recipients"]) == members
    assert api("network_inbox", {}, m000)[1]["messages"] == []
    assert [m["id"] for m in api("network_inbox", {}, m149)[1]["messages"]] == [early["id"]]
    for m in members[1:-1]:
        assert len(t.query(k.mailbox_pk(net.network_id, {"agent": m}), sk_prefix="MSG#")) == 1, m
    assert len(t.query(k.thread_pk(net.network_id, out["threadId"]), sk_prefix="MSG#")) == 1
    assert api("network_ask", body, token, key)[1] == out  # and from now on the stored response


def test_a_refused_seed_answers_its_keyed_retry_with_the_same_409_and_opens_nothing_more(api, demo):
    # PROTOCOL.md 2 and 5.6: the first open created a channel (closed with seed_failed) and answered
    # 409; its retry with the same key and body gets that answer again and creates no channel
    token = demo.token("planner0")
    graph = {"initial_speaker": "coder", "transitions": [], "default_target": {"name": "terminate", "args": {}}}
    body = {"action": "open", "type": "workflow", "target": ["coder"], "knobs": {"graph": graph}, "message": "go"}
    status, first, _ = api("channels", body, token, {"Idempotency-Key": "seed-1"})
    assert status == 409 and first["error"]["details"]["reason"] == "seed_failed"
    after_first = _all_keys()
    status, again, _ = api("channels", body, token, {"Idempotency-Key": "seed-1"})
    assert (status, again) == (409, first)
    assert _all_keys() == after_first
    listed = api("channels", {"action": "list", "state": "all"}, token)[1]["channels"]
    assert [c["channel_id"] for c in listed] == [first["error"]["details"]["channel_id"]]
    status, other, _ = api("channels", body, token, {"Idempotency-Key": "seed-2"})  # another key: another open
    assert status == 409 and other["error"]["details"]["channel_id"] != first["error"]["details"]["channel_id"]
