"""A remote A2A agent that takes push configs is followed by its notifications, not by polls
(issue 28 part 3, docs/protocol.md 13.4 "Push").

The remote is the official SDK's server with its own push machinery (``InMemoryPushNotificationConfigStore``
and ``BasePushNotificationSender``, its card saying ``pushNotifications``). The hub is
`relaynet serve` on DynamoDB Local with ``--sweep-interval 0``: no scheduled bridge run ever
happens, so the offer can only be sent at its write and a change on the remote can only reach
the Relaynet task by the remote's notification to ``/a2a/<network>/push/<instance>/<task>``.
"""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2 as pb

from tests.e2e.a2a_remote import sdk_remote
from tests.e2e.conftest import ROOT, start_hub, stop_hub, tool, until


class Remote(AgentExecutor):
    """Works on each task until the test releases it (``release[objective]``), then completes
    it with a text artifact. Keeps each SendMessage's push config (``configs``)."""

    def __init__(self):
        self.release: dict[str, threading.Event] = {}
        self.configs: list[pb.TaskPushNotificationConfig] = []

    def gate(self, objective: str) -> threading.Event:
        return self.release.setdefault(objective, threading.Event())

    async def execute(self, context, event_queue):
        config = context.configuration.task_push_notification_config if context.configuration else None
        if config is not None and config.url:
            self.configs.append(config)
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(pb.Task(id=context.task_id, context_id=context.context_id,
                                                    status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED),
                                                    history=[context.message]))
        objective = context.message.parts[0].text
        await up.start_work()
        gate = self.gate(objective)
        while not gate.is_set():
            await asyncio.sleep(0.05)
        await up.add_artifact([pb.Part(text="suite green twice")], name="summary")
        await up.complete(up.new_agent_message([pb.Part(text="Rerun done")]))

    async def cancel(self, context, event_queue):
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


@pytest.fixture(scope="module")
def remote():
    executor = Remote()
    skill = pb.AgentSkill(id="rerun", name="Rerun", description="Reruns a suite", tags=["ci"])
    with sdk_remote(executor, "rerunner", "Reruns suites", skill, push=True) as url:
        executor.url = url
        yield executor


@pytest.fixture(scope="module")
def hub(tmp_path_factory, remote):
    tmp = tmp_path_factory.mktemp("bridge-push")
    spec = tmp / "spec.yaml"
    spec.write_text((ROOT / "examples" / "demo-network.yaml").read_text().replace("agents:\n", f"""agents:
  - name: rerunner
    description: Reruns suites over A2A
    a2a: {{url: "{remote.url}"}}
""", 1))
    h = start_hub(tmp, "--sweep-interval", "0", spec=spec)
    yield h
    stop_hub(h)


def task(hub, task_id: str) -> dict:
    return tool(hub, "network_task_get", {"taskId": task_id}, hub.token("planner"))["task"]


def test_a_change_on_the_remote_reaches_the_task_by_its_notification_with_no_poll(hub, remote):
    objective = "Rerun the flaky suite"
    task_id = tool(hub, "network_delegate", {"toAgent": "rerunner", "title": "rerun", "objective": objective},
                   hub.token("planner"))["taskId"]
    until(lambda: task(hub, task_id)["state"] == "working", "the task sent at its write, then working by the remote's notification", 30)
    config = remote.configs[-1]
    assert config.url.startswith(f"{hub.url}/a2a/") and "/push/" in config.url and config.url.endswith(f"/{task_id}")
    assert len(config.token) >= 32
    remote.gate(objective).set()  # the remote completes: only its notification can tell the hub
    done = until(lambda: (lambda t: t if t["state"] == "completed" else None)(task(hub, task_id)),
                 "the task completed by the notification", 30)
    assert "summary: suite green twice" in json.dumps(done)  # the artifact's text, in the evidence


def test_a_notification_without_the_token_is_refused_and_changes_nothing(hub, remote):
    objective = "Rerun the slow suite"
    task_id = tool(hub, "network_delegate", {"toAgent": "rerunner", "title": "slow", "objective": objective},
                   hub.token("planner"))["taskId"]
    until(lambda: task(hub, task_id)["state"] == "working", "the task working", 30)
    url = remote.configs[-1].url
    body = {"statusUpdate": {"taskId": "x", "status": {"state": "TASK_STATE_COMPLETED"}}}
    for headers in ({}, {"X-A2A-Notification-Token": "not-the-token-" + "x" * 30}):
        resp = httpx.post(url, json=body, headers=headers, timeout=10)
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "unauthenticated", resp.text
    resp = httpx.post(url, content=b"not json", headers={"X-A2A-Notification-Token": remote.configs[-1].token},
                      timeout=10)
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_argument", resp.text
    gone = url.rsplit("/", 1)[0] + "/task_unknown"
    resp = httpx.post(gone, json=body, headers={"X-A2A-Notification-Token": remote.configs[-1].token}, timeout=10)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found", resp.text
    assert task(hub, task_id)["state"] == "working"
    remote.gate(objective).set()
    until(lambda: task(hub, task_id)["state"] == "completed", "then the remote's own notification completes it", 30)
