"""Task notices through the handlers on DynamoDB Local (PROTOCOL.md 4.8, issue 24): each accepted
update sends a ``task_update`` to the creator's agent, and to the assignee too when the creator
cancels; whichever surface cancels, the creator's other instances learn the task ended."""

from __future__ import annotations

import pytest

from tests.conftest import apply

SPEC = """
network: notices
agents:
  - {name: alice, instances: 2}
  - {name: bob, instances: 1, responsibilities: [{resource: github.com/acme/api, actions: [implement]}]}
representatives:
  - {name: ops, grants: {notices: operate}}
"""


@pytest.fixture
def net(server_table):
    return apply(SPEC)


def _updates(api, token):
    status, out, _ = api("network_inbox", {}, token)
    assert status == 200
    return [(m["taskId"], m["body"]) for m in out["messages"] if m["kind"] == "task_update"]


def _cancel(api, net, how, task_id):
    if how == "worker":
        return api("network_task_update", {"taskId": task_id, "status": "cancelled"}, net.token("alice0"))
    if how == "plugin":
        return api("tasks", {"action": "cancel", "task_id": task_id}, net.token("alice0"))
    return api("control_cancel_task", {"taskId": task_id}, net.tokens["representatives"]["ops"])


@pytest.mark.parametrize("held", [False, True], ids=["offered", "accepted"])
@pytest.mark.parametrize("target", [{"toAgent": "bob"}, {"resource": "github.com/acme/api"}], ids=["agent", "resource"])
@pytest.mark.parametrize("how", ["worker", "plugin", "control"])
def test_a_cancel_tells_the_creators_agent_and_the_assignee_once_each(api, net, how, target, held):
    alice0, alice1, bob = net.token("alice0"), net.token("alice1"), net.token("bob0")
    status, task, _ = api("network_delegate", {"objective": "ship it", **target}, alice0)
    assert status == 200 and task["state"] == "offered", task
    (offer,) = api("network_inbox", {}, bob)[1]["messages"]
    assert offer["kind"] == "task_offer"
    if held:
        assert api("network_task_update", {"taskId": task["taskId"], "status": "accepted"}, bob)[0] == 200
        assert _updates(api, alice1) == [(task["taskId"], "Task 'ship it' is now accepted.")]
    status, out, _ = _cancel(api, net, how, task["taskId"])
    assert status == 200 and out["task"]["state"] == "cancelled", out
    assert _updates(api, alice1) == [(task["taskId"], "Task 'ship it' is now cancelled.")]
    assert _updates(api, bob) == [(task["taskId"], "Task 'ship it' is now cancelled.")]
    assert _updates(api, alice0) == []  # its own notice is never delivered to the instance that sent it
    got = api("network_task_get", {"taskId": task["taskId"]}, alice1)[1]["task"]
    assert got["target"] == ({"agent": "bob"} if "toAgent" in target else {"resource": "github.com/acme/api"})
