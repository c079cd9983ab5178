"""PROTOCOL.md 2 through the real handlers: auth, the error envelope, argument checks, limits,
network isolation, idempotency."""

from __future__ import annotations

import pytest

from relaynet.catalogue import WORKER_TOOLS
from tests.conftest import apply

# A minimal valid body per tool, used to show that the *other* thing under test is what fails.
VALID = {
    "network_whoami": {},
    "network_discover": {},
    "network_ask": {"body": "hi", "toAgent": "reviewer"},
    "network_inbox": {},
    "network_reply": {"threadId": "thr_01ABCDEFGHJKMNPQRSTVWXYZ01", "body": "hi"},
    "network_delegate": {"objective": "do it", "toAgent": "coder"},
    "network_task_get": {"taskId": "task_01ABCDEFGHJKMNPQRSTVWXYZ01"},
    "network_task_update": {"taskId": "task_01ABCDEFGHJKMNPQRSTVWXYZ01", "status": "accepted"},
    "network_claim": {"scope": "src/**"},
    "network_release": {"claimId": "clm_01ABCDEFGHJKMNPQRSTVWXYZ01"},
    "network_publish_artifact": {"uri": "https://example.com/pr/1"},
    "network_register_capabilities": {"capabilities": []},
}
REQUIRED = {
    "network_ask": "body", "network_reply": "threadId", "network_delegate": "objective", "network_task_get": "taskId",
    "network_task_update": "status", "network_claim": "scope", "network_release": "claimId",
    "network_publish_artifact": "uri", "network_register_capabilities": "capabilities",
}
TOOLS = [t.name for t in WORKER_TOOLS]


def test_every_worker_tool_has_a_valid_example():
    assert set(VALID) == set(TOOLS)


@pytest.mark.parametrize("tool", TOOLS)
def test_a_missing_or_unknown_token_is_401_with_the_envelope(api, demo, tool):
    for token in (None, "rn_inst_" + "x" * 43, "garbage"):
        status, body, _ = api(tool, VALID[tool], token)
        assert status == 401, (tool, token)
        assert body["error"]["code"] == "unauthenticated"


@pytest.mark.parametrize("tool", TOOLS)
def test_an_unknown_argument_is_400_naming_it(api, demo, tool):
    status, body, _ = api(tool, {**VALID[tool], "toAgnet": "coder"}, demo.token("planner0"))
    assert status == 400
    assert body["error"]["code"] == "invalid_argument"
    assert {"field": "toAgnet", "message": "unknown argument"} in body["error"]["details"]["fields"]


@pytest.mark.parametrize("tool", sorted(REQUIRED))
def test_a_missing_required_argument_is_400_naming_it(api, demo, tool):
    args = {k: v for k, v in VALID[tool].items() if k != REQUIRED[tool]}
    status, body, _ = api(tool, args, demo.token("planner0"))
    assert status == 400
    assert {"field": REQUIRED[tool], "message": "required"} in body["error"]["details"]["fields"]


def test_every_bad_field_is_listed_not_only_the_first(api, demo):
    status, body, _ = api("network_ask", {"toAgent": "Not A Name", "subject": "s" * 201, "extra": 1}, demo.token("planner0"))
    assert status == 400
    fields = {f["field"] for f in body["error"]["details"]["fields"]}
    assert fields == {"body", "toAgent", "subject", "extra"}


@pytest.mark.parametrize("tool,args,field", [
    ("network_ask", {"body": "x" * (32 * 1024 + 1), "toAgent": "reviewer"}, "body"),
    ("network_ask", {"body": "hi", "subject": "s" * 201, "toAgent": "reviewer"}, "subject"),
    ("network_delegate", {"objective": "o" * (8 * 1024 + 1), "toAgent": "coder"}, "objective"),
    ("network_delegate", {"objective": "o", "acceptanceCriteria": ["c"] * 21, "toAgent": "coder"}, "acceptanceCriteria"),
    ("network_delegate", {"objective": "o", "acceptanceCriteria": ["c" * 1025], "toAgent": "coder"}, "acceptanceCriteria.0"),
    ("network_claim", {"scope": "a" * 1025}, "scope"),
    ("network_claim", {"scope": "src/**", "ttlSeconds": 0}, "ttlSeconds"),
    ("network_claim", {"scope": "src/**", "ttlSeconds": 86401}, "ttlSeconds"),
    ("network_publish_artifact", {"uri": "https://e.com/" + "a" * 2048}, "uri"),
    ("network_publish_artifact", {"uri": "https://e.com/", "type": "video"}, "type"),
    ("network_register_capabilities", {"capabilities": [{"id": f"c{i}", "name": "n"} for i in range(21)]}, "capabilities"),
    ("network_register_capabilities", {"capabilities": [{"id": "Bad", "name": "n"}]}, "capabilities.0.id"),
    ("network_task_update", {"taskId": "task_01ABCDEFGHJKMNPQRSTVWXYZ01", "status": "done"}, "status"),
])
def test_a_field_over_its_limit_is_400_naming_it(api, demo, tool, args, field):
    status, body, _ = api(tool, args, demo.token("coder0"))
    assert status == 400, body
    assert field in {f["field"] for f in body["error"]["details"]["fields"]}


def test_a_body_over_64_kib_is_413(api, demo):
    status, body, _ = api("network_ask", raw='{"body": "' + "x" * (65 * 1024) + '"}', token=demo.token("planner0"))
    assert status == 413 and body["error"]["code"] == "payload_too_large"


def test_a_body_that_is_not_a_json_object_is_400(api, demo):
    for raw in ("[1,2]", "{not json"):
        status, body, _ = api("network_whoami", raw=raw, token=demo.token("planner0"))
        assert status == 400 and body["error"]["code"] == "invalid_argument"


def test_no_argument_tools_take_an_empty_body(api, demo):
    status, body, _ = api("network_whoami", None, demo.token("planner0"))
    assert status == 200 and body["agent"]["name"] == "planner"


def test_a_representative_token_may_not_call_the_worker_surface(api, demo):
    status, body, _ = api("network_whoami", {}, demo.tokens["representatives"]["ops"])
    assert status == 403 and body["error"]["code"] == "permission_denied"


def test_objects_of_another_network_are_404_never_403(api, demo):
    other = apply("network: other\nagents:\n  - {name: coder, instances: 1}\n  - {name: boss, instances: 1}\n")
    boss = other.token("boss0")
    status, task, _ = api("network_delegate", {"objective": "x", "toAgent": "coder"}, boss)
    assert status == 200
    status, thread, _ = api("network_ask", {"body": "x", "toAgent": "coder"}, boss)
    status, claim, _ = api("network_claim", {"scope": "a/**"}, other.token("coder0"))
    me = demo.token("coder0")
    checks = [
        ("network_task_get", {"taskId": task["taskId"]}),
        ("network_task_update", {"taskId": task["taskId"], "status": "cancelled"}),
        ("network_reply", {"threadId": thread["threadId"], "body": "x"}),
        ("network_ask", {"body": "x", "threadId": thread["threadId"]}),
        ("network_ask", {"body": "x", "toInstance": other.principals["coder0"].instance_id}),
        ("network_ask", {"body": "x", "toAgent": "boss"}),
        ("network_delegate", {"objective": "x", "toInstance": other.principals["coder0"].instance_id}),
        ("network_release", {"claimId": claim["claimId"]}),
        ("network_claim", {"scope": "b/**", "taskId": task["taskId"]}),
        ("network_publish_artifact", {"uri": "https://e.com/1", "taskId": task["taskId"]}),
    ]
    for tool, args in checks:
        status, body, _ = api(tool, args, me)
        assert (status, body["error"]["code"]) == (404, "not_found"), (tool, body)


def test_a_claim_conflict_answers_409_with_the_holder(api, demo):
    assert api("network_claim", {"scope": "src/api/**"}, demo.token("coder0"))[0] == 200
    status, body, _ = api("network_claim", {"scope": "src/api/handlers.py"}, demo.token("coder1"))
    assert status == 409
    assert body["error"]["details"]["reason"] == "claim_conflict"
    assert body["error"]["details"]["conflicts"][0]["holder"]["agent"] == "coder"


def test_a_retried_ask_with_the_same_idempotency_key_creates_one_message(api, demo):
    key = {"Idempotency-Key": "retry-1"}
    first = api("network_ask", {"body": "once", "toAgent": "reviewer"}, demo.token("planner0"), key)
    second = api("network_ask", {"body": "once", "toAgent": "reviewer"}, demo.token("planner0"), key)
    assert first[0] == second[0] == 200 and first[1] == second[1]
    inbox = api("network_inbox", {}, demo.token("reviewer0"))[1]
    assert [m["body"] for m in inbox["messages"]] == ["once"]
    status, body, _ = api("network_ask", {"body": "different", "toAgent": "reviewer"}, demo.token("planner0"), key)
    assert status == 409 and body["error"]["details"]["reason"] == "already_exists"


def test_a_failed_creating_write_can_be_retried_with_its_key(api, demo):
    key = {"Idempotency-Key": "k-404"}
    assert api("network_ask", {"body": "x", "toAgent": "ghost"}, demo.token("planner0"), key)[0] == 404
    assert api("network_ask", {"body": "x", "toAgent": "ghost"}, demo.token("planner0"), key)[0] == 404


def test_health_and_openapi_answer_without_auth():
    import json

    from relaynet_local.events import http_event
    from relaynet_local.lambdas import load_handler
    from tests.api.conftest import FUNCTIONS

    health = load_handler(FUNCTIONS, "health.handler")(http_event("GET", "/v1/health", route_key="GET /v1/health"), None)
    assert health["statusCode"] == 200 and json.loads(health["body"])["status"] == "ok"
    doc = json.loads(load_handler(FUNCTIONS, "openapi.handler")(
        http_event("GET", "/v1/openapi.json", route_key="GET /v1/openapi.json"), None)["body"])
    assert doc["openapi"].startswith("3.")
    from relaynet.catalogue import ENDPOINTS
    from relaynet.catalogue import TOOLS as ALL_TOOLS

    operations = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert operations == set(ALL_TOOLS) | set(ENDPOINTS) | {"a2a_rpc", "a2a_card", "a2a_cards", "a2a_push_in"} and set(TOOLS) <= operations


def test_the_body_is_json_whatever_the_content_type_says(api, demo):
    for ctype in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "APPLICATION/JSON"):
        status, body, _ = api("network_ask", {"body": "hi", "toAgent": "reviewer"}, demo.token("planner0"),
                              {"content-type": ctype})
        assert status == 200, (ctype, body)


def test_deeply_nested_json_is_400_not_500(api, demo):
    status, body, _ = api("network_whoami", raw="[" * 5000 + "]" * 5000, token=demo.token("planner0"))
    assert status == 400 and body["error"]["code"] == "invalid_argument"


def test_wrong_types_are_400_not_converted(api, demo):
    for value in (True, "60", 60.5):
        status, body, _ = api("network_claim", {"scope": "src/**", "ttlSeconds": value}, demo.token("coder0"))
        assert status == 400 and body["error"]["details"]["fields"][0]["field"] == "ttlSeconds", value
