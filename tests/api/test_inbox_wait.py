"""GET /v1/inbox/wait?timeout=S (docs/protocol.md 10.7, issue 27 part 3): the inbox summary as soon
as something is undelivered, or at S with nothing; it delivers nothing; a mailbox entry this
process commits ends the wait at once; a bad timeout or an unknown parameter is a 400."""

from __future__ import annotations

import threading

import pytest

from relaynet import mailbox
from relaynet.store import table as t


def _wait(api, token, query="timeout=0"):
    status, out, _ = api("inbox_wait", None, token, query=query)
    assert status == 200, out
    return out


def test_waiting_mail_is_answered_at_once_as_the_summary_and_stays_undelivered(api, demo):
    planner, coder0 = demo.token("planner0"), demo.token("coder0")
    assert api("network_ask", {"toAgent": "coder", "body": "are you there?"}, planner)[0] == 200
    # timeout 20 (the default) would hold the request 20 s were nothing waiting: it answers now
    got = _wait(api, coder0, query="")
    assert got["undelivered"] == 1 and got["byKind"] == {"ask": 1} and got["complete"] is True
    assert got == api("inbox_summary", None, coder0)[1]
    status, inbox, _ = api("network_inbox", {}, coder0)  # the wait delivered nothing
    assert [m["body"] for m in inbox["messages"]] == ["are you there?"]


def test_with_nothing_waiting_it_answers_an_empty_summary_at_the_timeout(api, demo):
    assert _wait(api, demo.token("reviewer0"), "timeout=1") == {
        "undelivered": 0, "byKind": {}, "oldestCreatedAt": None, "complete": True}


def test_an_ask_committed_while_it_waits_ends_the_wait_with_it(api, demo):
    reviewer = demo.token("reviewer0")
    answers: list[dict] = []
    waiting = threading.Thread(target=lambda: answers.append(_wait(api, reviewer, "timeout=20")), daemon=True)
    waiting.start()
    while not mailbox._waiters._waiting and waiting.is_alive():  # the wait has registered
        threading.Event().wait(0.01)
    assert api("network_ask", {"toAgent": "reviewer", "body": "review #12"}, demo.token("planner0"))[0] == 200
    waiting.join(15)
    assert not waiting.is_alive() and answers[0]["byKind"] == {"ask": 1}


def test_a_commit_for_the_waiter_wakes_it_and_one_for_others_does_not(demo):
    """The in-process wake, deterministically: the commit listener runs in the writing thread,
    so the event is set (or not) when the write returns."""
    from relaynet import messaging
    from relaynet.models.worker import AskRequest

    reviewer, coder = demo.principals["reviewer0"], demo.principals["coder0"]
    for_reviewer, for_coder = mailbox._waiters.add(reviewer), mailbox._waiters.add(coder)
    try:
        messaging.ask(demo.principals["planner0"], AskRequest(toAgent="reviewer", body="only you"))
        assert for_reviewer.is_set() and not for_coder.is_set()
        for_reviewer.clear()
        messaging.ask(reviewer, AskRequest(toAgent="reviewer", body="my own send"))  # never its own
        assert not for_reviewer.is_set()
    finally:
        mailbox._waiters.remove(for_reviewer)
        mailbox._waiters.remove(for_coder)


@pytest.mark.parametrize("query, field, message", [
    ("timeout=-1", "timeout", "greater than or equal to 0"),
    ("timeout=abc", "timeout", "valid integer"),
    ("timeout=1.5", "timeout", "valid integer"),
    ("timeout=86401", "timeout", "less than or equal to 86400"),
    ("timout=5", "timout", "unknown argument"),
])
def test_a_bad_query_is_a_400_naming_the_parameter(api, demo, query, field, message):
    status, out, _ = api("inbox_wait", None, demo.token("reviewer0"), query=query)
    assert status == 400 and out["error"]["code"] == "invalid_argument", out
    (bad,) = out["error"]["details"]["fields"]
    assert bad["field"] == field and message in bad["message"]


def test_it_needs_an_instance_token(api, demo):
    status, out, _ = api("inbox_wait", None, demo.tokens["representatives"]["ops"], query="timeout=0")
    assert status == 403 and out["error"]["code"] == "permission_denied"
    status, out, _ = api("inbox_wait", None, "rn_inst_" + "x" * 43, query="timeout=0")
    assert status == 401 and out["error"]["code"] == "unauthenticated"


def test_an_answer_at_once_is_one_dynamodb_request(api, demo):
    token = demo.token("reviewer0")
    api("network_ask", {"toAgent": "reviewer", "body": "hi"}, demo.token("planner0"))
    _wait(api, token)  # the presence refresh of this minute happens here
    seen = []

    def count(model, **_):
        decl = t.current_declaration()
        if decl is not None and decl.owner == "inbox_wait":
            seen.append(model.name)

    t.client().meta.events.register("before-call.dynamodb", count, unique_id="count-wait-requests")
    try:
        assert _wait(api, token, "timeout=5")["undelivered"] == 1
    finally:
        t.client().meta.events.unregister("before-call.dynamodb", unique_id="count-wait-requests")
    assert seen == ["Query"]


def test_the_hub_holds_at_most_max_wait_seconds_whatever_the_timeout(api, demo, monkeypatch):
    from relaynet.config import settings

    monkeypatch.setenv("RELAYNET_MAX_WAIT_SECONDS", "1")
    settings.cache_clear()
    answers: list[dict] = []
    waiting = threading.Thread(target=lambda: answers.append(_wait(api, demo.token("reviewer0"), "timeout=86400")),
                               daemon=True)
    waiting.start()
    waiting.join(15)  # a day's timeout, held 1 s
    assert not waiting.is_alive() and answers[0]["undelivered"] == 0
