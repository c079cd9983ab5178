"""The control surface (PROTOCOL.md 6) through the real handlers: grants, the two-step stop and
restart, launch, and the surfaces never mixing."""

from __future__ import annotations

import pytest

from relaynet.catalogue import CONTROL_TOOLS
from tests.conftest import apply

SPEC = """
network: ops
agents:
  - {name: lead, instances: 1}
  - {name: coder, instances: 2, responsibilities: [{resource: github.com/acme/api, actions: [implement]}]}
representatives:
  - {name: watcher, grants: {ops: observe}}
  - {name: talker, grants: {ops: communicate}}
  - {name: boss, grants: {ops: delegate}}
  - {name: admin, grants: {ops: operate}}
---
network: elsewhere
agents:
  - {name: solo, instances: 1}
representatives:
  - {name: outsider, grants: {elsewhere: operate}}
"""
LEVELS = ["watcher", "talker", "boss", "admin"]  # observe < communicate < delegate < operate
NEEDS = {
    "control_whoami": None, "control_list_networks": None, "control_channel_send": None,
    "control_channel_history": None,
    "control_use_network": 0, "control_network_status": 0, "control_list_agents": 0, "control_find_agents": 0,
    "control_list_tasks": 0, "control_task_status": 0, "control_list_blocked": 0, "control_get_history": 0,
    "control_get_thread": 0, "control_get_graph": 0,
    "control_ask": 1, "control_reply": 1,
    "control_delegate": 2, "control_cancel_task": 2,
    "control_wake_agent": 3, "control_launch_agent": 3, "control_stop_agent": 3, "control_restart_agent": 3,
    "control_release_claim": 3,
}


@pytest.fixture
def ops(table):
    net = apply(SPEC)
    return net


def _args(api, net, tool):
    lead, coder = net.token("lead0"), net.token("coder0")
    if tool == "control_use_network":
        return {"networkId": net.network_id}
    if tool == "control_find_agents":
        return {"resourceKey": "github.com/acme/api"}
    if tool in ("control_task_status", "control_cancel_task"):
        return {"taskId": api("network_delegate", {"objective": "x", "toAgent": "coder"}, lead)[1]["taskId"]}
    if tool == "control_get_thread":
        return {"threadId": api("network_ask", {"body": "x", "toAgent": "coder"}, lead)[1]["threadId"]}
    if tool == "control_ask":
        return {"toAgent": "lead", "body": "status?"}
    if tool == "control_reply":
        return {"threadId": api("network_ask", {"body": "x", "toAgent": "coder"}, lead)[1]["threadId"], "body": "ok"}
    if tool == "control_delegate":
        return {"toAgent": "coder", "objective": "bump the version"}
    if tool == "control_wake_agent":
        return {"toAgent": "coder"}
    if tool == "control_launch_agent":
        return {"agentName": "coder"}
    if tool in ("control_stop_agent", "control_restart_agent"):
        return {"instanceId": net.principals["coder1"].instance_id}
    if tool == "control_release_claim":
        return {"claimId": api("network_claim", {"scope": f"src/{len(str(id(net)))}/**"}, coder)[1]["claimId"]}
    if tool == "control_channel_send":
        return {"body": "hello owner"}
    return {}


def test_the_matrix_covers_every_control_tool():
    assert set(NEEDS) == {t.name for t in CONTROL_TOOLS} and len(NEEDS) == 23


@pytest.mark.parametrize("tool", sorted(NEEDS))
def test_each_tool_answers_200_at_or_above_its_grant_and_403_below(api, ops, tool):
    for level, rep in enumerate(LEVELS):
        status, body, _ = api(tool, _args(api, ops, tool), ops.tokens["representatives"][rep])
        needed = NEEDS[tool]
        expected = 200 if needed is None or level >= needed else 403
        assert status == expected, (tool, rep, body)
        if expected == 403:
            assert body["error"]["code"] == "permission_denied"


def test_a_network_without_any_grant_is_404(api, ops):
    outsider = ops.tokens["representatives"]["outsider"]
    status, body, _ = api("control_network_status", {"networkId": ops.network_id}, outsider)
    assert (status, body["error"]["code"]) == (404, "not_found")


def test_the_surfaces_never_mix(api, ops):
    assert api("control_whoami", {}, ops.token("lead0"))[0] == 403
    assert api("network_whoami", {}, ops.tokens["representatives"]["admin"])[0] == 403


def test_whoami_shows_grants_and_the_active_network(api, ops):
    status, me, _ = api("control_whoami", {}, ops.tokens["representatives"]["admin"])
    assert status == 200 and me["representative"]["name"] == "admin"
    assert me["grants"] == [{"networkId": ops.network_id, "name": "ops", "grant": "operate"}]
    assert me["activeNetwork"] == ops.network_id


def test_a_two_step_stop_revokes_the_token_frees_claims_and_requeues_tasks(api, ops):
    admin, lead = ops.tokens["representatives"]["admin"], ops.token("lead0")
    victim, other = ops.principals["coder0"], ops.principals["coder1"]
    victim_token = ops.token("coder0")
    claim = api("network_claim", {"scope": "src/**"}, victim_token)[1]
    task = api("network_delegate", {"objective": "x", "toInstance": victim.instance_id}, lead)[1]
    assert task["assignee"] == victim.instance_id
    first = api("control_stop_agent", {"instanceId": victim.instance_id}, admin)[1]
    assert set(first) >= {"confirmationId", "expiresAt"}
    assert api("network_whoami", {}, victim_token)[0] == 200  # nothing happens before step two
    status, body, _ = api("control_stop_agent", {"instanceId": victim.instance_id, "confirmationId": "conf_nope"}, admin)
    assert status == 400 and body["error"]["details"]["fields"][0]["field"] == "confirmationId"
    done = api("control_stop_agent", {"instanceId": victim.instance_id, "confirmationId": first["confirmationId"]}, admin)[1]
    assert done["status"] == "stopped" and done["releasedClaims"] == 1 and done["requeuedTasks"] == [task["taskId"]]
    assert api("network_whoami", {}, victim_token)[0] == 401
    assert api("network_claim", {"scope": "src/a.py"}, ops.token("coder1"))[0] == 200
    assert api("control_task_status", {"taskId": task["taskId"]}, admin)[1]["task"]["state"] == "pending"
    again = api("control_stop_agent", {"instanceId": victim.instance_id, "confirmationId": first["confirmationId"]}, admin)
    assert again[0] == 400  # a confirmation is used once
    assert api("control_release_claim", {"claimId": claim["claimId"]}, admin)[1]["reason"] == "already_released"
    # the requeued task was pinned to the stopped instance: nobody else is eligible, it stays pending
    from relaynet import sweep

    sweep.run()
    assert api("control_task_status", {"taskId": task["taskId"]}, admin)[1]["task"]["state"] == "pending"
    assert other.instance_id


def test_a_stopped_instances_offered_task_goes_to_another_instance(api, ops):
    from relaynet import sweep

    admin, lead = ops.tokens["representatives"]["admin"], ops.token("lead0")
    task = api("network_delegate", {"objective": "x", "toAgent": "coder"}, lead)[1]
    holder = task["assignee"]
    first = api("control_stop_agent", {"instanceId": holder}, admin)[1]
    api("control_stop_agent", {"instanceId": holder, "confirmationId": first["confirmationId"]}, admin)
    sweep.run()
    after = api("control_task_status", {"taskId": task["taskId"]}, admin)[1]["task"]
    assert after["state"] == "offered" and after["assignee"] not in (None, holder)


def test_launch_gives_a_working_token_and_restart_rotates_it(api, ops):
    admin = ops.tokens["representatives"]["admin"]
    launched = api("control_launch_agent", {"agentName": "coder"}, admin)[1]
    assert api("network_whoami", {}, launched["token"])[1]["instance"]["id"] == launched["instanceId"]
    first = api("control_restart_agent", {"instanceId": launched["instanceId"]}, admin)[1]
    rotated = api("control_restart_agent", {"instanceId": launched["instanceId"],
                                            "confirmationId": first["confirmationId"]}, admin)[1]
    assert rotated["instanceId"] == launched["instanceId"] and rotated["token"] != launched["token"]
    assert api("network_whoami", {}, launched["token"])[0] == 401
    assert api("network_whoami", {}, rotated["token"])[0] == 200


def test_history_records_what_the_hub_did_newest_first(api, ops):
    lead, admin = ops.token("lead0"), ops.tokens["representatives"]["admin"]
    api("network_ask", {"body": "hi", "toAgent": "coder"}, lead)
    api("network_delegate", {"objective": "x", "toAgent": "coder"}, lead)
    api("network_claim", {"scope": "docs/**"}, ops.token("coder0"))
    events = api("control_get_history", {"limit": 10}, admin)[1]["events"]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "claim" and "task" in kinds and "message" in kinds
    page = api("control_get_history", {"limit": 2}, admin)[1]
    rest = api("control_get_history", {"limit": 10, "cursor": page["nextCursor"]}, admin)[1]["events"]
    assert [e["id"] for e in page["events"]] + [e["id"] for e in rest] == [e["id"] for e in events]


def test_the_graph_has_agents_instances_and_delegation_edges(api, ops):
    api("network_delegate", {"objective": "x", "toAgent": "coder"}, ops.token("lead0"))
    graph = api("control_get_graph", {}, ops.tokens["representatives"]["watcher"])[1]
    kinds = {n["kind"] for n in graph["nodes"]}
    assert {"agent", "instance"} <= kinds
    assert {"from": "agent:lead", "to": "agent:coder", "kind": "delegated", "label": "1"} in graph["edges"]
    from relaynet.mermaid import mermaid

    assert mermaid(graph).startswith("flowchart LR")


MISSING = {  # a well-formed name or id of an object that is not in the network
    "control_cancel_task": {"taskId": "task_01ABCDEFGHJKMNPQRSTVWXYZ00"},
    "control_stop_agent": {"instanceId": "inst_01ABCDEFGHJKMNPQRSTVWXYZ00"},
    "control_restart_agent": {"instanceId": "inst_01ABCDEFGHJKMNPQRSTVWXYZ00"},
    "control_release_claim": {"claimId": "clm_01ABCDEFGHJKMNPQRSTVWXYZ00"},
    "control_launch_agent": {"agentName": "nobody"},
    "control_wake_agent": {"toAgent": "nobody"},
    "control_ask": {"toAgent": "nobody", "body": "hello?"},
    "control_reply": {"threadId": "thr_01ABCDEFGHJKMNPQRSTVWXYZ00", "body": "hello?"},
    "control_delegate": {"toAgent": "nobody", "objective": "x"},
}


@pytest.mark.parametrize("tool", sorted(MISSING))
def test_an_object_that_does_not_exist_is_404_before_any_grant_check(api, ops, tool):
    # PROTOCOL.md 2: existence (404) is checked before permission (403), even for a watcher
    # whose grant is too low for the tool
    for rep in LEVELS:
        status, body, _ = api(tool, MISSING[tool], ops.tokens["representatives"][rep])
        assert (status, body["error"]["code"]) == (404, "not_found"), (tool, rep, body)


def test_a_creators_cancel_notifies_the_assignee_too(api, ops):
    lead, coder = ops.token("lead0"), ops.principals["coder0"]
    task = api("network_delegate", {"objective": "x", "toInstance": coder.instance_id}, lead)[1]
    api("network_task_update", {"taskId": task["taskId"], "status": "accepted"}, ops.token("coder0"))
    api("network_inbox", {}, ops.token("coder0"))
    status, _, _ = api("tasks", {"action": "cancel", "task_id": task["taskId"], "reason": "not needed"}, lead)
    assert status == 200
    (notice,) = api("network_inbox", {}, ops.token("coder0"))[1]["messages"]
    assert notice["kind"] == "task_update" and notice["taskId"] == task["taskId"] and notice["state"] == "cancelled"
    assert "not needed" in notice["body"]
    # the creator's side hears it too (its agent's mailbox, for its other instances)
    assert api("control_task_status", {"taskId": task["taskId"]}, ops.tokens["representatives"]["watcher"])[1][
        "task"]["state"] == "cancelled"


def test_a_representatives_cancel_notifies_the_creator_and_the_assignee(api, ops):
    lead, coder = ops.token("lead0"), ops.principals["coder1"]
    task = api("network_delegate", {"objective": "y", "toInstance": coder.instance_id}, lead)[1]
    api("network_task_update", {"taskId": task["taskId"], "status": "accepted"}, ops.token("coder1"))
    api("network_inbox", {}, ops.token("coder1"))
    api("network_inbox", {}, lead)
    status, _, _ = api("control_cancel_task", {"taskId": task["taskId"], "reason": "scope cut"},
                       ops.tokens["representatives"]["boss"])
    assert status == 200
    for token in (lead, ops.token("coder1")):
        (notice,) = api("network_inbox", {}, token)[1]["messages"]
        assert notice["kind"] == "task_update" and notice["state"] == "cancelled"


def test_status_lists_the_live_claims_and_the_open_channels_with_whose_turn(api, ops):
    watcher, lead, coder = ops.tokens["representatives"]["watcher"], ops.token("lead0"), ops.token("coder0")
    before = api("control_network_status", {}, watcher)[1]
    assert (before["claims"], before["channels"], before["activeClaims"], before["openChannels"]) == ([], [], 0, 0)
    claim = api("network_claim", {"scope": "src/api/**", "ttlSeconds": 120}, coder)[1]
    opened = api("channels", {"action": "open", "type": "consulting", "target": "coder", "intent": "review",
                              "message": "is src/api ready?"}, lead)[1]
    closed = api("channels", {"action": "open", "type": "conversation", "target": "coder"}, lead)[1]
    api("channels", {"action": "close", "channel_id": closed["channel_id"]}, lead)
    status = api("control_network_status", {}, watcher)[1]
    assert status["activeClaims"] == 1 and status["openChannels"] == 1
    (listed,) = status["claims"]
    assert listed["claimId"] == claim["claimId"] and listed["scope"] == "src/api/**"
    assert listed["holder"]["instanceId"] == ops.principals["coder0"].instance_id
    assert listed["expiresAt"] == claim["expiresAt"]
    (channel,) = status["channels"]
    assert channel["channel_id"] == opened["channel_id"] and channel["type"] == "consulting"
    assert channel["participants"] == ["lead", "coder"] and channel["intent"] == "review"
    assert channel["next_speaker"] == "coder"  # the prompt was sent: the respondent's turn
    api("network_release", {"claimId": claim["claimId"]}, coder)
    assert api("control_network_status", {}, watcher)[1]["claims"] == []


@pytest.mark.parametrize("tool", ["control_ask", "control_reply", "control_delegate", "control_cancel_task",
                                  "control_wake_agent", "control_release_claim"])
def test_a_call_with_the_grant_reads_each_named_object_once(api, ops, tool):
    # issue 16: the 404-before-403 check reads a named object only when the grant is too low; with
    # the grant, the domain's own read is the one (each object was read twice before)
    from relaynet.store import table as t

    args = _args(api, ops, tool)
    reads: list[tuple[str, str]] = []

    def record(params, model, **_):
        if model.name == "GetItem":
            reads.append((params["Key"]["PK"]["S"], params["Key"]["SK"]["S"]))
        elif model.name == "BatchGetItem":
            (req,) = params["RequestItems"].values()
            reads.extend((key["PK"]["S"], key["SK"]["S"]) for key in req["Keys"])

    t.client().meta.events.register("before-parameter-build.dynamodb", record, unique_id="reads-once")
    try:
        status, body, _ = api(tool, args, ops.tokens["representatives"]["admin"])
    finally:
        t.client().meta.events.unregister("before-parameter-build.dynamodb", unique_id="reads-once")
    assert status == 200, body
    assert sorted({key for key in reads if reads.count(key) > 1}) == []


BAD_ARGUMENTS = {  # well-typed, but refused by a check across fields or of a value's form
    "control_delegate": {"objective": "x"},  # neither a target nor a resource
    "control_wake_agent": {},  # neither toAgent nor toInstance
    "control_ask": {"toAgent": "nobody", "body": "x", "resource": "./x"},  # a bad resource, an unknown name
}


@pytest.mark.parametrize("tool", sorted(BAD_ARGUMENTS))
def test_bad_arguments_are_400_before_any_grant_or_existence_check(api, ops, tool):
    # PROTOCOL.md 2: arguments (400) before existence (404) and permission (403), whatever the grant
    for rep in LEVELS:
        status, body, _ = api(tool, BAD_ARGUMENTS[tool], ops.tokens["representatives"][rep])
        assert (status, body["error"]["code"]) == (400, "invalid_argument"), (tool, rep, body)
