"""A2A push notification configs end to end (docs/protocol.md 13.6, issue 28) on `relaynet serve`
with DynamoDB Local, the official SDK (``a2a-sdk``) as the client and a receiver on loopback: a
config round trip (create without the token coming back, get, list, delete); each transition an
instance makes reaches the receiver as an A2A StreamResponse, signed as Relaynet's webhooks are
and carrying A2A's X-A2A-Notification-Token and the config's Authorization, the artifact before
the COMPLETED; a config set with SendMessage; a failing receiver retried with the same delivery
id; bad configs refused with nothing written."""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils import errors as a2a_errors
from google.protobuf import json_format

from relaynet import webhooks
from tests.e2e.conftest import start_hub, stop_hub, tool
from tests.e2e.test_a2a_e2e import assignee_token, call, message, raw, task_count
from tests.e2e.test_webhooks_e2e import BACKOFF
from tests.webhook_receiver import receiver  # noqa: F401 - a fixture

TOKEN = "a2a-push-token-0123456789"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = start_hub(tmp_path_factory.mktemp("a2a-push"), "--sweep-interval", "0.2", env=BACKOFF)
    yield h
    stop_hub(h)


def pushed(receiver, path: str, token: str = TOKEN) -> tuple[pb.StreamResponse, dict]:
    """The next notification on ``path``: checked as Relaynet signs it, parsed as the SDK's
    StreamResponse."""
    headers, body, _ = receiver.next(path, timeout=10)
    doc = webhooks.verify(headers, body, token)
    assert headers["X-A2A-Notification-Token"] == token and headers["X-Relaynet-Event"] == "a2a_task"
    return json_format.ParseDict(doc, pb.StreamResponse()), headers


def config(task_id: str, url: str, config_id: str = "", token: str = TOKEN, **extra) -> pb.TaskPushNotificationConfig:
    return pb.TaskPushNotificationConfig(task_id=task_id, id=config_id, url=url, token=token, **extra)


def test_a_config_round_trip_and_each_transition_pushed_signed_with_the_artifact_first(hub, receiver):
    planner = hub.token("planner")
    task = call(hub, planner, "send_message", message("Push me along", message_id="a2a-push-1")).task
    made = call(hub, planner, "create_task_push_notification_config",
                config(task.id, f"{receiver.url}/p1", "hook-1",
                       authentication=pb.AuthenticationInfo(scheme="Bearer", credentials="receiver-key")))
    assert (made.id, made.task_id, made.url, made.token) == ("hook-1", task.id, f"{receiver.url}/p1", "")  # never the token
    assert made.authentication.scheme == "Bearer" and made.authentication.credentials == ""
    got = call(hub, planner, "get_task_push_notification_config",
               pb.GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1"))
    assert got.url == f"{receiver.url}/p1" and got.token == ""
    listed = call(hub, planner, "list_task_push_notification_configs",
                  pb.ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert [c.id for c in listed.configs] == ["hook-1"]
    # configs are the caller's own: another agent sees none and cannot read this one
    assert list(call(hub, hub.token("reviewer"), "list_task_push_notification_configs",
                     pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)).configs) == []
    with pytest.raises(a2a_errors.TaskNotFoundError):
        call(hub, hub.token("reviewer"), "get_task_push_notification_config",
             pb.GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1"))

    coder = assignee_token(hub, task.id)
    tool(hub, "network_task_update", {"taskId": task.id, "status": "accepted"}, coder)
    working, headers = pushed(receiver, "/p1")
    assert headers["Authorization"] == "Bearer receiver-key"
    assert working.status_update.task_id == task.id and working.status_update.status.state == pb.TASK_STATE_WORKING
    tool(hub, "network_task_update", {"taskId": task.id, "status": "working"}, coder)
    still, _ = pushed(receiver, "/p1")  # a Relaynet transition inside WORKING is an update too
    assert still.status_update.metadata["relaynet"]["state"] == "working"
    tool(hub, "network_publish_artifact", {"uri": "https://example.com/pr/11", "label": "PR 11", "type": "pull_request",
                                           "taskId": task.id}, coder)
    tool(hub, "network_task_update", {"taskId": task.id, "status": "completed", "reason": "merged"}, coder)
    artifact, _ = pushed(receiver, "/p1")
    assert artifact.artifact_update.artifact.parts[0].url == "https://example.com/pr/11"
    done, _ = pushed(receiver, "/p1")
    assert done.status_update.status.state == pb.TASK_STATE_COMPLETED
    assert done.status_update.status.message.parts[0].text == "merged"

    assert call(hub, planner, "delete_task_push_notification_config",
                pb.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")) is None
    assert list(call(hub, planner, "list_task_push_notification_configs",
                     pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)).configs) == []
    with pytest.raises(a2a_errors.UnsupportedOperationError):  # a terminal task has nothing left to push
        call(hub, planner, "create_task_push_notification_config", config(task.id, f"{receiver.url}/p1"))


def test_a_config_sent_with_the_message_is_set_on_the_task_it_creates(hub, receiver):
    planner = hub.token("planner")
    request = message("Push from the start", message_id="a2a-push-2")
    request.configuration.task_push_notification_config.CopyFrom(
        pb.TaskPushNotificationConfig(url=f"{receiver.url}/p2", token=TOKEN))
    task = call(hub, planner, "send_message", request).task
    listed = call(hub, planner, "list_task_push_notification_configs",
                  pb.ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert [(c.id, c.url) for c in listed.configs] == [(task.id, f"{receiver.url}/p2")]  # the id defaults to the task's
    tool(hub, "network_task_update", {"taskId": task.id, "status": "accepted"}, assignee_token(hub, task.id))
    working, _ = pushed(receiver, "/p2")
    assert working.status_update.status.state == pb.TASK_STATE_WORKING


def test_a_failing_receiver_is_retried_with_the_same_delivery_id(hub, receiver):
    planner = hub.token("planner")
    task = call(hub, planner, "send_message", message("Push through a failure", message_id="a2a-push-3")).task
    call(hub, planner, "create_task_push_notification_config", config(task.id, f"{receiver.url}/p3"))
    receiver.fail["/p3"] = 503
    tool(hub, "network_task_update", {"taskId": task.id, "status": "accepted"}, assignee_token(hub, task.id))
    first, first_headers = pushed(receiver, "/p3")
    receiver.fail.pop("/p3")
    again, again_headers = pushed(receiver, "/p3")  # the push-retry schedule, after the backoff
    assert again == first and again.status_update.status.state == pb.TASK_STATE_WORKING
    assert again_headers["X-Relaynet-Delivery"] == first_headers["X-Relaynet-Delivery"]


BAD = [
    ({"url": "ftp://example.com/x", "token": TOKEN}, "url"),
    ({"url": "https://example.com/x", "token": "short"}, "token"),
    ({"url": "https://example.com/x"}, "token"),
    ({"url": "https://example.com/x", "token": TOKEN, "id": "no spaces allowed"}, "id"),
]


@pytest.mark.parametrize("fields, bad", BAD)
def test_a_bad_config_is_invalid_params_naming_the_field_and_writes_nothing(hub, fields, bad):
    planner = hub.token("planner")
    task = call(hub, planner, "send_message", message(f"Bad config {bad}", message_id=f"a2a-push-bad-{bad}")).task
    r = raw(hub, planner, {"jsonrpc": "2.0", "id": 5, "method": "CreateTaskPushNotificationConfig",
                           "params": {"taskId": task.id, **fields}})
    error = r.json()["error"]
    assert error["code"] == -32602 and [f["field"] for f in error["data"]["fields"]] == [bad], error
    assert list(call(hub, planner, "list_task_push_notification_configs",
                     pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)).configs) == []
    before = task_count(hub)
    sent = raw(hub, planner, {"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {
        "message": {"messageId": f"a2a-push-bad-send-{bad}", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"taskPushNotificationConfig": fields}}}).json()
    assert sent["error"]["code"] == -32602
    assert sent["error"]["data"]["fields"][0]["field"] == f"configuration.taskPushNotificationConfig.{bad}"
    assert task_count(hub) == before  # the config is checked before the task is created
