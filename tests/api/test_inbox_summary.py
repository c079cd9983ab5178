"""GET /v1/inbox/summary (docs/protocol.md "Inbox summary"): the counts network_inbox then
delivers, by kind, with the oldest createdAt; it never delivers anything itself, and it costs
one DynamoDB request."""

from __future__ import annotations

from collections import Counter

from relaynet.store import table as t


def _summary(api, token):
    status, out, _ = api("inbox_summary", None, token)
    assert status == 200, out
    return out


def test_an_empty_inbox_summarises_as_nothing(api, demo):
    assert _summary(api, demo.token("reviewer0")) == {
        "undelivered": 0, "byKind": {}, "oldestCreatedAt": None, "complete": True}


def test_the_summary_counts_what_network_inbox_then_delivers_and_delivers_nothing(api, demo):
    planner, coder0, coder1 = demo.token("planner0"), demo.token("coder0"), demo.token("coder1")
    coder0_id = demo.principals["coder0"].instance_id
    assert api("network_ask", {"toAgent": "coder", "body": "first, to the agent"}, planner)[0] == 200
    assert api("network_ask", {"toInstance": coder0_id, "body": "to coder0 only"}, planner)[0] == 200
    assert api("network_ask", {"toAgent": "coder", "body": "x" * 4096}, planner)[0] == 200  # a pointer entry
    assert api("network_delegate", {"toInstance": coder0_id, "objective": "Add /health"}, planner)[0] == 200
    assert api("network_ask", {"toAgent": "coder", "body": "from coder0 itself"}, coder0)[0] == 200

    first = _summary(api, coder0)
    assert first == _summary(api, coder0)  # reading it twice changes nothing: nothing was delivered
    assert first["undelivered"] == 4 and first["complete"] is True
    assert first["byKind"] == {"ask": 3, "task_offer": 1}  # its own ask is not counted for coder0

    other = _summary(api, coder1)  # the agent's mail and coder0's own ask, not coder0's instance mail
    assert other["byKind"] == {"ask": 3}

    status, inbox, _ = api("network_inbox", {}, coder0)
    assert status == 200 and not inbox["more"]
    delivered = inbox["messages"]
    assert len(delivered) == first["undelivered"]
    assert Counter(m["kind"] for m in delivered) == Counter(first["byKind"])
    assert first["oldestCreatedAt"] == min(m["createdAt"] for m in delivered)

    assert _summary(api, coder0)["undelivered"] == 0
    after = _summary(api, coder1)  # coder0 took the agent's mail; coder0's own ask is left to coder1
    assert after["byKind"] == {"ask": 1}
    status, inbox, _ = api("network_inbox", {}, coder1)
    assert [m["body"] for m in inbox["messages"]] == ["from coder0 itself"]


def test_the_summary_is_one_dynamodb_request(api, demo):
    token = demo.token("reviewer0")
    api("network_ask", {"toAgent": "reviewer", "body": "hi"}, demo.token("planner0"))
    _summary(api, token)  # the presence refresh of this minute happens here
    seen = []  # the function's own requests (the authorizer's GetItem is another function, cached in AWS)

    def count(model, **_):
        decl = t.current_declaration()
        if decl is not None and decl.owner == "inbox_summary":
            seen.append(model.name)

    t.client().meta.events.register("before-call.dynamodb", count, unique_id="count-summary-requests")
    try:
        assert _summary(api, token)["undelivered"] == 1
    finally:
        t.client().meta.events.unregister("before-call.dynamodb", unique_id="count-summary-requests")
    assert seen == ["Query"]


def test_the_summary_needs_an_instance_token(api, demo):
    status, out, _ = api("inbox_summary", None, demo.tokens["representatives"]["ops"])
    assert status == 403 and out["error"]["code"] == "permission_denied"
    status, out, _ = api("inbox_summary", None, "rn_inst_" + "x" * 43)
    assert status == 401 and out["error"]["code"] == "unauthenticated"
