"""The local stack: template.yaml's routes over real HTTP, an embedded DynamoDB, the sweep timer.

What it does, in the order :meth:`LocalStack.start` does it:

1. Reads the template (:mod:`relaynet_local.template`).
2. Starts the store, unless a ``dynamodb_endpoint`` is given (``store`` ``external``):
   ``dynamodb-local`` (the default): AWS's DynamoDB Local as a supervised child process on a free
   loopback port, data in ``data_dir`` (:mod:`relaynet_local.dynamodb_local`); ``memory``: moto's
   server, serialised, empty at start and lost at stop (:mod:`relaynet_local.memory_store`).
3. Sets ``os.environ`` *before any handler is loaded*: ``AWS_ENDPOINT_URL_DYNAMODB``,
   ``AWS_DEFAULT_REGION`` and (for an embedded store) dummy credentials, ``RELAYNET_TABLE``,
   ``RELAYNET_STORE`` (which store: ``/v1/health`` reports it), the template's
   ``Globals.Function.Environment`` (parameter defaults; variables already set in the
   environment win), and ``POWERTOOLS_TRACE_DISABLED``/``POWERTOOLS_METRICS_DISABLED`` unless set.
   Before any of this, the settings those variables make are validated
   (:class:`relaynet.config.SettingsError`, naming the variable, and nothing starts).
   :meth:`LocalStack.stop` restores the previous values.
4. Creates the table from the template if it does not exist (on DynamoDB Local it survives
   restarts), then, with ``preload``, imports every handler (one warm container each).
5. Serves HTTP (one thread per connection), mimicking API Gateway (HTTP API, payload 2.0):

   ====================================================  =====================================
   request                                               answer
   ====================================================  =====================================
   no route for the path, or not for this method         404 ``not_found``
   body over 10 MiB (API Gateway's limit)                413 ``payload_too_large``
   authorised route, no ``Authorization`` header         401 ``unauthenticated``
   authorizer answers ``isAuthorized: false``            403 ``permission_denied``
   authorizer or handler raises / answers garbage        500 ``internal`` (traceback on stderr)
   otherwise                                             the handler's response
   ====================================================  =====================================

   Errors use the envelope ``{"error": {"code", "message"}}``. Bodies up to 10 MiB reach the
   handler (the 64 KiB protocol limit is the handler's to enforce). The authorizer's answer is
   cached per ``Authorization`` value for ``ReauthorizeEvery`` seconds, as API Gateway caches it,
   and dropped at once when this process writes a token item (a revocation:
   relaynet_local.authorizer_cache).
   Beside the template's routes, ``GET /v1/events`` streams an instance's events as Server-Sent
   Events (relaynet_local.event_stream; the HTTP API cannot stream, docs/protocol.md 10.6),
   authorised by the same authorizer and cache.
6. Runs every scheduled function of the template every ``sweep_interval`` seconds, each on its
   own timer thread as each is its own Lambda in AWS, so the A2A bridge waiting on a slow remote
   never delays the routing sweep (errors are logged, never fatal; ``sweep_interval <= 0``
   disables the timers).
7. Writes ``<state_dir>/local.json``: ``{"url", "dynamodbEndpoint", "table", "pid", "store",
   "storePid", "workers"}`` (removed again by :meth:`LocalStack.stop`).

On DynamoDB Local, a response whose handler made a transaction leaves only once the store has
committed it (:class:`relaynet_local.dynamodb_local.TransactionBarrier`), so a ``kill -9`` of the
store never loses an acknowledged write.

Each response is written with one ``send`` on a socket with Nagle's algorithm off, so a client
on loopback never waits for a delayed ACK between headers and body.

Logs go to the ``local_stack`` logger (stderr under :func:`serve`): one line per request,
``METHOD PATH STATUS MSms``. (Its name must not contain "relaynet": the Powertools Logger of
service ``relaynet`` filters every logger whose name contains its service out of the root
handlers.)
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import parse_qsl, unquote, urlsplit

from relaynet_local import a2a_stream, events, lambdas
from relaynet_local.ag2_ws import INSTALL_HINT as AG2_INSTALL_HINT
from relaynet_local.ag2_ws import is_wire_function, wire_installed
from relaynet_local.ag2_ws import MANAGEMENT_PREFIX, Ag2Gateway
from relaynet_local.ag2_ws import PATH as AG2_PATH
from relaynet_local.ag2_ws import STAGE as AG2_STAGE
from relaynet_local.authorizer_cache import AuthorizerCache
from relaynet_local.dynamodb_local import DynamoDBLocal, TransactionBarrier
from relaynet_local.lambda_api import LambdaApi
from relaynet_local.lambda_api import enabled as lambda_api_enabled
from relaynet_local.memory_store import MemoryStore
from relaynet_local.throttle import RouteThrottle
from relaynet_local.streams import PushedAtWrite
from relaynet_local.template import Function, Route, Template, create_table, find_template, load_template
from relaynet_local.workers import default_workers

__all__ = ["LocalStack", "WorkerRole", "serve", "write_tokens", "merge_tokens", "mcp_config_text", "MAX_BODY_BYTES",
           "STORES"]

log = logging.getLogger("local_stack")

MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway HTTP API payload limit
#: The embedded stores ``relaynet serve --store`` offers (PROTOCOL.md 9).
STORES = ("dynamodb-local", "memory")
#: With several hub processes, the response header naming the one that answered (0: the primary).
PROCESS_HEADER = "x-relaynet-hub-process"
_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive"}


def _envelope(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


# --------------------------------------------------------------------------------------------
# Routing


EVENTS_PATH = "/v1/events"  # Server-Sent Events, served beside the template's routes (relaynet_local.event_stream)


class _Router:
    """Matches ``(method, path)`` to a route, as API Gateway does: literal paths before
    ``{param}`` paths before greedy ``{proxy+}`` paths, and an exact method before ``ANY``."""

    def __init__(self, routes: Iterable[Route]):
        self._compiled: list[tuple[int, re.Pattern[str], Route]] = []
        for route in routes:
            pattern, rank = "", 0
            for segment in route.path.strip("/").split("/"):
                m = re.fullmatch(r"\{([^}+]+)(\+?)\}", segment)
                if m and m.group(2):
                    pattern, rank = pattern + f"/(?P<{m.group(1)}>.+)", max(rank, 2)
                elif m:
                    pattern, rank = pattern + f"/(?P<{m.group(1)}>[^/]+)", max(rank, 1)
                else:
                    pattern += "/" + re.escape(segment)
            self._compiled.append((rank, re.compile(pattern or "/"), route))
        self._compiled.sort(key=lambda item: (item[0], item[2].method == "ANY"))

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for _, pattern, route in self._compiled:
            if route.method not in (method, "ANY"):
                continue
            m = pattern.fullmatch(path)
            if m:
                return route, m.groupdict()
        return None


# --------------------------------------------------------------------------------------------
# Responses


def _to_http(result: Any) -> tuple[int, dict[str, str], bytes]:
    """A handler's payload-2.0 result as ``(status, headers, body)``.

    A dict with ``statusCode`` is used as is (``multiValueHeaders`` and ``cookies`` are
    ignored); anything else is sent as JSON with status 200, as API Gateway infers. Raises
    ``ValueError`` for a malformed response.
    """
    if isinstance(result, dict) and "statusCode" in result:
        status = int(result["statusCode"])
        if not 100 <= status <= 599:
            raise ValueError(f"bad statusCode {status}")
        headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
        body = result.get("body")
        if body is None:
            data = b""
        elif result.get("isBase64Encoded"):
            data = base64.b64decode(body)
        else:
            data = str(body).encode()
        return status, headers, data
    return 200, {"content-type": "application/json"}, json.dumps(result).encode()


class _Handler(BaseHTTPRequestHandler):
    """One HTTP connection; ``self.server.stack`` is the :class:`LocalStack`."""

    protocol_version = "HTTP/1.1"
    server_version = "relaynet-local"
    sys_version = ""
    disable_nagle_algorithm = True  # TCP_NODELAY
    wbufsize = 1 << 16  # buffered: headers and body leave in one write when handle_one_request flushes

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # one line per request is logged by _dispatch instead

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # -- plumbing --------------------------------------------------------------------------

    def _read_body(self) -> bytes | None:
        """The request body; ``None`` when it is over :data:`MAX_BODY_BYTES`."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunk = self.rfile.read(size)
                self.rfile.readline()
                total += size
                if total <= MAX_BODY_BYTES:
                    chunks.append(chunk)
            return b"".join(chunks) if total <= MAX_BODY_BYTES else None
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            remaining = length
            while remaining > 0:  # drain, so the connection stays usable
                chunk = self.rfile.read(min(remaining, 1 << 16))
                if not chunk:
                    break
                remaining -= len(chunk)
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, headers: dict[str, str], body: bytes, request_id: str) -> None:
        self.send_response(status)
        sent = set()
        for name, value in headers.items():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
                sent.add(name.lower())
        if "content-type" not in sent and body:
            self.send_header("Content-Type", "application/json")
        self.send_header("apigw-requestid", request_id)
        self._send_process()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_process(self) -> None:
        """With several hub processes, the header naming the one answering (relaynet_local.workers)."""
        process = self.server.stack.process_index  # type: ignore[attr-defined]
        if process is not None:
            self.send_header(PROCESS_HEADER, str(process))

    def _error(self, status: int, code: str, message: str, request_id: str) -> int:
        self._send(status, {"content-type": "application/json"}, _envelope(code, message), request_id)
        return status

    # -- the API Gateway part --------------------------------------------------------------

    def _dispatch(self) -> None:
        started = time.monotonic()
        stack: LocalStack = self.server.stack  # type: ignore[attr-defined]
        request_id = uuid.uuid4().hex
        parts = urlsplit(self.path)
        path = parts.path or "/"
        status = 500
        try:
            try:
                body = self._read_body()
            except ValueError:
                self.close_connection = True
                status = self._error(400, "invalid_argument", "malformed request body", request_id)
                return
            status = self._route(stack, path, parts.query, body, request_id)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # noqa: BLE001 - a bug in the local stack itself
            log.exception("local stack error on %s %s", self.command, path)
            status = self._error(500, "internal", "internal error", request_id)
        finally:
            log.info("%s %s %d %.0fms", self.command, path, status, (time.monotonic() - started) * 1000)

    def _route(self, stack: "LocalStack", path: str, query: str, body: bytes | None,
               request_id: str) -> int:
        if path.startswith(MANAGEMENT_PREFIX) and stack.ag2 is not None and stack.ag2.enabled:
            # API Gateway's management API of the AG2 WebSocket API (postToConnection): relaynet_local.ag2_ws
            status, data = stack.ag2.manage(self.command, unquote(path[len(MANAGEMENT_PREFIX):]), body or b"")
            self._send(status, {"content-type": "application/json"} if data else {}, data, request_id)
            return status
        if path == EVENTS_PATH and self.command == "GET":
            if stack.events is None:
                return self._error(503, "unavailable", "the hub is starting or stopping; retry", request_id)
            return self._events(stack, path, query, request_id)
        matched = stack.router.match(self.command, path)
        if matched is None:
            return self._error(404, "not_found", f"no route {self.command} {path}", request_id)
        route, path_params = matched
        wait = stack.throttle.admit(route.route_key)  # the stage's throttling (relaynet_local.throttle)
        if wait is not None:
            self._send(429, {"content-type": "application/json", "retry-after": stack.throttle.retry_after(wait)},
                       _envelope("rate_limited", "too many requests on this route; retry after Retry-After seconds"),
                       request_id)
            return 429
        if body is None:
            return self._error(413, "payload_too_large", "request body over 10 MiB", request_id)
        header_pairs = list(self.headers.items())
        source_ip = self.client_address[0]
        context = None
        if route.auth:
            status, context = self._authorize(stack, path, route.route_key, query, path_params, request_id)
            if context is None:
                return status
        if route.route_key == a2a_stream.ROUTE_KEY and context is not None:
            streaming = a2a_stream.streaming_request(body)
            if streaming is not None:
                return self._a2a_stream(stack, route, path, query, path_params, context, streaming, request_id)
        event = events.http_event(
            self.command, path, route_key=route.route_key, query=query, headers=header_pairs,
            body=body, path_parameters=path_params, authorizer_context=context,
            source_ip=source_ip, request_id=request_id)
        try:
            result = stack.invoke(stack.template.functions[route.function_id], event)
            status, headers, data = _to_http(result)
            stack.settle_writes()
        except Exception:  # noqa: BLE001 - the handler's bug; API Gateway answers 500
            log.exception("handler %s failed on %s %s", route.function_id, self.command, path)
            return self._error(500, "internal", "internal error", request_id)
        self._send(status, headers, data, request_id)
        return status


    def _authorize(self, stack: "LocalStack", path: str, route_key: str, query: str, path_params: dict[str, str],
                   request_id: str) -> tuple[int, dict[str, Any] | None]:
        """The authorizer's answer for this request (cached as API Gateway caches it):
        ``(0, context)`` when authorised, else ``(status, None)`` with the error already sent."""
        token = self.headers.get("Authorization")
        if not token:
            return self._error(401, "unauthenticated", "missing bearer token", request_id), None
        auth_event = events.authorizer_event(
            self.command, path, route_key=route_key, identity=[token], query=query,
            headers=list(self.headers.items()), path_parameters=path_params, source_ip=self.client_address[0],
            request_id=request_id)
        try:
            answer = stack.authorizers.answer(
                token, lambda: stack.invoke(stack.template.authorizer, auth_event))  # type: ignore[arg-type]
            if not isinstance(answer, dict) or not isinstance(answer.get("isAuthorized"), bool):
                raise ValueError(f"authorizer answered {answer!r}, not a simple response")
        except Exception:  # noqa: BLE001 - API Gateway answers 500 too
            log.exception("authorizer failed on %s %s", self.command, path)
            return self._error(500, "internal", "internal error", request_id), None
        if not answer["isAuthorized"]:
            return self._error(403, "permission_denied", "forbidden", request_id), None
        return 0, answer.get("context") or {}

    def _open_event_stream(self, request_id: str) -> None:
        """A Server-Sent Events response's 200 and headers; the connection closes when it ends."""
        self.send_response(200)
        for name, value in (("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"),
                            ("Connection", "close"), ("X-Accel-Buffering", "no"), ("apigw-requestid", request_id)):
            self.send_header(name, value)
        self._send_process()
        self.end_headers()
        self.close_connection = True

    def _write_chunk(self, chunk: bytes) -> None:
        """One chunk of a streamed response, flushed at once."""
        self.wfile.write(chunk)
        self.wfile.flush()

    def _events(self, stack: "LocalStack", path: str, query: str, request_id: str) -> int:
        """``GET /v1/events`` (relaynet_local.event_stream): 200 and the stream until it ends."""
        status, context = self._authorize(stack, path, f"GET {EVENTS_PATH}", query, {}, request_id)
        if context is None:
            return status
        if context.get("kind") not in ("instance", "representative"):
            return self._error(401, "unauthenticated", "missing, malformed, unknown or revoked token", request_id)
        from relaynet.identity import Principal, bearer, hash_token

        principal = Principal.from_context(context)
        token_hash = hash_token(bearer(self.headers.get("Authorization")) or "")
        last_event_id = self.headers.get("Last-Event-ID")
        if last_event_id is None:
            last_event_id = dict(parse_qsl(query, keep_blank_values=True)).get("lastEventId")
        self._open_event_stream(request_id)
        why = stack.events.serve(self._write_chunk, principal, token_hash, last_event_id)  # type: ignore[union-attr]
        log.info("events of %s ended: %s", principal.instance_id or f"rep:{principal.rep}", why)
        return 200


    def _a2a_stream(self, stack: "LocalStack", route: Any, path: str, query: str, path_params: dict[str, str],
                    context: dict[str, Any], request: dict[str, Any], request_id: str) -> int:
        """A2A's ``SendStreamingMessage`` / ``SubscribeToTask`` (relaynet_local.a2a_stream): the
        route's function answers the opening and each re-read; the answer is a stream of them."""
        from relaynet.identity import Principal, bearer, hash_token
        from relaynet_local.event_stream import token_proves

        header_pairs = [(n, v) for n, v in self.headers.items() if n.lower() != "content-length"]
        function = stack.template.functions[route.function_id]
        status = [200]

        def call(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
            event = events.http_event("POST", path, route_key=route.route_key, query=query, headers=header_pairs,
                                      body=json.dumps(payload).encode("utf-8"), path_parameters=path_params,
                                      authorizer_context=context, source_ip=self.client_address[0],
                                      request_id=request_id)
            answer = _to_http(stack.invoke(function, event))
            stack.settle_writes()
            return answer

        def reply(code: int, headers: dict[str, str], data: bytes) -> None:
            status[0] = code
            self._send(code, headers, data, request_id)

        principal = Principal.from_context(context)
        token_hash = hash_token(bearer(self.headers.get("Authorization")) or "")
        why = a2a_stream.serve(request, call, reply, lambda: self._open_event_stream(request_id), self._write_chunk,
                               lambda: token_proves(token_hash, principal), stack._stopping)
        log.info("a2a %s on %s ended: %s", request.get("method"), path, why)
        return status[0]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's listen backlog is 5: with 32 agents on a busy 2-core machine the accept loop
    # falls behind and connections are reset before they reach a handler (bench_local_store
    # --agents 32 saw "Connection reset by peer", nothing in the hub's log).
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], stack: "LocalStack", fd: int | None = None):
        """Listen on ``address``, or accept on the listening socket ``fd`` another process of the
        hub made (relaynet_local.workers)."""
        self.stack = stack
        super().__init__(address, _Handler, bind_and_activate=fd is None)
        if fd is not None:
            self.socket.close()
            self.socket = socket.socket(fileno=fd)
            self.server_address = self.socket.getsockname()

    def share_accepts(self) -> None:
        """Several processes accept on this socket: each wakes for a new connection and one gets
        it, so accept must not block in the others (the others' ``accept`` raise
        BlockingIOError, which socketserver ignores)."""
        self.socket.setblocking(False)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = self.socket.accept()
        conn.setblocking(True)
        return conn, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        """A ``GET /v1/ag2`` upgrade is the AG2 WebSocket API's (relaynet_local.ag2_ws); anything
        else is HTTP."""
        gateway = self.stack.ag2
        if gateway is not None and gateway.enabled and gateway.owns(request):
            gateway.serve_socket(request, client_address)
            return
        super().finish_request(request, client_address)


# --------------------------------------------------------------------------------------------
# The stack


@dataclass
class WorkerRole:
    """What makes a :class:`LocalStack` one of a hub's workers (relaynet_local.workers): its
    index (1..N-1), the primary's listening socket ``fd``, the ``shared`` directory, the bus's
    address and key, the store's kind, and ``on_lost`` (called when the bus closes)."""

    index: int
    fd: int
    shared: str
    bus: str
    authkey: bytes
    store: str
    on_lost: Callable[[], None]

    @classmethod
    def from_config(cls, config: dict[str, Any], on_lost: Callable[[], None]) -> "WorkerRole":
        """From the JSON :class:`relaynet_local.workers.WorkerPool` hands a worker."""
        return cls(index=int(config["index"]), fd=int(config["fd"]), shared=config["shared"], bus=config["bus"],
                   authkey=bytes.fromhex(config["authkey"]), store=config["store"], on_lost=on_lost)


class LocalStack:
    """The local stack, in-process. Use ``with LocalStack(port=0) as stack: ... stack.url``.

    Args:
        host, port: where to listen (port 0: a free port; :attr:`url` tells which).
        template: the SAM template (default: see :func:`relaynet_local.template.find_template`).
        sweep_interval: seconds between runs of the scheduled functions (<= 0: never).
        dynamodb_endpoint: a DynamoDB endpoint to use instead of an embedded store.
        store: the embedded store, ``dynamodb-local`` (durable, in ``data_dir``) or ``memory``
            (moto, throwaway); ignored with ``dynamodb_endpoint``.
        data_dir: DynamoDB Local's data directory (default ``<state_dir>/dynamodb``, or
            ``.relaynet/dynamodb`` without a state directory).
        table: the table name (``RELAYNET_TABLE``).
        state_dir: where ``local.json`` goes (``None``: nowhere).
        preload: import every handler at start (import errors are logged, not fatal).
        workers: hub processes in all (relaynet_local.workers): above 1, :meth:`start` also runs
            ``workers - 1`` worker processes accepting on this stack's socket.
        role: set only in a worker process (relaynet_local.workers.main).

    :meth:`start` raises :class:`relaynet_local.store_setup.StoreSetupError` when the store
    cannot start. The environment is process-wide, so run one stack per process at a time. The
    memory store shares moto's in-process state: a ``mock_aws`` started in the same process while
    it runs intercepts the handlers' calls and resets its tables.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, template: str | os.PathLike[str] | None = None,
                 sweep_interval: float = 5.0, dynamodb_endpoint: str | None = None,
                 store: str = "dynamodb-local", data_dir: str | os.PathLike[str] | None = None,
                 table: str = "relaynet-local", state_dir: str | os.PathLike[str] | None = ".relaynet",
                 preload: bool = False, workers: int = 1, role: WorkerRole | None = None):
        if store not in STORES:
            raise ValueError(f"store must be one of {', '.join(STORES)}, not {store!r}")
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.workers = workers
        self.role = role
        self.host, self.port = host, port
        self.template_path = find_template(template)
        self.sweep_interval = sweep_interval
        self._ag2_installed = wire_installed()  # else the AG2 functions are neither loaded nor scheduled
        self._given_endpoint = dynamodb_endpoint
        self.dynamodb_endpoint = dynamodb_endpoint
        self.table = table
        self.state_dir = Path(state_dir).resolve() if state_dir is not None else None
        self.store_kind = role.store if role is not None else ("external" if dynamodb_endpoint else store)
        self.data_dir = Path(data_dir or (self.state_dir or Path(".relaynet")) / "dynamodb").resolve()
        self.preload = preload
        self.template: Template = load_template(self.template_path)
        self.router = _Router(self.template.routes)
        self.throttle = RouteThrottle.from_template(self.template)
        self.url = ""
        self._store: Any = None  # DynamoDBLocal | MemoryStore | None (external)
        self._barrier: TransactionBarrier | None = None
        self.authorizers = AuthorizerCache(self.template.authorizer_ttl)  # as API Gateway caches them
        self._http: _HTTPServer | None = None
        self._serving = False
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._saved_env: dict[str, str | None] = {}
        self._schedule_locks: dict[str, threading.Lock] = {}  # one per scheduled function
        self.ag2: Ag2Gateway | None = None
        self.ag2_url = ""
        self.push_at_write: Any = None  # relaynet_local.streams.WriteNotifier, once started
        self.lambda_api: LambdaApi | None = None  # the AWS push at the write's Invoke API (RELAYNET_LOCAL_PUSH_AT_WRITE)
        self._pusher: Any = None  # relaynet.push_at_write.InvokeAtWrite, with the Invoke API
        self.pushed = PushedAtWrite()  # what the push at the write handled (the stream skips it)
        self.events: Any = None  # relaynet_local.event_stream.EventHub, once started
        self.pool: Any = None  # relaynet_local.workers.WorkerPool (the primary of several processes)
        self._private: _HTTPServer | None = None  # forwarded management calls (several processes)
        self._shared: Any = None  # relaynet_local.workers.Shared
        self._bus: Any = None  # relaynet_local.workers.Bus | BusClient
        self._generation: Any = None  # relaynet_local.authorizer_cache.SharedGeneration

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> "LocalStack":
        """Bring everything up (see the module docstring); returns ``self``."""
        self._stopping.clear()
        self._check_settings()
        try:
            if self.role is not None:
                pass  # the primary's store (dynamodb_endpoint)
            elif self.store_kind == "dynamodb-local":
                self._store = DynamoDBLocal(self.data_dir, on_restart=lambda _: self._write_state()).start()
            elif self.store_kind == "memory":
                self._store = MemoryStore().start()
            if self._store is not None:
                self.dynamodb_endpoint = self._store.endpoint
            if self.store_kind == "dynamodb-local":
                self._barrier = TransactionBarrier(self.dynamodb_endpoint, self.table).install()
            self.authorizers.install()
            self._set_environment()
            lambdas.clear_cache()  # a new stack is a new deployment: every container starts cold
            if self.role is None:  # the primary's, once
                self._ensure_table()
                self._migrate_claims()
            if self.preload:
                self._preload()
            self.ag2 = Ag2Gateway(self.template.document, self._invoke_ag2)
            from relaynet_local.event_stream import EventHub, token_proves

            self.events = EventHub(token_proves).start()
            self.authorizers.on_clear(self.events.recheck_soon)
            self._http = _HTTPServer((self.host, self.port), self,
                                     fd=self.role.fd if self.role is not None else None)
            self.port = self._http.server_address[1]
            self.url = f"http://{self.host}:{self.port}"
            self.ag2_url = f"ws://{self.host}:{self.port}{AG2_PATH}" if self.ag2.enabled else ""
            self.ag2.domain = f"{self.host}:{self.port}"
            management = f"{self.url}/{AG2_STAGE}"
            if self.role is not None or self.workers > 1:
                management = self._join_processes()
            self._saved_env.setdefault("RELAYNET_AG2_MANAGEMENT_URL", os.environ.get("RELAYNET_AG2_MANAGEMENT_URL"))
            os.environ["RELAYNET_AG2_MANAGEMENT_URL"] = management
            self.ag2.serve_in_process(management)
            if not os.environ.get("RELAYNET_PUBLIC_URL"):  # where A2A remotes post notifications (13.4)
                self._saved_env.setdefault("RELAYNET_PUBLIC_URL", os.environ.get("RELAYNET_PUBLIC_URL"))
                os.environ["RELAYNET_PUBLIC_URL"] = self.url
                _reset_shared_caches()
            if self.preload:
                self._make_clients()
            self._spawn("relaynet-local-http", self._http.serve_forever)
            self._serving = True
            if self.sweep_interval > 0:  # each function on its own timer, as each is its own Lambda in AWS:
                for schedule in self.template.schedules:  # a slow A2A remote never holds up the sweep
                    self._spawn(f"relaynet-local-{schedule.function.logical_id}",
                                lambda schedule=schedule: self._schedule_loop(schedule))
            from relaynet_local.streams import StreamRunner, WriteNotifier  # the stream functions (notifiers)

            if self.role is None:  # the stream is read once, by the primary
                self._streams = StreamRunner(self.template, str(self.dynamodb_endpoint), self.table, self.invoke,
                                             pushed=self.pushed).start()
            on_pushed = self.pushed.add if self.role is None else self._bus.publish_pushed
            if lambda_api_enabled():  # AWS's push at the write (relaynet.push_at_write) through a local Invoke API
                self._start_lambda_api()
            else:
                self.push_at_write = WriteNotifier(self.template, self.invoke, on_pushed=on_pushed).start()
            if self.role is None and self.workers > 1:
                self._start_workers()
            self._write_state()
        except BaseException:
            self.stop()
            raise
        if self.role is None:  # a worker says "hub worker N serving" (relaynet_local.workers)
            log.info("local stack up at %s (store %s at %s, table %s, %d routes)", self.url, self.store_kind,
                     self.dynamodb_endpoint, self.table, len(self.template.routes))
        return self

    def stop(self) -> None:
        """Stop serving, the timer and moto; restore the environment. Safe to call twice."""
        self._stopping.set()
        if self.pool is not None:  # the workers first: they use the store and the bus
            self.pool.stop()
            self.pool = None
        if self._bus is not None:
            self._bus.close()
            self._bus = None
        from relaynet_local import commits

        commits.forward_to(None)
        if self.events is not None:
            self.events.stop()
            self.events = None
        if self.push_at_write is not None:
            self.push_at_write.stop()
            self.push_at_write = None
        if self.lambda_api is not None:
            from relaynet import push_at_write

            push_at_write.uninstall(self._pusher)
            push_at_write.reset_client()
            self.lambda_api.stop()
            self.lambda_api = None
        if self.ag2 is not None:
            self.ag2.stop()
            self.ag2 = None
        if getattr(self, "_streams", None) is not None:
            self._streams.stop()
            self._streams = None
        if self._http is not None:
            if self._serving:
                self._http.shutdown()
                self._serving = False
            self._http.server_close()
            self._http = None
        if self._private is not None:
            self._private.shutdown()
            self._private.server_close()
            self._private = None
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        if self._barrier is not None:
            self._barrier.uninstall()
            self._barrier = None
        self.authorizers.uninstall()
        if self._generation is not None:
            self._generation.close()
            self._generation = None
        if self._store is not None:
            self._store.stop()
            self._store = None
        if self._shared is not None:
            self._shared.remove()  # only the primary's: it made the directory
            self._shared = None
        self._remove_state()
        self._restore_environment()
        lambdas.clear_cache()

    def __enter__(self) -> "LocalStack":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- invoking --------------------------------------------------------------------------

    def invoke(self, function: Function, event: dict[str, Any]) -> Any:
        """Run ``function`` on ``event`` in a container, as Lambda would; returns its result."""
        started = time.monotonic()
        try:
            return lambdas.invoke(function.code_uri, function.handler, event,
                                  function_name=function.logical_id, timeout=function.timeout,
                                  memory_size=function.memory_size)
        finally:
            took = time.monotonic() - started
            if took > function.timeout:
                log.warning("%s ran %.1f s, over its Timeout of %d s: AWS would have stopped it",
                            function.logical_id, took, function.timeout)

    def _invoke_ag2(self, function_id: str, event: dict[str, Any]) -> Any:
        """Run a WebSocket route's function (relaynet_local.ag2_ws), its writes settled."""
        try:
            return self.invoke(self.template.functions[function_id], event)
        finally:
            self.settle_writes()

    def settle_writes(self) -> None:
        """Before an answer leaves: make this thread's transactions durable on DynamoDB Local
        (:class:`relaynet_local.dynamodb_local.TransactionBarrier`); nothing on other stores."""
        if self._barrier is not None:
            self._barrier.settle()

    def sweep_once(self) -> int:
        """Run every scheduled function once (a function's runs never overlap); returns how many
        failed."""
        return sum(not self._run_schedule(schedule) for schedule in self.template.schedules)

    def _run_schedule(self, schedule: Any) -> bool:
        """One run of ``schedule``'s function unless one is in progress; False if it raised."""
        if is_wire_function(schedule.function.handler) and not self._ag2_installed:
            return True  # the AG2 wire is off (_preload said so once)
        lock = self._schedule_locks.setdefault(schedule.function.logical_id, threading.Lock())
        with lock:
            try:
                self.invoke(schedule.function, events.schedule_event(schedule.function.logical_id))
            except Exception:  # noqa: BLE001 - logged, never fatal
                log.exception("scheduled function %s failed", schedule.function.logical_id)
                return False
        return True

    def check_spec(self, text: str) -> None:
        """Validate a network spec as :meth:`apply_spec` will, without the store (call it before
        :meth:`start`): raises InvalidArgument naming each bad field, as ``relaynet admin apply``
        reports it (``relaynet.admin.parse``). Push URLs are judged as the running stack judges
        them (``http`` to a loopback host allowed unless ``RELAYNET_PUSH_ALLOW_LOOPBACK`` is set,
        :class:`relaynet_local.streams.StreamRunner`); a representative's grant on a network the
        file does not declare needs the table, so only :meth:`apply_spec` checks it. A ``launch:``
        command that is neither an executable file nor on PATH is refused here too
        (relaynet_local.launches)."""
        from relaynet_local.streams import stream_sources

        # the handlers' environment (template.yaml's, e.g. POWERTOOLS_SERVICE_NAME) is in place
        # while the library is first imported here, as it is when start() imports it
        _, defaults = self._environment()
        wanted = {name: value for name, value in defaults.items() if name not in os.environ}
        if stream_sources(self.template) and "RELAYNET_PUSH_ALLOW_LOOPBACK" not in os.environ:  # as StreamRunner
            wanted["RELAYNET_PUSH_ALLOW_LOOPBACK"] = "true"
        os.environ.update(wanted)
        _reset_shared_caches()
        try:
            from relaynet.admin import parse
            from relaynet_local.launches import check_commands

            check_commands(parse(text, check_store=False))  # a launch: command that cannot run, too
        finally:
            for name in wanted:
                os.environ.pop(name, None)
            _reset_shared_caches()

    def apply_spec(self, text: str) -> dict[str, Any]:
        """Apply a network spec (PROTOCOL.md 9) to this stack's table; returns the tokens
        document (``relaynet.admin.apply_spec``)."""
        from relaynet.admin import apply_spec

        tokens = apply_spec(text)
        self.settle_writes()  # the tokens are about to be printed and written down
        return tokens

    # -- several processes (relaynet_local.workers) -----------------------------------------

    @property
    def process_index(self) -> int | None:
        """This process's index among the hub's processes; ``None`` for a hub of one."""
        if self.role is not None:
            return self.role.index
        return 0 if self.workers > 1 else None

    def _join_processes(self) -> str:
        """Make this stack one of the hub's processes: accepts shared with the others, a private
        port for forwarded management calls (published in the shared directory), the shared
        token generation and the bus. Returns this process's management API URL."""
        from relaynet_local import commits, workers
        from relaynet_local.authorizer_cache import SharedGeneration

        assert self._http is not None and self.ag2 is not None
        self._http.share_accepts()
        index = self.role.index if self.role is not None else 0
        self._shared = workers.Shared(self.role.shared if self.role is not None else None)
        self._private = _HTTPServer(("127.0.0.1", 0), self)
        self._spawn(f"relaynet-local-private-{index}", self._private.serve_forever)
        private_url = f"http://127.0.0.1:{self._private.server_address[1]}"
        self._shared.publish_peer(index, private_url)
        self.ag2.index = index
        self.ag2.peer_url = self._shared.peer_url
        self._generation = SharedGeneration(self._shared.tokens)
        if self.role is None:
            self._bus = workers.Bus(self._shared.bus, workers.new_authkey(), commits.deliver_remote,
                                    self.authorizers.remote_write, self.pushed.add).start()
        else:
            self._bus = workers.BusClient(self.role.bus, self.role.authkey, index, commits.deliver_remote,
                                          self.authorizers.remote_write, self.role.on_lost)
        self.authorizers.share(self._generation, self._bus.publish_tokens)
        commits.forward_to(self._bus.publish_commit)
        return f"{private_url}/{AG2_STAGE}"

    def _start_workers(self) -> None:
        """Run ``workers - 1`` worker processes on this stack's socket (the primary)."""
        from relaynet_local.workers import WorkerPool

        assert self._http is not None and self._shared is not None
        config = {"host": self.host, "template": str(self.template_path), "table": self.table,
                  "endpoint": str(self.dynamodb_endpoint), "store": self.store_kind, "shared": str(self._shared.path),
                  "bus": self._shared.bus, "authkey": self._bus.authkey.hex()}
        self.pool = WorkerPool(self.workers, self._http.fileno(), config).start()
        log.info("%d hub processes on %s: this one and %d worker%s", self.workers, self.url, self.workers - 1,
                 "" if self.workers == 2 else "s")

    # -- internals -------------------------------------------------------------------------

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_lambda_api(self) -> None:
        """Serve Lambda's Invoke API for the stream functions and push at the write as AWS does
        (relaynet_local.lambda_api): this process's writes invoke them over HTTP with a boto3
        Lambda client; the stream hands every record over as well, and the functions deduplicate."""
        from relaynet import push_at_write

        self.lambda_api = LambdaApi.for_template(self.template, self.invoke).start()
        for name, value in (("AWS_ENDPOINT_URL_LAMBDA", self.lambda_api.endpoint),
                            (push_at_write.TARGETS_ENV, self.lambda_api.targets())):
            self._saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        from relaynet.config import settings

        settings.cache_clear()
        push_at_write.reset_client()
        self._pusher = push_at_write.install()

    def _schedule_loop(self, schedule: Any) -> None:
        while not self._stopping.wait(self.sweep_interval):
            self._run_schedule(schedule)

    def _environment(self) -> tuple[dict[str, str], dict[str, str]]:
        """``(forced, defaults)``: variables to set, and variables to set only if unset."""
        forced = {"AWS_ENDPOINT_URL_DYNAMODB": str(self.dynamodb_endpoint), "RELAYNET_TABLE": self.table,
                  "RELAYNET_STORE": self.store_kind,
                  "RELAYNET_A2A_STREAMING": "true"}  # this stack streams A2A (relaynet_local.a2a_stream)
        defaults = {"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "true"}
        if self._store is not None:  # an embedded store takes any credentials: never send real ones
            forced.update(AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID="testing",
                          AWS_SECRET_ACCESS_KEY="testing")
        else:
            defaults["AWS_DEFAULT_REGION"] = "us-east-1"
            import boto3

            if boto3.Session().get_credentials() is None:
                defaults.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
        refs = {self.template.table.logical_id: self.table} if self.template.table else {}
        template_env = self.template.environment(refs)
        for fn in self.template.functions.values():  # one process: no per-function environment
            for name, value in self.template.environment(refs, fn).items():
                if template_env.setdefault(name, value) != value:
                    log.warning("%s sets %s=%s, but the local stack shares one environment "
                                "(%s=%s is used)", fn.logical_id, name, value, name, template_env[name])
        for name, value in template_env.items():
            if name not in forced:
                defaults.setdefault(name, value)
        return forced, defaults

    def _check_settings(self) -> None:
        """Fail before anything starts when the environment the handlers would see holds a bad
        setting (relaynet.config.SettingsError, naming the variable)."""
        from relaynet.config import Settings

        forced, defaults = self._environment()
        Settings.from_environ({**defaults, **os.environ, **forced})

    def _set_environment(self) -> None:
        forced, defaults = self._environment()
        for name, value in {**defaults, **forced}.items():
            if name in forced or name not in os.environ:
                self._saved_env.setdefault(name, os.environ.get(name))
                os.environ[name] = value
        _reset_shared_caches()

    def _restore_environment(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._saved_env:
            _reset_shared_caches()
        self._saved_env.clear()

    def _ensure_table(self) -> None:
        if self.template.table is None:
            log.warning("the template has no AWS::DynamoDB::Table; not creating one")
            return
        import boto3

        client = boto3.client("dynamodb", endpoint_url=self.dynamodb_endpoint)
        create_table(client, self.template_path, self.table, exist_ok=True)

    def _migrate_claims(self) -> None:
        """Claims a table on disk kept in the layout before issue 25 move into the claim tree
        before the first request (relaynet.claims.migrate; a no-op on a table without them)."""
        if self.template.table is None:
            return
        from relaynet import claims
        from relaynet.store import table

        table.reset()
        moved = claims.migrate()
        if moved:
            log.info("moved %d live claims into the claim tree (issue 25 layout)", moved)

    def _preload(self) -> None:
        seen = set()
        skipped = []
        for fn in self.template.functions.values():
            if (fn.code_uri, fn.handler) in seen:
                continue
            if is_wire_function(fn.handler) and not self._ag2_installed:
                skipped.append(fn.logical_id)
                continue
            seen.add((fn.code_uri, fn.handler))
            try:
                lambdas.load_handler(fn.code_uri, fn.handler)
            except Exception:  # noqa: BLE001 - the route answers 500 until it is fixed
                log.exception("cannot load %s (%s)", fn.logical_id, fn.handler)
        if skipped:
            log.warning("the AG2 wire is off (%s not loaded): %s", ", ".join(skipped), AG2_INSTALL_HINT)

    def _make_clients(self) -> None:
        """Make the process's DynamoDB clients before the first request (the handlers' and the
        barrier's), so that a burst of first calls does not wait behind their making (issue 31)."""
        if self.template.table is None:
            return
        from relaynet.store import table

        table.client()
        if self._barrier is not None:
            self._barrier.client()

    def _write_state(self) -> None:
        if self.state_dir is None or not self._serving:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        state = {"url": self.url, "dynamodbEndpoint": self.dynamodb_endpoint, "table": self.table,
                 "pid": os.getpid(), "store": self.store_kind,
                 "storePid": getattr(self._store, "pid", None), "workers": self.workers}
        tmp = self.state_dir / f".local.json.{os.getpid()}"
        tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.state_dir / "local.json")

    def _remove_state(self) -> None:
        if self.state_dir is None or not self.url:
            return
        path = self.state_dir / "local.json"
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("url") == self.url:
                path.unlink()
        except (OSError, ValueError):
            pass


def _reset_shared_caches() -> None:
    """Drop the relaynet library's cached DynamoDB client and settings, if it is imported, so
    a new endpoint or table takes effect (``relaynet.store.table.reset``)."""
    reset = getattr(sys.modules.get("relaynet.store.table"), "reset", None)
    if callable(reset):
        reset()


# --------------------------------------------------------------------------------------------
# Tokens and MCP configurations


def write_tokens(tokens: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the tokens document as JSON to ``path`` with mode 0600 (parents created), atomically:
    a temporary file in the same directory, fsync'd, then renamed over ``path``, so a crash at
    any moment leaves either the old document or the new one, never a partial one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)
            json.dump(tokens, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a power cut
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return target


def merge_tokens(kept: dict[str, Any], created: dict[str, Any]) -> dict[str, Any]:
    """The tokens document after an apply: ``kept`` (the file's) plus what the apply ``created``
    (both in PROTOCOL.md 9's shape). Nothing kept is dropped, with one exception: a network
    whose ``networkId`` changed (its store was wiped, so its old tokens cannot work) takes the new
    entry whole. A representative with a new token takes it (an apply mints one only for a
    representative that did not exist). Neither argument is changed.
    """
    merged = json.loads(json.dumps(kept or {}))
    networks = merged.setdefault("networks", {})
    for name, info in (created.get("networks") or {}).items():
        have = networks.get(name)
        if not have or have.get("networkId") != info.get("networkId"):
            if have:
                log.warning("network %s is %s in the store but %s in the tokens file: its old tokens "
                            "no longer work and are replaced", name, info.get("networkId"), have.get("networkId"))
            networks[name] = json.loads(json.dumps(info))
            continue
        instances = have.setdefault("instances", {})
        for agent, new in (info.get("instances") or {}).items():
            listed = instances.setdefault(agent, [])
            known = {i.get("instanceId") for i in listed}
            listed.extend(dict(i) for i in new if i.get("instanceId") not in known)
    merged.setdefault("representatives", {}).update(created.get("representatives") or {})
    return merged


def _read_tokens(path: Path) -> dict[str, Any]:
    """The tokens file's document; ``{}`` when there is none. An unreadable file is moved aside
    (``<name>.unreadable``), never overwritten."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            return doc
    except ValueError:
        pass
    aside = path.with_name(path.name + ".unreadable")
    os.replace(path, aside)
    log.error("%s is not a tokens document; moved it to %s", path, aside)
    return {}


def _relaynet_command() -> str:
    exe = Path(sys.executable).parent / ("relaynet.exe" if os.name == "nt" else "relaynet")
    return str(exe.absolute()) if exe.exists() else "relaynet"


def mcp_config_text(tokens: dict[str, Any], url: str) -> str:
    """For each instance of the tokens document, a heading line and a ready-to-paste MCP client
    configuration running ``relaynet mcp worker`` against ``url`` with that instance's token,
    followed by the Claude Code hooks block for ``.claude/settings.json`` (relaynet.hook)."""
    from relaynet.hook import settings_block

    command = _relaynet_command()
    blocks = []
    for network, info in (tokens.get("networks") or {}).items():
        for agent, instances in ((info or {}).get("instances") or {}).items():
            for n, instance in enumerate(instances or [], start=1):
                config = {"mcpServers": {f"relaynet-{agent}-{n}": {
                    "command": command,
                    "args": ["mcp", "worker"],
                    "env": {"RELAYNET_URL": url, "RELAYNET_TOKEN": instance["token"]},
                }}}
                blocks.append(f"# {agent} #{n} ({instance.get('instanceId')}) in network {network}\n"
                              + json.dumps(config, indent=2))
                blocks.append(f"# {agent} #{n}: Claude Code hooks for .claude/settings.json (or "
                              f".claude/settings.local.json, which stays out of git)\n"
                              + json.dumps(settings_block(command, url, instance["token"]), indent=2))
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------------------------
# Entry point


def _configure_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)


def serve(host: str = "127.0.0.1", port: int = 8787, spec: str | os.PathLike[str] | None = None,
          tokens_out: str | os.PathLike[str] | None = None, sweep_interval: float = 5.0,
          dynamodb_endpoint: str | None = None, template: str | os.PathLike[str] | None = None,
          print_mcp_config: bool = False, table: str = "relaynet-local", store: str = "dynamodb-local",
          data_dir: str | os.PathLike[str] | None = None, workers: int | None = None) -> None:
    """Run the local stack until SIGINT or SIGTERM (``relaynet serve``, PROTOCOL.md 9).

    The store is DynamoDB Local in ``data_dir`` (default ``.relaynet/dynamodb``) unless
    ``dynamodb_endpoint`` or ``store="memory"`` says otherwise; it stops with the hub. With
    ``spec`` (a path to a network spec), applies it once the stack is up (idempotently: on a
    restart it creates nothing) and merges the tokens it created into ``tokens_out`` (default
    ``.relaynet/tokens.json``, mode 0600, :func:`merge_tokens`), so tokens already there are kept.
    With ``print_mcp_config``, prints an MCP client configuration per instance of the tokens file.
    Agents of the spec with a ``launch:`` entry have each instance the tokens file holds
    supervised until the hub stops (relaynet_local.launches; the supervisors stop first).
    Finally prints ``Relaynet hub listening on <url>`` to stdout: once it appears, the tokens
    file is written. The spec is read and validated before anything starts: an invalid one raises
    InvalidArgument (:meth:`LocalStack.check_spec`) and no store is started. Raises ``OSError``
    when the spec cannot be read or the port is taken, StoreSetupError when the store cannot
    start, and whatever applying the spec raises.

    ``workers`` hub processes share the port (relaynet_local.workers; default
    :func:`relaynet_local.workers.default_workers`, the cores this process may use).

    stdout carries only those lines: while serving, ``sys.stdout`` points at stderr, so what
    handlers print (the Powertools Logger writes to stdout, as Lambda expects) goes to stderr.
    """
    out = sys.stdout
    sys.stdout = sys.stderr
    try:
        _configure_logging()
        stack = LocalStack(host, port, template=template, sweep_interval=sweep_interval,
                           dynamodb_endpoint=dynamodb_endpoint, store=store, data_dir=data_dir,
                           table=table, preload=True, workers=workers or default_workers())
        spec_text = Path(spec).read_text(encoding="utf-8") if spec is not None else None
        if spec_text is not None:
            stack.check_spec(spec_text)  # an invalid spec stops here, before the store starts
        _serve(out, stack, spec, spec_text, Path(tokens_out or Path(".relaynet") / "tokens.json"),
               print_mcp_config)
    finally:
        sys.stdout = out


def _launches(spec_text: str, tokens: dict[str, Any], url: str, log_root: Path) -> Any:
    """The started supervisors of the spec's ``launch:`` entries (relaynet_local.launches)."""
    from relaynet.admin import parse
    from relaynet_local.launches import Launches, plan

    supervisors = Launches(plan(parse(spec_text, check_store=False), tokens), url, log_root)
    supervisors.start()
    return supervisors


def _serve(out: Any, stack: LocalStack, spec: str | os.PathLike[str] | None, spec_text: str | None,
           tokens_path: Path, print_mcp_config: bool) -> None:
    stop = threading.Event()
    previous: dict[int, Any] = {}
    supervisors = None
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        stack.start()
        tokens = _read_tokens(tokens_path) if (spec_text is not None or print_mcp_config) else {}
        if spec_text is not None:
            created = stack.apply_spec(spec_text)
            merged = merge_tokens(tokens, created)
            if merged != tokens:
                write_tokens(merged, tokens_path)
                log.info("applied %s; tokens written to %s", spec, tokens_path)
            else:
                log.info("applied %s: nothing new; %s kept as it is", spec, tokens_path)
            tokens = merged
            supervisors = _launches(spec_text, tokens, stack.url, tokens_path.parent / "worker")
        if print_mcp_config:
            if tokens.get("networks"):
                print(mcp_config_text(tokens, stack.url), file=out, flush=True)
            else:
                log.warning("no tokens to print MCP configurations for (use a spec)")
        print(f"Relaynet hub listening on {stack.url}", file=out, flush=True)
        if stack.ag2_url:
            print(f"AG2 hub: HubClient(WsLink({stack.ag2_url!r}))"
                  + ("" if stack.ag2 and stack.ag2.available else f" is off: {AG2_INSTALL_HINT}"),
                  file=out, flush=True)
        if any(r.path == "/v1/ui" for r in stack.template.routes):
            print(f"Operator page: {stack.url}/v1/ui (sign in with a representative token of {tokens_path})",
                  file=out, flush=True)
        while not stop.wait(0.5):
            pass
        log.info("shutting down")
    finally:
        if supervisors is not None:  # before the hub: the runs' grace is spent with the hub up
            supervisors.stop()
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
