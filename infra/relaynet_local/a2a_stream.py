"""A2A 1.0 streaming on the local stack: ``SendStreamingMessage`` and ``SubscribeToTask`` on
``POST /a2a/<network>/<agent>`` answered as Server-Sent Events (docs/protocol.md 13.5; what a
stream carries is relaynet.a2a.stream's decision).

API Gateway's HTTP API cannot stream, so in AWS the A2A function refuses these methods and the
Agent Card says ``streaming: false``; the local stack serves HTTP itself and streams:

- The request is authorised as every request of the route is (the authorizer, cached as API
  Gateway caches it). The stream opens with the answer of the route's own function to the
  *opening request* (SendMessage with the same params; GetTask for SubscribeToTask), so every
  check, the idempotency of ``messageId`` and every write are the Lambda path's. An error there
  is answered as that function answers it (a JSON-RPC error body, HTTP status as it gave), not
  as a stream.
- Then ``200 text/event-stream``: each event is ``data: <a JSON-RPC response>`` with the
  request's ``id``. The task is read again (GetTask through the same function) when this
  process commits a write to the task's partition or a history entry of the task, and every
  :data:`KEEPALIVE_SECONDS` otherwise (a ``: keepalive`` comment when nothing changed); writes of
  another process are seen at that keepalive.
- It ends after a terminal or interrupted state, when the token no longer proves its caller
  (checked each keepalive; the last event is the JSON-RPC error -32600 naming why), when the
  hub stops, or when the client goes away.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable

__all__ = ["ROUTE_KEY", "KEEPALIVE_SECONDS", "streaming_request", "serve"]

log = logging.getLogger("local_stack.a2a_stream")

ROUTE_KEY = "POST /a2a/{network}/{agent}"
KEEPALIVE_SECONDS = 15.0
_TICK = 0.5  # how often a waiting stream looks at the hub's stopping flag


def streaming_request(body: bytes | None) -> dict[str, Any] | None:
    """The parsed request when ``body`` is one JSON object naming a streaming method
    (relaynet.a2a.stream.OPENING); None for anything else, which the route's function answers
    (a malformed body included: the checks are its own)."""
    if not body or b"Streaming" not in body and b"SubscribeToTask" not in body:
        return None
    from relaynet.a2a import stream

    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(request, dict) or request.get("method") not in stream.OPENING:
        return None
    return request


def _sse(doc: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(doc, separators=(',', ':'))}\n\n".encode("utf-8")


def _touches(task_id: str) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether committed images concern ``task_id``: an item of its partition (the task, an
    artifact) or a history entry naming it (every transition writes one)."""
    suffix = f"#TASK#{task_id}"

    def check(images: list[dict[str, Any]]) -> bool:
        for image in images:
            pk = (image.get("PK") or {}).get("S", "")
            if pk.endswith(suffix) or (pk.endswith("#EVENTS") and (image.get("taskId") or {}).get("S") == task_id):
                return True
        return False

    return check


def serve(request: dict[str, Any], call: Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]],
          reply: Callable[[int, dict[str, str], bytes], None], open_stream: Callable[[], None],
          write: Callable[[bytes], None], authorized: Callable[[], bool], stopping: threading.Event) -> str:
    """Serve one streaming request (module docstring). ``call(payload)`` answers a JSON-RPC
    request with the route's function as ``(status, headers, body)``; ``reply`` sends a whole
    (non-stream) response; ``open_stream`` sends the stream's 200 and headers; ``write`` one
    chunk of it; ``authorized()`` whether the token still proves the caller. Returns how it ended:
    ``answered`` (no stream), ``final``, ``revoked``, ``stopping``, ``error`` or ``disconnected``."""
    from relaynet.a2a import stream, wire
    from relaynet_local import commits

    rpc_id, method = request.get("id"), request["method"]
    status, headers, data = call(stream.opening_request(request))
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if status != 200 or not isinstance(doc, dict) or "result" not in doc:
        reply(status, headers, data)
        return "answered"
    task = stream.opening_task(method, doc["result"])
    refusal = stream.subscribe_refusal(task) if method == "SubscribeToTask" else None
    if refusal is not None:
        reply(200, {"content-type": "application/json"},
              json.dumps({"jsonrpc": "2.0", "id": rpc_id, "error": refusal.body()}).encode("utf-8"))
        return "answered"

    changed = threading.Event()
    touches = _touches(task["id"])
    remove = commits.subscribe(lambda images: changed.set() if touches(images) else None)
    try:
        open_stream()
        write(_sse({"jsonrpc": "2.0", "id": rpc_id, "result": {"task": task}}))
        if stream.is_final(task):
            return "final"
        sent, artifacts = stream.signature(task), {a["artifactId"] for a in task.get("artifacts") or []}
        changed.set()  # a change made between the opening answer and the listener is read at once
        quiet_since = time.monotonic()
        while True:
            if not changed.wait(_TICK):
                if stopping.is_set():
                    return "stopping"
                if time.monotonic() - quiet_since < KEEPALIVE_SECONDS:
                    continue
                if not authorized():
                    error = wire.A2AError(wire.INVALID_REQUEST, "the token was revoked: this stream ends",
                                          {"relaynet": {"code": "unauthenticated"}})
                    write(_sse({"jsonrpc": "2.0", "id": rpc_id, "error": error.body()}))
                    return "revoked"
            changed.clear()
            status, _, data = call({"jsonrpc": "2.0", "id": rpc_id, "method": "GetTask",
                                    "params": {"id": task["id"], "historyLength": 0}})
            doc = json.loads(data)
            if status != 200 or "result" not in doc:
                write(_sse({"jsonrpc": "2.0", "id": rpc_id, "error": doc.get("error") or
                            {"code": wire.INTERNAL, "message": "internal error"}}))
                return "error"
            now = doc["result"]
            events = stream.updates(sent, now, artifacts)
            for event in events:
                write(_sse({"jsonrpc": "2.0", "id": rpc_id, "result": event}))
            if not events and time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                write(b": keepalive\n\n")
            quiet_since = time.monotonic()
            sent = stream.signature(now)
            if stream.is_final(now):
                return "final"
    except OSError:  # the client went away (a broken pipe, a reset)
        return "disconnected"
    finally:
        remove()
