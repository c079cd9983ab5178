"""Lambda's Invoke API for the local stack's functions, so the AWS push at the write
(relaynet.push_at_write: a boto3 Lambda client's ``Invoke``, ``InvocationType=Event``) runs here
unchanged, over real HTTP, as ``sam local start-lambda`` serves it (issue 26).

Off unless ``RELAYNET_LOCAL_PUSH_AT_WRITE=invoke``. By default the local stack pushes at the write
in-process (relaynet_local.streams.WriteNotifier: no HTTP hop, and the stream skips what it
pushed); ``invoke`` instead runs the path AWS runs, for the tests and benchmarks of that path:
each hub process serves this API on its own loopback port, points ``AWS_ENDPOINT_URL_LAMBDA`` at
it, names every stream function of template.yaml in ``RELAYNET_PUSH_AT_WRITE_TARGETS`` (by
logical id) and installs the listener; the stream still hands every record over, as in AWS, and
the functions deduplicate.

``POST <prefix>/2015-03-31/functions/{FunctionName}/invocations`` with ``X-Amz-Invocation-Type``
``Event`` answers 202 at once and runs the function on the event in its own thread, one
invocation at a time per function, in arrival order (Lambda's asynchronous invocation);
``RequestResponse`` (the default) runs it and answers 200 with what it returned. ``FunctionName``
is a logical id, optionally with a ``:<qualifier>`` or as the last part of an ARN. Errors as
Lambda's: 404 ``ResourceNotFoundException`` for an unknown function, 400 ``InvalidRequestContentException``
for a payload that is not a JSON object, 403 when the path's per-run secret prefix is wrong
(loopback only; the prefix is in ``AWS_ENDPOINT_URL_LAMBDA`` of the hub's environment, which
the processes it starts inherit, as they inherit the store's endpoint).
"""

from __future__ import annotations

import hmac
import json
import logging
import queue
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import unquote

from relaynet_local.template import Function, Template

log = logging.getLogger("relaynet_local.lambda_api")

MODE_ENV = "RELAYNET_LOCAL_PUSH_AT_WRITE"
_PATH = "/2015-03-31/functions/"


def enabled() -> bool:
    """Whether this hub runs the AWS push at the write through this API (``MODE_ENV`` is ``invoke``)."""
    import os

    return os.environ.get(MODE_ENV, "").strip().lower() == "invoke"


def target_ids(template: Template) -> list[str]:
    """The logical ids whose aliases template.yaml's Globals ``RELAYNET_PUSH_AT_WRITE_TARGETS``
    refers to (``!Ref X.Alias``), in order: the functions a write invokes in AWS."""
    from relaynet_local.template import ref_target

    variables = (((template.document.get("Globals") or {}).get("Function") or {}).get("Environment") or {}).get(
        "Variables") or {}
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "Ref" in value and str(value["Ref"]).endswith(".Alias"):
                out.append(str(ref_target(value)))
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(variables.get("RELAYNET_PUSH_AT_WRITE_TARGETS"))
    return list(dict.fromkeys(out))


class LambdaApi:
    """The Invoke API of ``functions`` (logical id -> Function), served on ``host`` at a free port;
    ``invoke(function, event)`` runs one. ``endpoint`` (``http://host:port/<secret>``) is what
    ``AWS_ENDPOINT_URL_LAMBDA`` takes. ``accepted`` and ``finished`` count asynchronous invocations by logical id (``finished``: run,
    whatever the outcome)."""

    def __init__(self, functions: dict[str, Function], invoke: Callable[[Function, dict[str, Any]], Any],
                 host: str = "127.0.0.1"):
        self.functions, self.invoke, self.host = functions, invoke, host
        self.secret = secrets.token_hex(16)
        self.accepted: dict[str, int] = {}
        self.finished: dict[str, int] = {}
        self._queues: dict[str, queue.SimpleQueue] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.endpoint = ""

    @classmethod
    def for_template(cls, template: Template, invoke: Callable[[Function, dict[str, Any]], Any]) -> "LambdaApi":
        """The API of the functions template.yaml's writers invoke at the write (:func:`target_ids`)."""
        return cls({lid: template.functions[lid] for lid in target_ids(template)}, invoke)

    def targets(self) -> str:
        """``RELAYNET_PUSH_AT_WRITE_TARGETS`` naming every function this API serves."""
        return ",".join(f"{lid}={lid}" for lid in sorted(self.functions))

    def start(self) -> "LambdaApi":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

            def do_POST(self) -> None:  # noqa: N802 - stdlib naming
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, data = api.handle(self.path, self.headers.get("X-Amz-Invocation-Type"), body)
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://{self.host}:{self._server.server_address[1]}/{self.secret}"
        thread = threading.Thread(target=self._server.serve_forever, name="relaynet-local-lambda-api", daemon=True)
        thread.start()
        self._threads.append(thread)
        log.info("Lambda Invoke API (push at the write as in AWS) for %s", sorted(self.functions))
        return self

    def stop(self) -> None:
        """Stop serving; invocations already accepted still run before their threads end."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            for q in self._queues.values():
                q.put(None)
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads, self._queues = [], {}

    # -- one request ------------------------------------------------------------------------

    def handle(self, path: str, invocation_type: str | None, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """``(status, headers, body)`` of one Invoke request (module docstring)."""
        path = path.split("?", 1)[0]  # a Qualifier parameter: the alias the name's ARN also carries
        secret, _, rest = path.lstrip("/").partition("/")
        if not hmac.compare_digest(secret, self.secret) or not f"/{rest}".startswith(_PATH) \
                or not rest.endswith("/invocations"):
            return _error(403, "AccessDeniedException", "unknown path (the endpoint's secret prefix is wrong)")
        name = unquote(f"/{rest}"[len(_PATH):-len("/invocations")])
        logical = name.rsplit(":function:", 1)[-1].split(":")[0]
        function = self.functions.get(logical)
        if function is None:
            return _error(404, "ResourceNotFoundException", f"Function not found: {name}")
        try:
            event = json.loads(body or b"{}")
        except ValueError:
            event = None
        if not isinstance(event, dict):
            return _error(400, "InvalidRequestContentException", "the payload must be a JSON object")
        if (invocation_type or "RequestResponse") == "Event":
            self._queue(function).put(event)
            with self._lock:
                self.accepted[logical] = self.accepted.get(logical, 0) + 1
            return 202, {}, b""
        result = self.invoke(function, event)
        return 200, {"X-Amz-Executed-Version": "$LATEST"}, json.dumps(result).encode()

    def _queue(self, function: Function) -> queue.SimpleQueue:
        with self._lock:
            if self._server is None:
                raise RuntimeError("the Invoke API is stopped")
            q = self._queues.get(function.logical_id)
            if q is None:
                q = self._queues[function.logical_id] = queue.SimpleQueue()
                thread = threading.Thread(target=self._work, args=(function, q), daemon=True,
                                          name=f"relaynet-local-async-{function.logical_id}")
                self._threads.append(thread)
                thread.start()
            return q

    def _work(self, function: Function, q: queue.SimpleQueue) -> None:
        while (event := q.get()) is not None:
            try:
                result = self.invoke(function, event)
            except Exception:  # noqa: BLE001 - Lambda retries an async event twice; the stream is our backstop
                log.exception("%s failed on an asynchronous invocation; the stream delivers its records",
                              function.logical_id)
                result = None
            finally:
                with self._lock:
                    self.finished[function.logical_id] = self.finished.get(function.logical_id, 0) + 1
            failed = (result or {}).get("batchItemFailures") if isinstance(result, dict) else None
            if failed:
                log.warning("%s: %d records failed on an asynchronous invocation; the stream delivers them",
                            function.logical_id, len(failed))


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    return status, {"x-amzn-ErrorType": kind}, json.dumps({"Type": "User", "message": message}).encode()
