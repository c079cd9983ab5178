"""A2A 1.0 on `relaynet serve` over real HTTP, on DynamoDB Local (docs/protocol.md 13, issue 28),
with the official A2A SDK (``a2a-sdk``) as the client: the agent card parses as the SDK's
``AgentCard``; SendMessage creates a Relaynet task the agent's instance is offered, a retry of
the same ``messageId`` creates nothing more, a follow-up lands in the task's thread; GetTask
follows the task through Relaynet's state machine to COMPLETED with its artifact; ListTasks
pages; CancelTask cancels once and is idempotent; and every bad request gets A2A's error and
writes nothing."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2 as pb
from a2a.utils import errors as a2a_errors

from tests.e2e.conftest import tool

CODER = "/a2a/demo/coder"


def run(coro):
    return asyncio.run(coro)


async def _client(hub, token: str | None, agent: str = "coder"):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    hc = httpx.AsyncClient(headers=headers, timeout=15)
    client = await create_client(f"{hub.url}/a2a/demo/{agent}", ClientConfig(httpx_client=hc, streaming=False))
    return client, hc


def call(hub, token: str, method: str, *args, agent: str = "coder"):
    """One SDK client call (``method`` of a2a.client.Client) with ``token``; for send_message, the
    single StreamResponse the non-streaming client yields."""
    async def go():
        client, hc = await _client(hub, token, agent)
        try:
            if method == "send_message":
                return [event async for event in client.send_message(*args)][0]
            return await getattr(client, method)(*args)
        finally:
            await hc.aclose()
    return run(go())


def message(*texts: str, message_id: str, task_id: str | None = None) -> pb.SendMessageRequest:
    msg = pb.Message(message_id=message_id, role=pb.ROLE_USER, parts=[pb.Part(text=t) for t in texts])
    if task_id:
        msg.task_id = task_id
    return pb.SendMessageRequest(message=msg)


def raw(hub, token: str | None, body, headers: dict[str, str] | None = None, path: str = CODER) -> httpx.Response:
    hdrs = {"A2A-Version": "1.0", **(headers or {})}
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx.post(f"{hub.url}{path}", content=content, headers={"Content-Type": "application/json", **hdrs}, timeout=15)


def assignee_token(hub, task_id: str) -> str:
    """The token of the coder instance the task was offered to."""
    assignee = tool(hub, "network_task_get", {"taskId": task_id}, hub.token("planner"))["task"]["assignee"]
    return next(i["token"] for i in hub.tokens["networks"]["demo"]["instances"]["coder"] if i["instanceId"] == assignee)


def task_count(hub) -> int:
    rep = hub.tokens["representatives"]["ops"]
    r = httpx.post(f"{hub.url}/v1/tools/control_list_tasks", json={"limit": 100},
                   headers={"Authorization": f"Bearer {rep}"}, timeout=10)
    assert r.status_code == 200, r.text
    return len(r.json()["tasks"])


def test_the_agent_card_is_public_and_parses_as_the_sdks_agent_card(hub):
    r = httpx.get(f"{hub.url}{CODER}/.well-known/agent-card.json", timeout=10)
    assert r.status_code == 200
    card = parse_agent_card(r.json())
    assert card.name == "coder"
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == \
        [(f"{hub.url}{CODER}", "JSONRPC", "1.0")]
    assert [s.id for s in card.skills] == ["implement"]
    assert card.skills[0].description == "Writes and changes code with tests"
    assert card.capabilities.streaming is True  # the local stack streams (docs/protocol.md 13.5)
    assert card.capabilities.push_notifications is True  # signed webhooks (docs/protocol.md 13.6)
    assert card.security_schemes["relaynet"].http_auth_security_scheme.scheme == "Bearer"
    secrets = [i["token"] for agents in hub.tokens["networks"]["demo"]["instances"].values() for i in agents]
    assert secrets and not any(secret in r.text for secret in secrets)

    listing = httpx.get(f"{hub.url}/a2a/demo", timeout=10).json()
    assert [c["name"] for c in listing["agents"]] == ["coder", "planner", "reviewer"]
    assert httpx.get(f"{hub.url}/a2a/demo/nobody/.well-known/agent-card.json", timeout=10).status_code == 404
    assert httpx.get(f"{hub.url}/a2a/nonet", timeout=10).status_code == 404


def test_send_creates_a_task_the_agent_is_offered_and_a_retried_message_id_creates_nothing(hub):
    planner = hub.token("planner")
    before = task_count(hub)
    sent = call(hub, planner, "send_message", message("Add a --verbose flag", "the help text lists it",
                                                    message_id="a2a-send-1"))
    task = sent.task
    assert task.status.state in (pb.TASK_STATE_SUBMITTED,)
    assert task.history[0].role == pb.ROLE_USER and "Add a --verbose flag" in task.history[0].parts[0].text
    again = call(hub, planner, "send_message", message("Add a --verbose flag", "the help text lists it",
                                                     message_id="a2a-send-1"))
    assert again.task.id == task.id
    assert task_count(hub) == before + 1

    relaynet = tool(hub, "network_task_get", {"taskId": task.id}, planner)["task"]
    assert relaynet["objective"] == "Add a --verbose flag"
    assert relaynet["acceptanceCriteria"] == ["the help text lists it"]
    assert relaynet["target"] == {"agent": "coder"}


def test_a_task_followed_to_completed_carries_its_artifact_and_a_follow_up_reaches_the_assignee(hub):
    planner = hub.token("planner")
    task = call(hub, planner, "send_message", message("Fix the date parser", message_id="a2a-flow-1")).task
    coder = assignee_token(hub, task.id)
    tool(hub, "network_task_update", {"taskId": task.id, "status": "accepted"}, coder)
    got = call(hub, planner, "get_task", pb.GetTaskRequest(id=task.id))
    assert got.status.state == pb.TASK_STATE_WORKING

    follow = call(hub, planner, "send_message", message("Keep the old format working too",
                                                      message_id="a2a-flow-2", task_id=task.id)).task
    assert follow.id == task.id
    inbox = tool(hub, "network_inbox", {}, coder)["messages"]
    assert any(m["body"] == "Keep the old format working too" and m["threadId"] == task.context_id for m in inbox)

    tool(hub, "network_task_update", {"taskId": task.id, "status": "blocked", "reason": "which timezone?"}, coder)
    blocked = call(hub, planner, "get_task", pb.GetTaskRequest(id=task.id))
    assert blocked.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert blocked.status.message.parts[0].text == "which timezone?"

    tool(hub, "network_task_update", {"taskId": task.id, "status": "working"}, coder)
    tool(hub, "network_publish_artifact", {"uri": "https://example.com/pr/7", "label": "PR 7", "type": "pull_request",
                                           "taskId": task.id}, coder)
    tool(hub, "network_task_update", {"taskId": task.id, "status": "completed", "reason": "tests pass"}, coder)
    done = call(hub, planner, "get_task", pb.GetTaskRequest(id=task.id, history_length=1))
    assert done.status.state == pb.TASK_STATE_COMPLETED
    assert [(a.name, a.parts[0].url) for a in done.artifacts] == [("PR 7", "https://example.com/pr/7")]
    assert len(done.history) == 1
    full = call(hub, planner, "get_task", pb.GetTaskRequest(id=task.id))
    assert "Keep the old format working too" in [m.parts[0].text for m in full.history]

    with pytest.raises(a2a_errors.TaskNotCancelableError):
        call(hub, planner, "cancel_task", pb.CancelTaskRequest(id=task.id))
    with pytest.raises(a2a_errors.UnsupportedOperationError):  # a terminal task takes no more messages
        call(hub, planner, "send_message", message("one more", message_id="a2a-flow-3", task_id=task.id))


def test_list_tasks_pages_through_the_callers_tasks_newest_update_first(hub):
    reviewer = hub.token("reviewer")
    ids = [call(hub, reviewer, "send_message", message(f"list task {n}", message_id=f"a2a-list-{n}")).task.id
           for n in range(3)]
    seen, token = [], ""
    while True:
        page = call(hub, reviewer, "list_tasks", pb.ListTasksRequest(page_size=2, page_token=token))
        assert len(page.tasks) <= 2
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(reversed(ids))  # only the reviewer's, newest first
    call(hub, reviewer, "cancel_task", pb.CancelTaskRequest(id=ids[0]))  # an update moves it to the front
    first = call(hub, reviewer, "list_tasks", pb.ListTasksRequest(page_size=1))
    assert [t.id for t in first.tasks] == [ids[0]]
    submitted = call(hub, reviewer, "list_tasks", pb.ListTasksRequest(status=pb.TASK_STATE_COMPLETED))
    assert list(submitted.tasks) == []
    with pytest.raises(a2a_errors.InvalidParamsError):
        call(hub, reviewer, "list_tasks", pb.ListTasksRequest(page_token="not-a-token"))


def test_cancel_is_the_creators_and_idempotent(hub):
    planner, coder = hub.token("planner"), hub.token("coder")
    task = call(hub, planner, "send_message", message("Cancel me", message_id="a2a-cancel-1")).task
    with pytest.raises(a2a_errors.TaskNotCancelableError):
        call(hub, coder, "cancel_task", pb.CancelTaskRequest(id=task.id))  # not the creator
    first = call(hub, planner, "cancel_task", pb.CancelTaskRequest(id=task.id))
    assert first.status.state == pb.TASK_STATE_CANCELED
    second = call(hub, planner, "cancel_task", pb.CancelTaskRequest(id=task.id))
    assert second.status.state == pb.TASK_STATE_CANCELED
    history = tool(hub, "network_task_get", {"taskId": task.id}, planner)["task"]["history"]
    assert [h["state"] for h in history].count("cancelled") == 1
    with pytest.raises(a2a_errors.TaskNotFoundError):
        call(hub, planner, "cancel_task", pb.CancelTaskRequest(id="task_00000000000000000000000000"))


def test_a_representative_needs_the_delegate_grant_and_then_delegates(hub):
    ops = hub.tokens["representatives"]["ops"]  # operate on demo: includes delegate
    task = call(hub, ops, "send_message", message("From the operator", message_id="a2a-rep-1")).task
    assert call(hub, ops, "get_task", pb.GetTaskRequest(id=task.id, history_length=0)).id == task.id
    relaynet = tool(hub, "network_task_get", {"taskId": task.id}, hub.token("planner"))["task"]
    assert relaynet["creator"] == {"representative": "ops"}


BAD_REQUESTS = [
    ("{not json", {}, -32700),
    ('[{"jsonrpc": "2.0", "method": "GetTask", "id": 1, "params": {"id": "t"}}]', {}, -32600),  # a batch
    ('{"jsonrpc": "2.0", "jsonrpc": "2.0", "method": "GetTask", "id": 1}', {}, -32600),  # a duplicate key
    ({"jsonrpc": "2.0", "method": "GetTask", "id": [1], "params": {"id": "t"}}, {}, -32600),
    ({"jsonrpc": "1.0", "method": "SendMessage", "id": 1, "params": {}}, {}, -32600),
    ({"jsonrpc": "2.0", "method": "NoSuchMethod", "id": 1, "params": {}}, {}, -32601),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1, "params": {"message": {"messageId": "x", "parts": []}}},
     {}, -32602),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,
      "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"url": "https://e.com/a.png"}]}}},
     {}, -32005),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,
      "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "o" * 9000}]}}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,
      "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}},
     {"A2A-Version": ""}, -32004),  # empty means 0.3: 0.3's own error (it has no VersionNotSupported)
    ({"jsonrpc": "2.0", "method": "message/send", "id": 1, "params": {}}, {"A2A-Version": "0.3"}, -32004),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,
      "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}},
     {"A2A-Version": "2.0"}, -32009),
    # the local stack streams (13.5): a streaming request is checked as its opening method is
    ({"jsonrpc": "2.0", "method": "SendStreamingMessage", "id": 1, "params": {}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "SubscribeToTask", "id": 1, "params": {"id": "t"}}, {}, -32001),
    ({"jsonrpc": "2.0", "method": "CreateTaskPushNotificationConfig", "id": 1, "params": {}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "GetExtendedAgentCard", "id": 1, "params": {}}, {}, -32007),
    ({"jsonrpc": "2.0", "method": "GetTask", "id": 1, "params": {"id": "task_00000000000000000000000000"}}, {}, -32001),
    ({"jsonrpc": "2.0", "method": "GetTask", "id": 1, "params": {"historyLength": -1, "id": "t"}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,  # a client speaks as the user
      "params": {"message": {"messageId": "x", "role": "KING", "parts": [{"text": "hello"}]}}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,
      "params": {"message": {"messageId": "x", "parts": [{"text": "hello"}]}}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "SendMessage", "id": 1,  # a part is a oneof
      "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "a", "url": "https://e.com"}]}}},
     {}, -32602),
    ({"jsonrpc": "2.0", "method": "SendMessage",  # a notification: nobody would hear the answer
      "params": {"message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}, {}, -32600),
    ("[" * 5000 + "]" * 5000, {}, -32600),  # deeper than Python's own recursion limit
    (b'{"jsonrpc": "2.0", "method": "SendMessage", "id": 1, "params": {"message": {"messageId": "x", '
     b'"role": "ROLE_USER", "parts": [{"text": "caf\xe9"}]}}}', {}, -32700),  # Latin-1, not UTF-8
]


@pytest.mark.parametrize("body,headers,code", BAD_REQUESTS)
def test_a_bad_request_gets_a2as_error_and_writes_nothing(hub, body, headers, code):
    before = task_count(hub)
    r = raw(hub, hub.token("planner"), body, headers)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, answer
    assert task_count(hub) == before


def test_the_transport_answers_for_the_token_and_the_endpoint(hub):
    body = {"jsonrpc": "2.0", "method": "GetTask", "id": 7, "params": {"id": "t"}}
    assert raw(hub, None, body).status_code == 401
    assert raw(hub, "rn_not_a_token", body).status_code == 401
    missing = raw(hub, hub.token("planner"), body, path="/a2a/demo/nobody")
    assert missing.status_code == 404 and missing.json()["id"] == 7
    other = raw(hub, hub.token("planner"), body, path="/a2a/elsewhere/coder")
    assert other.status_code == 404
    for path in (f"/a2a/demo/{'c' * 3000}", f"/a2a/{'d' * 3000}/coder", "/a2a/demo/CODER"):  # never a name: no read
        assert raw(hub, hub.token("planner"), body, path=path).status_code == 404, path
    for path in (f"/a2a/demo/{'c' * 3000}/.well-known/agent-card.json", f"/a2a/{'d' * 3000}"):
        assert httpx.get(f"{hub.url}{path}", timeout=10).status_code == 404, path


def test_a_retry_with_another_configuration_answers_the_first_response(hub):
    msg = {"messageId": "retry-config-1", "role": "ROLE_USER", "parts": [{"text": "Tidy the changelog"}]}
    first = raw(hub, hub.token("planner"), {"jsonrpc": "2.0", "method": "SendMessage", "id": 1, "params": {
        "message": msg}}).json()["result"]["task"]
    again = raw(hub, hub.token("planner"), {"jsonrpc": "2.0", "method": "SendMessage", "id": 2, "params": {
        "message": msg, "configuration": {"historyLength": 1, "acceptedOutputModes": ["text/plain"]}}}).json()
    assert again["result"]["task"]["id"] == first["id"]
    changed = raw(hub, hub.token("planner"), {"jsonrpc": "2.0", "method": "SendMessage", "id": 3, "params": {
        "message": {**msg, "parts": [{"text": "Something else"}]}}}).json()
    assert changed["error"]["code"] == -32600 and changed["error"]["data"]["relaynet"]["code"] == "conflict", changed


def test_a_card_names_only_a_scheme_and_an_authority(hub):
    card = httpx.get(f"{hub.url}/a2a/demo/coder/.well-known/agent-card.json", timeout=10,
                     headers={"X-Forwarded-Proto": "javascript", "Host": "evil.example/<x>"}).json()
    url = card["supportedInterfaces"][0]["url"]
    assert url.startswith("http://") and "evil" not in url and url.endswith("/a2a/demo/coder"), url
