"""No malformed input gets past the door, over real HTTP on `relaynet serve` (PROTOCOL.md 2):
bodies that are not JSON or not an object, deep nesting, huge numbers, NaN, NUL and lone
surrogates, duplicate keys, on every tool: 400 ``invalid_argument`` naming ``body`` (never a 5xx)
and nothing written. And tokens of another network on every tool: 404, never its data."""

from __future__ import annotations

import json

import boto3
import httpx
import pytest

from relaynet.catalogue import TOOLS
from tests.e2e.conftest import start_hub, stop_hub

SPEC = """
network: alpha
agents:
  - {name: alice, instances: 1, description: alpha-secret-description}
  - {name: alpha-only, instances: 1}
representatives:
  - {name: alpha-ops, grants: {alpha: operate}}
---
network: beta
agents:
  - {name: bob, instances: 1}
  - {name: bert, instances: 1}
representatives:
  - {name: beta-ops, grants: {beta: operate}}
"""

BAD_BODIES = {
    "not JSON": "{",
    "trailing garbage": '{"a": 1} x',
    "an array": "[]",
    "a string": '"hello"',
    "null": "null",
    "a number": "42",
    "deep nesting": '{"x": ' * 40 + "1" + "}" * 40,
    "very deep nesting": "[" * 5000 + "]" * 5000,
    "a huge integer": '{"limit": ' + "9" * 5000 + "}",
    "a huge float": '{"limit": 1e999}',
    "NaN": '{"limit": NaN}',
    "Infinity": '{"limit": -Infinity}',
    "a lone surrogate": '{"body": "\\ud800 alone"}',
    "a lone surrogate in a key": '{"\\udc00": 1}',
    "duplicate keys": '{"body": "a", "body": "b"}',
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two-networks")
    (tmp / "spec.yaml").write_text(SPEC)
    hub = start_hub(tmp, "--sweep-interval", "0", spec=tmp / "spec.yaml",
                    env={"RELAYNET_THROTTLE_BURST": "100000", "RELAYNET_THROTTLE_RATE": "100000",
                         "RELAYNET_MAX_WAIT_SECONDS": "1"})
    http = httpx.Client(base_url=hub.url, timeout=30)

    def call(tool, body, token, raw=None):
        content = raw.encode("utf-8", errors="surrogatepass") if raw is not None else json.dumps(body)
        return http.post(f"/v1/tools/{tool}", content=content, headers={"Authorization": f"Bearer {token}",
                                                                          "Content-Type": "application/json"})

    alice = hub.token("alice", network="alpha")
    alpha = {"net": hub.tokens["networks"]["alpha"]["networkId"], "inst": hub.instance("alice", network="alpha")}
    alpha["task"] = call("network_delegate", {"objective": "alpha-secret-task", "toAgent": "alpha-only"},
                         alice).json()["taskId"]
    alpha["thread"] = call("network_ask", {"toAgent": "alpha-only", "body": "alpha-secret-ask"}, alice).json()["threadId"]
    alpha["claim"] = call("network_claim", {"scope": "alpha/**"}, alice).json()["claimId"]
    alpha["channel"] = call("channels", {"action": "open", "type": "conversation", "target": "alpha-only",
                                         "message": "alpha-secret-channel"}, alice).json()["channel_id"]
    call("network_publish_artifact", {"uri": "https://alpha.example/secret", "taskId": alpha["task"]}, alice)
    state = json.loads((tmp / ".relaynet" / "local.json").read_text())
    dynamodb = boto3.client("dynamodb", endpoint_url=state["dynamodbEndpoint"], region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def scan():
        items = []
        for page in dynamodb.get_paginator("scan").paginate(TableName=state["table"], ConsistentRead=True):
            items += [json.dumps({k: v for k, v in i.items() if k != "lastSeenAt"}, sort_keys=True)
                      for i in page["Items"]]
        return sorted(items)

    yield {"hub": hub, "call": call, "alpha": alpha, "scan": scan,
           "bob": hub.token("bob", network="beta"), "beta_ops": hub.tokens["representatives"]["beta-ops"]}
    http.close()
    stop_hub(hub)


def token_for(world, tool):
    return world["beta_ops"] if TOOLS[tool].surface == "control" else world["bob"]


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_malformed_bodies_are_400_on_every_tool_and_write_nothing(world, tool):
    before = world["scan"]()
    for name, raw in BAD_BODIES.items():
        response = world["call"](tool, None, token_for(world, tool), raw=raw)
        assert response.status_code == 400, (tool, name, response.status_code, response.text[:300])
        error = response.json()["error"]
        assert error["code"] == "invalid_argument" and error["details"]["fields"][0]["field"] == "body", (name, error)
    assert world["scan"]() == before


def test_nesting_within_the_limit_is_fine_and_past_it_is_400(world):
    call, bob = world["call"], world["bob"]
    ok = {"level": 1}
    for n in range(2, 15):
        ok = {"level": n, "inner": ok}
    task = call("network_delegate", {"objective": "nest", "toAgent": "bert"}, bob).json()
    bert = world["hub"].token("bert", network="beta")
    call("network_task_update", {"taskId": task["taskId"], "status": "accepted"}, bert)
    assert call("tasks", {"action": "progress", "task_id": task["taskId"], "payload": ok}, bert).status_code == 200
    deep = {"inner": ok}
    for _ in range(3):
        deep = {"inner": deep}
    response = call("tasks", {"action": "progress", "task_id": task["taskId"], "payload": deep}, bert)
    assert response.status_code == 400 and "nested deeper" in response.json()["error"]["message"]


def test_nul_characters_in_text_are_kept_and_in_names_are_400(world):
    call, bob = world["call"], world["bob"]
    sent = call("network_ask", {"toAgent": "bert", "body": "nul \u0000 inside"}, bob)
    assert sent.status_code == 200
    got = call("network_inbox", {}, world["hub"].token("bert", network="beta")).json()["messages"]
    assert [m["body"] for m in got if m["id"] == sent.json()["messageId"]] == ["nul \u0000 inside"]
    bad = call("network_ask", {"toAgent": "bert\u0000", "body": "x"}, bob)
    assert bad.status_code == 400 and bad.json()["error"]["details"]["fields"][0]["field"] == "toAgent"
    bad = call("network_task_get", {"taskId": "task_\u0000"}, bob)
    assert bad.status_code == 404


def cross_network_calls(a):
    """(tool, arguments naming network alpha's objects), as a caller of network beta."""
    return [
        ("network_ask", {"toInstance": a["inst"], "body": "x"}),
        ("network_ask", {"toAgent": "alpha-only", "body": "x"}),
        ("network_ask", {"toAgent": "bert", "threadId": a["thread"], "body": "x"}),
        ("network_ask", {"toAgent": "bert", "taskId": a["task"], "body": "x"}),
        ("network_reply", {"threadId": a["thread"], "body": "x"}),
        ("network_delegate", {"toInstance": a["inst"], "objective": "x"}),
        ("network_delegate", {"toAgent": "alpha-only", "objective": "x"}),
        ("network_task_get", {"taskId": a["task"]}),
        ("network_task_update", {"taskId": a["task"], "status": "accepted"}),
        ("network_claim", {"scope": "beta/**", "taskId": a["task"]}),
        ("network_release", {"claimId": a["claim"]}),
        ("network_publish_artifact", {"uri": "https://x.example", "taskId": a["task"]}),
        ("delegate", {"target": "alpha-only", "prompt": "x", "timeout": 0}),
        ("peers", {"action": "describe", "name": "alpha-only"}),
        ("channels", {"action": "open", "type": "conversation", "target": "alpha-only"}),
        ("channels", {"action": "info", "channel_id": a["channel"]}),
        ("channels", {"action": "close", "channel_id": a["channel"]}),
        ("tasks", {"action": "status", "task_id": a["task"]}),
        ("tasks", {"action": "wait", "task_id": a["task"], "timeout": 0}),
        ("tasks", {"action": "progress", "task_id": a["task"], "payload": "x"}),
        ("tasks", {"action": "complete", "task_id": a["task"]}),
        ("tasks", {"action": "cancel", "task_id": a["task"]}),
        ("context", {"action": "quote", "speaker": "alice", "channel_id": a["channel"]}),
        ("context", {"action": "quote", "speaker": "alice", "thread_id": a["thread"]}),
        ("context", {"action": "search", "query": "alpha", "channel_id": a["channel"]}),
        ("say", {"channel_id": a["channel"], "content": "x"}),
        ("handoff", {"channel_id": a["channel"], "content": "x"}),
        *[(tool.name, {"networkId": a["net"], **args}) for tool, args in (
            (TOOLS["control_use_network"], {}), (TOOLS["control_network_status"], {}),
            (TOOLS["control_list_agents"], {}), (TOOLS["control_find_agents"], {}),
            (TOOLS["control_list_tasks"], {}), (TOOLS["control_list_blocked"], {}),
            (TOOLS["control_get_history"], {}), (TOOLS["control_get_graph"], {}),
            (TOOLS["control_task_status"], {"taskId": a["task"]}),
            (TOOLS["control_get_thread"], {"threadId": a["thread"]}),
            (TOOLS["control_ask"], {"toAgent": "alice", "body": "x"}),
            (TOOLS["control_reply"], {"threadId": a["thread"], "body": "x"}),
            (TOOLS["control_delegate"], {"toAgent": "alice", "objective": "x"}),
            (TOOLS["control_wake_agent"], {"toAgent": "alice"}),
            (TOOLS["control_launch_agent"], {"agentName": "alice"}),
            (TOOLS["control_stop_agent"], {"instanceId": a["inst"]}),
            (TOOLS["control_restart_agent"], {"instanceId": a["inst"]}),
            (TOOLS["control_release_claim"], {"claimId": a["claim"]}),
            (TOOLS["control_cancel_task"], {"taskId": a["task"]}))],
        # the representative's own network, alpha's objects
        ("control_task_status", {"taskId": a["task"]}),
        ("control_get_thread", {"threadId": a["thread"]}),
        ("control_ask", {"toInstance": a["inst"], "body": "x"}),
        ("control_reply", {"threadId": a["thread"], "body": "x"}),
        ("control_delegate", {"toInstance": a["inst"], "objective": "x"}),
        ("control_wake_agent", {"toInstance": a["inst"]}),
        ("control_launch_agent", {"agentName": "alpha-only"}),
        ("control_stop_agent", {"instanceId": a["inst"]}),
        ("control_restart_agent", {"instanceId": a["inst"]}),
        ("control_release_claim", {"claimId": a["claim"]}),
        ("control_cancel_task", {"taskId": a["task"]}),
    ]


def secrets_of(a) -> list[str]:
    return [a["net"], a["inst"], a["task"], a["thread"], a["claim"], a["channel"], "alpha-only",
            "alpha-secret", "alpha.example", "alice"]


def test_objects_of_another_network_are_404_on_every_tool(world):
    before = world["scan"]()
    calls = cross_network_calls(world["alpha"])
    covered = {tool for tool, _ in calls}
    # every tool that names an object or a network is in the list
    assert covered >= {t for t in TOOLS if t not in (
        "network_whoami", "network_discover", "network_inbox", "network_register_capabilities",
        "control_whoami", "control_list_networks", "control_channel_send", "control_channel_history")}
    for tool, args in calls:
        response = world["call"](tool, args, token_for(world, tool))
        assert response.status_code == 404, (tool, args, response.status_code, response.text[:300])
        assert response.json()["error"]["code"] == "not_found"
        sent = json.dumps(args)  # an error may echo what the caller sent, nothing more
        assert not any(s in response.text for s in secrets_of(world["alpha"]) if s not in sent), (tool, response.text)
    assert world["scan"]() == before


LISTINGS = [
    ("network_whoami", {}), ("network_discover", {}), ("network_inbox", {}),
    ("network_register_capabilities", {"capabilities": []}),
    ("peers", {"action": "find"}), ("channels", {"action": "list", "state": "all"}),
    ("tasks", {"action": "list", "scope": "all", "state": "all"}),
    ("context", {"action": "search", "query": "alpha"}),
    ("context", {"action": "search", "query": "alpha", "scope": "knowledge"}),
    ("control_whoami", {}), ("control_list_networks", {}), ("control_network_status", {}),
    ("control_list_agents", {}), ("control_find_agents", {}), ("control_list_tasks", {}),
    ("control_list_blocked", {}), ("control_get_history", {}), ("control_get_graph", {}),
    ("control_channel_history", {}),
]


@pytest.mark.parametrize("tool,args", LISTINGS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(LISTINGS)])
def test_what_a_caller_of_another_network_sees_holds_nothing_of_this_one(world, tool, args):
    response = world["call"](tool, args, token_for(world, tool))
    assert response.status_code == 200, response.text[:300]
    leaked = [s for s in secrets_of(world["alpha"]) if s in response.text]
    assert not leaked, (tool, leaked, response.text[:500])
