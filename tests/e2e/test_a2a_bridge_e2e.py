"""A remote A2A agent as a member of a Relaynet network (issue 28 part 3, docs/protocol.md 13.4).

The remote is served in this test process by the official SDK's own server classes (``a2a-sdk``:
an ``AgentExecutor`` under ``DefaultRequestHandler`` with an ``InMemoryTaskStore``, its JSON-RPC
and Agent Card routes, on uvicorn), behind a check of the bearer credentials the spec gives it.
The hub is `relaynet serve` on DynamoDB Local with a spec whose ``remote`` agent is
``a2a: {url: <its card>}``. Relaynet agents delegate to it with network_delegate, and the tests
watch the Relaynet task: sent with SendMessage, followed to COMPLETED with its artifact, blocked
on INPUT_REQUIRED with the remote's question, cancelled in Relaynet and so on the remote.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading

import pytest
from a2a.server.agent_execution import AgentExecutor
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

from tests.e2e.a2a_remote import sdk_remote
from tests.e2e.conftest import RELAYNET, ROOT, start_hub, stop_hub, tool, until

SECRET = "remote-agent-credential-0123456789"
SIDE_BY_SIDE = 3


class Remote(AgentExecutor):
    """The remote agent: works on a task until the test releases it (``release[objective]``),
    then publishes a URL artifact and a text artifact and completes; an objective starting with
    "ask:" asks for input instead, and one starting with "side:" answers only once
    :data:`SIDE_BY_SIDE` such tasks are in flight together. Records what it was sent and what it was
    asked to cancel."""

    def __init__(self):
        self.received: list[pb.Message] = []
        self.cancelled: list[str] = []
        self.release: dict[str, threading.Event] = {}
        self.side = threading.Barrier(SIDE_BY_SIDE)

    def gate(self, objective: str) -> threading.Event:
        return self.release.setdefault(objective, threading.Event())

    async def execute(self, context, event_queue):
        self.received.append(context.message)
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.message.parts[0].text.startswith("side:"):  # under the client's 10 s timeout
            await asyncio.to_thread(self.side.wait, 8)  # broken (a serial sender): this raises
            await event_queue.enqueue_event(up.new_agent_message([pb.Part(text="side by side")]))
            return
        if context.current_task is None:
            await event_queue.enqueue_event(pb.Task(id=context.task_id, context_id=context.context_id,
                                                    status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED),
                                                    history=[context.message]))
        objective = context.message.parts[0].text
        await up.start_work()
        gate = self.gate(objective)
        while not gate.is_set():
            await asyncio.sleep(0.05)
        if objective.startswith("ask:"):
            await up.requires_input(up.new_agent_message([pb.Part(text="Which branch should I target?")]))
            return
        await up.add_artifact([pb.Part(url="https://example.com/reports/42.html", filename="report-42.html",
                                       media_type="text/html")], name="report")
        await up.add_artifact([pb.Part(text="3 flaky tests quarantined")], name="summary")
        await up.complete(up.new_agent_message([pb.Part(text="Done: see the report")]))

    async def cancel(self, context, event_queue):
        self.cancelled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class _Bearer(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        if request.headers.get("authorization") != f"Bearer {SECRET}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)


@pytest.fixture(scope="module")
def remote():
    executor = Remote()
    skill = pb.AgentSkill(id="flaky", name="Flaky tests", description="Finds and quarantines", tags=["ci"])
    with sdk_remote(executor, "flaky-fixer", "Quarantines flaky tests", skill, middleware=_Bearer) as url:
        executor.url = url
        yield executor


@pytest.fixture(scope="module")
def hub(tmp_path_factory, remote):
    tmp = tmp_path_factory.mktemp("bridge")
    spec = tmp / "spec.yaml"
    spec.write_text((ROOT / "examples" / "demo-network.yaml").read_text().replace("agents:\n", f"""agents:
  - name: remote
    description: A CI agent reached over A2A
    a2a: {{url: "{remote.url}", authentication: {{schemes: [Bearer], credentials: {SECRET}}}}}
""", 1))
    h = start_hub(tmp, "--sweep-interval", "0.5", spec=spec)
    yield h
    stop_hub(h)


def task(hub, task_id: str) -> dict:
    return tool(hub, "network_task_get", {"taskId": task_id}, hub.token("planner"))["task"]


def delegate(hub, objective: str, criteria: list[str] | None = None) -> str:
    return tool(hub, "network_delegate", {"toAgent": "remote", "title": objective[:40], "objective": objective,
                                          "acceptanceCriteria": criteria or []}, hub.token("planner"))["taskId"]


def state_is(hub, task_id: str, *states: str):
    return lambda: (lambda t: t if t["state"] in states else None)(task(hub, task_id))


def test_the_remote_is_a_member_others_discover_without_its_credentials(hub):
    found = tool(hub, "network_discover", {}, hub.token("coder"))
    remote = next(a for a in found["agents"] if a["name"] == "remote")
    assert remote["a2a"]["url"].endswith("/.well-known/agent-card.json")
    assert remote["a2a"]["authentication"] == {"schemes": ["Bearer"]}
    assert SECRET not in str(found)
    assert "remote" not in hub.tokens["networks"]["demo"]["instances"]  # no token: the hub acts as it
    ops = hub.tokens["representatives"]["ops"]

    def bridged():
        agents = tool(hub, "control_list_agents", {"networkId": hub.tokens["networks"]["demo"]["networkId"]}, ops)
        inst = next(a for a in agents["agents"] if a["name"] == "remote")["instances"][0]
        return agents if (inst.get("a2a") or {}).get("ok") else None

    agents = until(bridged, "the hub read the remote's card", 30)
    assert SECRET not in str(agents)


def test_a_delegated_task_is_sent_followed_and_completes_with_its_artifact(hub, remote):
    task_id = delegate(hub, "Quarantine the flaky tests in ci/", ["no test deleted", "a report linked"])
    working = until(state_is(hub, task_id, "working"), "the remote started work", 30)
    found = tool(hub, "network_discover", {}, hub.token("planner"))
    assert working["assignee"] == next(a for a in found["agents"] if a["name"] == "remote")["instances"][0]["id"]
    sent = next(m for m in remote.received if m.parts[0].text == "Quarantine the flaky tests in ci/")
    assert [p.text for p in sent.parts] == ["Quarantine the flaky tests in ci/", "no test deleted", "a report linked"]
    assert sent.message_id == task_id
    remote.gate("Quarantine the flaky tests in ci/").set()
    done = until(state_is(hub, task_id, "completed", "failed"), "the remote completed it", 60)
    assert done["state"] == "completed", done
    assert [(a["uri"], a["label"]) for a in done["artifacts"]] == [("https://example.com/reports/42.html", "report-42.html")]
    evidence = done["history"][-1]["reason"]
    assert "Done: see the report" in evidence and "summary: 3 flaky tests quarantined" in evidence


def test_input_required_blocks_the_task_with_the_remotes_question(hub, remote):
    task_id = delegate(hub, "ask: rebase the release branch")
    until(state_is(hub, task_id, "working"), "the remote started work", 30)
    remote.gate("ask: rebase the release branch").set()
    blocked = until(state_is(hub, task_id, "blocked"), "the remote asked for input", 60)
    assert blocked["history"][-1]["reason"] == "Which branch should I target?"


def test_a_relaynet_cancel_becomes_cancel_task_on_the_remote(hub, remote):
    task_id = delegate(hub, "Bisect the nightly failure")
    until(state_is(hub, task_id, "working"), "the remote started work", 30)
    tool(hub, "network_task_update", {"taskId": task_id, "status": "cancelled", "reason": "not needed"},
         hub.token("planner"))
    until(lambda: remote.cancelled, "CancelTask reached the remote", 30)
    assert task(hub, task_id)["state"] == "cancelled"


def test_the_bridge_sends_a_members_tasks_side_by_side_so_a_slow_remote_delays_each_once(hub, remote):
    ids = [delegate(hub, f"side: shard {n}") for n in range(SIDE_BY_SIDE)]
    for task_id in ids:
        done = until(state_is(hub, task_id, "completed", "failed"), "each side-by-side task settled", 60)
        assert (done["state"], done["history"][-1]["reason"]) == ("completed", "side by side")


def test_admin_apply_local_takes_the_loopback_card_url_the_local_stack_takes(hub):
    out = subprocess.run([RELAYNET, "admin", "apply", "spec.yaml", "--local"], cwd=hub.cwd,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr  # the same rules as `relaynet serve`: http to 127.0.0.1 allowed
