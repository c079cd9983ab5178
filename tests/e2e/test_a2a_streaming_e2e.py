"""A2A 1.0 streaming on `relaynet serve` (docs/protocol.md 13.5, issue 28): the official SDK's
streaming client (``a2a-sdk``, ``ClientConfig(streaming=True)``) against the local stack on
DynamoDB Local. ``SendStreamingMessage`` opens with the task it created and then carries each
Relaynet transition an instance makes, the artifact it publishes before the COMPLETED that ends
the stream; ``SubscribeToTask`` follows an existing task to INPUT_REQUIRED (an interrupted state
ends a stream); a terminal task cannot be subscribed to; a bad streaming request gets the same
error the non-streaming method gives and writes nothing."""

from __future__ import annotations

import asyncio
import queue
import threading

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from a2a.utils import errors as a2a_errors

from tests.e2e.conftest import tool
from tests.e2e.test_a2a_e2e import assignee_token, call, message, raw, task_count

DONE = object()


class Stream:
    """One SDK streaming call on its own thread: each StreamResponse it yields is put in
    ``events`` as it arrives, then :data:`DONE` (or the exception that ended it)."""

    def __init__(self, hub, token: str, method: str, request):
        self.events: queue.Queue = queue.Queue()
        self.seen: list = []
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(hub, token, method, request)), daemon=True)
        self._thread.start()

    async def _run(self, hub, token, method, request):
        hc = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        try:
            client = await create_client(f"{hub.url}/a2a/demo/coder", ClientConfig(httpx_client=hc, streaming=True))
            async for event in getattr(client, method)(request):
                self.events.put(event)
            self.events.put(DONE)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self.events.put(exc)
        finally:
            await hc.aclose()

    def next(self, wait: float = 30.0):
        """The next event (DONE at the end); raises what ended the stream, or queue.Empty."""
        event = self.events.get(timeout=wait)
        if isinstance(event, Exception):
            raise event
        if event is not DONE:
            self.seen.append(event)
        return event

    def until(self, predicate, wait: float = 30.0):
        """Events up to and including the first one ``predicate`` accepts."""
        while True:
            event = self.next(wait)
            assert event is not DONE, f"the stream ended before the event waited for: {self.seen}"
            if predicate(event):
                return event


def _state(event):
    return event.status_update.status.state if event.HasField("status_update") else None


def test_send_streaming_message_carries_each_transition_and_the_artifact_then_ends_at_completed(hub):
    planner = hub.token("planner")
    before = task_count(hub)
    s = Stream(hub, planner, "send_message", message("Stream the parser fix", "old dates parse",
                                                     message_id="a2a-stream-1"))
    first = s.next()
    assert first.HasField("task") and first.task.status.state == pb.TASK_STATE_SUBMITTED
    task_id = first.task.id
    assert task_count(hub) == before + 1
    coder = assignee_token(hub, task_id)

    tool(hub, "network_task_update", {"taskId": task_id, "status": "accepted"}, coder)
    working = s.until(lambda e: _state(e) == pb.TASK_STATE_WORKING)
    assert working.status_update.task_id == task_id and working.status_update.context_id == first.task.context_id
    assert working.status_update.metadata["relaynet"]["state"] == "accepted"

    tool(hub, "network_task_update", {"taskId": task_id, "status": "working"}, coder)
    tool(hub, "network_publish_artifact", {"uri": "https://example.com/pr/9", "label": "PR 9", "type": "pull_request",
                                           "taskId": task_id}, coder)
    tool(hub, "network_task_update", {"taskId": task_id, "status": "completed", "reason": "old dates parse"}, coder)
    done = s.until(lambda e: _state(e) == pb.TASK_STATE_COMPLETED)
    assert done.status_update.status.message.parts[0].text == "old dates parse"
    assert s.next() is DONE  # COMPLETED ends the stream
    artifacts = [e.artifact_update.artifact for e in s.seen if e.HasField("artifact_update")]
    assert [(a.name, a.parts[0].url) for a in artifacts] == [("PR 9", "https://example.com/pr/9")]
    order = [("artifact" if e.HasField("artifact_update") else _state(e)) for e in s.seen[1:]]
    assert order.index("artifact") < order.index(pb.TASK_STATE_COMPLETED)
    # nothing a client sees is sent twice: one event per Relaynet state change at most
    assert len([e for e in s.seen if _state(e) == pb.TASK_STATE_COMPLETED]) == 1


def test_subscribe_follows_a_task_to_input_required_and_a_terminal_task_refuses(hub):
    planner = hub.token("planner")
    task = call(hub, planner, "send_message", message("Subscribe to me", message_id="a2a-sub-1")).task
    coder = assignee_token(hub, task.id)
    s = Stream(hub, planner, "subscribe", pb.SubscribeToTaskRequest(id=task.id))
    opening = s.next()
    assert opening.HasField("task") and opening.task.id == task.id
    tool(hub, "network_task_update", {"taskId": task.id, "status": "accepted"}, coder)
    tool(hub, "network_task_update", {"taskId": task.id, "status": "blocked", "reason": "which branch?"}, coder)
    blocked = s.until(lambda e: _state(e) == pb.TASK_STATE_INPUT_REQUIRED)
    assert blocked.status_update.status.message.parts[0].text == "which branch?"
    assert s.next() is DONE  # an interrupted state ends the stream: the client answers, then streams again

    call(hub, planner, "cancel_task", pb.CancelTaskRequest(id=task.id))
    late = Stream(hub, planner, "subscribe", pb.SubscribeToTaskRequest(id=task.id))
    with pytest.raises(a2a_errors.UnsupportedOperationError):
        late.next()
    unknown = Stream(hub, planner, "subscribe", pb.SubscribeToTaskRequest(id="task_00000000000000000000000000"))
    with pytest.raises(a2a_errors.TaskNotFoundError):
        unknown.next()


@pytest.mark.parametrize("body, headers, code", [
    ({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
      "params": {"message": {"messageId": "m-bad-1", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}}, {}, -32602),
    ({"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage",
      "params": {"message": {"messageId": "m-bad-2", "role": "ROLE_USER", "parts": [{"text": "x"}]}}},
     {"A2A-Version": "0.3"}, -32004),
    ({"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage",
      "params": {"message": {"messageId": "m-bad-3", "role": "ROLE_USER", "parts": [{"data": {"a": 1}}]}}}, {}, -32005),
    ({"jsonrpc": "2.0", "id": 4, "method": "SubscribeToTask", "params": {}}, {}, -32602),
])
def test_a_bad_streaming_request_gets_the_methods_error_as_json_and_writes_nothing(hub, body, headers, code):
    before = task_count(hub)
    r = raw(hub, hub.token("planner"), body, headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text
    assert r.json()["id"] == body["id"] and r.json()["error"]["code"] == code
    assert task_count(hub) == before


def test_a_streaming_request_without_a_token_is_401(hub):
    r = raw(hub, None, {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "t"}})
    assert r.status_code == 401
