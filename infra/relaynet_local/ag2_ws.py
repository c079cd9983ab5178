"""The AG2 wire in the local stack: template.yaml's WebSocket API (``AWS::ApiGatewayV2::Api``,
``ProtocolType: WEBSOCKET``) served at ``ws://HOST:PORT/v1/ag2`` on the hub's own port, and API
Gateway's management API (postToConnection) at ``/ag2/@connections/{id}``, so the same handlers
run as in AWS.

- The routes come from the template: each ``AWS::ApiGatewayV2::Route`` of the WebSocket API, its
  ``RouteKey`` and, through its integration's ``IntegrationUri``, the function it invokes.
  Route selection is the API's ``RouteSelectionExpression`` (``$request.body.<field>``): a JSON
  message's field names the route, anything else goes to ``$default``.
- A connection is upgraded by the ``websockets`` library (its threading implementation) on the
  socket the HTTP server accepted: :meth:`Ag2Gateway.owns` peeks at the request line first.
- ``$connect`` runs before the upgrade is answered (a failure refuses it), ``$disconnect`` after
  the socket closes; each message is an invocation on a worker thread, as API Gateway invokes
  Lambda concurrently; the event has API Gateway's WebSocket shape (``requestContext``:
  ``routeKey``, ``eventType``, ``connectionId``, ``domainName``, ``stage``, ...; ``body``).
- API Gateway's limits, the same here: a client frame over 32 KB closes the connection (1009),
  a postToConnection over 128 KB is refused (413), a connection ends after 2 hours (1001; set
  ``RELAYNET_AG2_MAX_CONNECTION_SECONDS`` to shorten it) and after 10 minutes without a message
  either way (``RELAYNET_AG2_IDLE_SECONDS``).
- With several hub processes (``relaynet serve --workers``) a connection lives in the process
  that accepted it; its id's first byte is that process's index (ids are opaque to clients, as
  API Gateway's are), and a management call that reaches another process is forwarded to the
  owner's private address (:attr:`Ag2Gateway.peer_url`), so a push made at the write in one
  process reaches a socket held by another.
- A management call made in the process that serves the management API does not cross HTTP:
  :meth:`Ag2Gateway.serve_in_process` answers botocore's request for it before it is sent (the
  ``before-send`` event of the ``apigatewaymanagementapi`` clients), with the same
  :meth:`Ag2Gateway.manage` the HTTP route runs, so the handlers' ``post_to_connection`` is
  unchanged and a push at the write skips a loopback request (about 3-8 ms on this machine, issue 26).

Without the ``websockets`` package, ``/v1/ag2`` answers 501 naming the command that installs it
(and relaynet_local.server neither loads the AG2 functions nor runs their schedule). The ``ag2``
package is not needed: the handlers serve AG2's protocol with Relaynet's own models of it
(relaynet.ag2.protocol; issue 30 part 2), so only AG2's clients need it.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from typing import Any, Callable
from urllib.parse import quote, unquote

import httpx

from relaynet_local.template import ref_target

log = logging.getLogger("local_stack.ag2")

PATH = "/v1/ag2"
STAGE = "ag2"
MANAGEMENT_PREFIX = f"/{STAGE}/@connections/"
MAX_CLIENT_FRAME = 32 * 1024
MAX_SERVER_MESSAGE = 128 * 1024
INSTALL_HINT = "pip install 'relaynet[ag2]' (websockets; `make run` installs it), then restart the hub"


def wire_installed() -> bool:
    """Whether this Python has what the AG2 wire needs: ``websockets`` (the local WebSocket
    server). The functions/ag2_*.py handlers need nothing beyond the layer's packages."""
    import importlib.util

    return importlib.util.find_spec("websockets") is not None


def is_wire_function(handler: str) -> bool:
    """Whether a template function's ``Handler`` is one of the AG2 wire's (functions/ag2_*.py)."""
    return handler.split(".")[0].startswith("ag2_")


def _sub_function(value: Any) -> str | None:
    """The function logical id in an integration's ``IntegrationUri``: ``!Sub [".../${Target}/...",
    {Target: !Ref Fn.Alias}]`` (the alias SAM's AutoPublishAlias makes; cfn-lint resolves no
    ``${Fn.Alias}`` inside the string) or ``!Sub ".../${Fn.Arn}/..."``. None when it names none."""
    text = value.get("Fn::Sub") if isinstance(value, dict) else value
    variables: dict = {}
    if isinstance(text, list):
        text, variables = text[0], (text[1] if len(text) > 1 and isinstance(text[1], dict) else {})
    m = re.search(r"\$\{([A-Za-z0-9]+)(?:\.(Arn|Alias))?\}/invocations", str(text or ""))
    if not m:
        return None
    if m.group(2):
        return m.group(1)
    return ref_target(variables.get(m.group(1)))


def _target_ref(value: Any) -> str | None:
    text = value.get("Fn::Sub") if isinstance(value, dict) else value
    m = re.search(r"integrations/\$\{([A-Za-z0-9]+)\}", str(text or ""))
    return m.group(1) if m else None


def websocket_routes(document: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """``(selection field, {route key: function logical id})`` of the template's WebSocket API
    (``("", {})`` when it has none)."""
    resources = document.get("Resources") or {}
    apis = [lid for lid, r in resources.items() if isinstance(r, dict) and r.get("Type") == "AWS::ApiGatewayV2::Api"
            and (r.get("Properties") or {}).get("ProtocolType") == "WEBSOCKET"]
    if not apis:
        return "", {}
    api = apis[0]
    expr = str(resources[api]["Properties"].get("RouteSelectionExpression") or "")
    field = expr.removeprefix("$request.body.") if expr.startswith("$request.body.") else ""
    routes: dict[str, str] = {}
    for r in resources.values():
        if not isinstance(r, dict) or r.get("Type") != "AWS::ApiGatewayV2::Route":
            continue
        props = r.get("Properties") or {}
        if (props.get("ApiId") or {}).get("Ref") != api:
            continue
        integration = resources.get(_target_ref(props.get("Target")) or "") or {}
        fn = _sub_function((integration.get("Properties") or {}).get("IntegrationUri"))
        if fn:
            routes[str(props["RouteKey"])] = fn
    return field, routes


class Ag2Gateway:
    """The WebSocket API of one local stack. ``invoke(function logical id, event)`` runs a
    function as Lambda would; ``host``/``port`` are the hub's."""

    def __init__(self, document: dict[str, Any], invoke: Callable[[str, dict[str, Any]], Any]):
        self.field, self.routes = websocket_routes(document)
        self.invoke = invoke
        self.connections: dict[str, Any] = {}
        self.last_message: dict[str, float] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="ag2-invoke")
        self.domain = ""
        self.max_seconds = float(os.environ.get("RELAYNET_AG2_MAX_CONNECTION_SECONDS", 7200))
        self.idle_seconds = float(os.environ.get("RELAYNET_AG2_IDLE_SECONDS", 600))
        self.available = wire_installed()
        self.index = 0  # this hub process's index (relaynet_local.workers): the first byte of its connection ids
        self.peer_url: Callable[[int, bool], str | None] | None = None  # another process's private URL (index, fresh)
        self._forwarder: Any = None  # httpx.Client, made at the first forwarded call

    @property
    def enabled(self) -> bool:
        return bool(self.routes)

    def serve_in_process(self, management_url: str) -> None:
        """Answer this process's management API calls to ``management_url`` (its
        ``RELAYNET_AG2_MANAGEMENT_URL``) in process: botocore's prepared request goes to
        :meth:`manage` instead of the socket. Only clients boto3's default session makes after
        this call are served so (botocore copies a session's handlers into each client it
        makes); any other client still reaches the same answer over HTTP. Undone by :meth:`stop`."""
        import boto3

        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        boto3.DEFAULT_SESSION.events.register("before-send.apigatewaymanagementapi", _send_in_process,
                                              unique_id="relaynet-local-in-process-management")
        with _in_process_lock:
            _in_process[management_url.rstrip("/") + "/@connections/"] = self

    def stop(self) -> None:
        with _in_process_lock:
            for prefix in [p for p, gateway in _in_process.items() if gateway is self]:
                del _in_process[prefix]
        with self._lock:
            conns = list(self.connections.values())
        for conn in conns:
            try:
                conn.close(1001, "hub stopping")
            except Exception:  # noqa: BLE001 - already closing
                pass
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None

    # -- the upgrade -------------------------------------------------------------------------

    @staticmethod
    def owns(sock: socket.socket) -> bool:
        """Whether the first request on ``sock`` is ``GET /v1/ag2`` (peeked, nothing consumed)."""
        want = f"GET {PATH}".encode()
        deadline = time.monotonic() + 2
        sock.settimeout(2)
        try:
            while time.monotonic() < deadline:
                head = sock.recv(len(want) + 1, socket.MSG_PEEK)
                if len(head) >= len(want) + 1 or not head:
                    return head.startswith(want) and head[len(want):len(want) + 1] in (b" ", b"?", b"/")
                time.sleep(0.005)
        except OSError:
            return False
        finally:
            sock.settimeout(None)
        return False

    def serve_socket(self, sock: socket.socket, address: Any) -> None:
        """Upgrade and serve one connection on the calling thread, until it closes."""
        if not self.available:
            body = json.dumps({"error": {"code": "not_implemented",
                                         "message": f"the AG2 wire needs the websockets package: {INSTALL_HINT}"}})
            sock.sendall(f"HTTP/1.1 501 Not Implemented\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode())
            sock.close()
            return
        from websockets.sync.server import serve

        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # never listened on: serve() wants one
        server = serve(self._handler, sock=holder, max_size=MAX_CLIENT_FRAME, ping_interval=None,
                       process_request=self._process_request, compression=None)
        try:
            server.handler(sock, address)  # websockets' per-connection handshake + handler
        finally:
            holder.close()

    def _process_request(self, connection: Any, request: Any) -> Any:
        path = request.path.split("?", 1)[0]
        if path != PATH:
            return connection.respond(404, f"no WebSocket route {path}\n")
        connection_id = base64.b64encode(bytes([self.index]) + uuid.uuid4().bytes[:9]).decode()
        connection.ag2_connection_id = connection_id
        connection.ag2_query = request.path.partition("?")[2]
        with self._lock:
            self.connections[connection_id] = connection
            self.last_message[connection_id] = time.monotonic()
        try:
            result = self._invoke("$connect", connection_id, None, eventType="CONNECT")
            status = int((result or {}).get("statusCode", 200)) if isinstance(result, dict) else 200
        except Exception:  # noqa: BLE001 - API Gateway refuses the connection too
            log.exception("AG2 $connect failed")
            status = 500
        if status >= 300:
            with self._lock:
                self.connections.pop(connection_id, None)
            return connection.respond(403 if status < 500 else 500, "connection refused\n")
        return None

    # -- one connection ----------------------------------------------------------------------

    def _handler(self, connection: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        connection_id = connection.ag2_connection_id
        opened = time.monotonic()
        try:
            while True:
                remaining = self.max_seconds - (time.monotonic() - opened)
                if remaining <= 0:
                    connection.close(1001, "Going away: the 2-hour connection limit")
                    break
                idle_left = self.idle_seconds - (time.monotonic() - self.last_message.get(connection_id, opened))
                if idle_left <= 0:
                    connection.close(1001, "Going away: idle for 10 minutes")
                    break
                try:
                    message = connection.recv(timeout=min(remaining, idle_left, 5.0))
                except TimeoutError:
                    continue
                except ConnectionClosed:
                    break
                self.last_message[connection_id] = time.monotonic()
                self._pool.submit(self._message, connection_id, message)
        finally:
            with self._lock:
                self.connections.pop(connection_id, None)
                self.last_message.pop(connection_id, None)
            try:
                self._invoke("$disconnect", connection_id, None, eventType="DISCONNECT")
            except Exception:  # noqa: BLE001 - logged, as API Gateway would
                log.exception("AG2 $disconnect failed")

    def _message(self, connection_id: str, message: str | bytes) -> None:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        route = "$default"
        try:
            data = json.loads(text)
            if isinstance(data, dict) and isinstance(data.get(self.field), str) and data[self.field] in self.routes:
                route = data[self.field]
        except ValueError:
            pass
        try:
            self._invoke(route, connection_id, text, eventType="MESSAGE")
        except Exception:  # noqa: BLE001 - API Gateway logs an integration failure
            log.exception("AG2 route %s failed", route)

    def _invoke(self, route: str, connection_id: str, body: str | None, **ctx: Any) -> Any:
        fn = self.routes.get(route) or self.routes.get("$default")
        if fn is None:
            return {"statusCode": 200}
        now = time.time()
        event = {"requestContext": {
            "routeKey": route, "eventType": ctx["eventType"], "connectionId": connection_id,
            "messageId": uuid.uuid4().hex[:16], "domainName": self.domain, "stage": STAGE,
            "apiId": "local", "requestId": uuid.uuid4().hex, "connectedAt": int(now * 1000),
            "requestTimeEpoch": int(now * 1000), "messageDirection": "IN",
            "identity": {"sourceIp": "127.0.0.1"}}, "isBase64Encoded": False}
        if body is not None:
            event["body"] = body
        return self.invoke(fn, event)

    # -- the management API (postToConnection) ---------------------------------------------

    def manage(self, method: str, connection_id: str, body: bytes) -> tuple[int, bytes]:
        """``POST`` (send ``body`` as one text message), ``GET`` (connection info) or ``DELETE``
        (close) on ``/@connections/{id}``; ``(status, JSON body)`` as API Gateway answers."""
        with self._lock:
            conn = self.connections.get(connection_id)
        if conn is None:
            owner = owner_index(connection_id)
            if owner is not None and owner != self.index and self.peer_url is not None:
                return self._forward(owner, method, connection_id, body)
            return 410, json.dumps({"message": "Gone", "__type": "GoneException"}).encode()
        if method == "POST":
            if len(body) > MAX_SERVER_MESSAGE:
                return 413, json.dumps({"message": "Request entity too large",
                                        "__type": "PayloadTooLargeException"}).encode()
            try:
                conn.send(body.decode("utf-8"))
            except Exception:  # noqa: BLE001 - the socket closed meanwhile
                return 410, json.dumps({"message": "Gone", "__type": "GoneException"}).encode()
            self.last_message[connection_id] = time.monotonic()
            return 200, b""
        if method == "DELETE":
            conn.close(1000, "closed by the hub")
            return 204, b""
        return 200, json.dumps({"connectedAt": None, "identity": {"sourceIp": "127.0.0.1"}}).encode()

    def _forward(self, owner: int, method: str, connection_id: str, body: bytes) -> tuple[int, bytes]:
        """The management call for a connection another hub process holds, made there; Gone
        when that process is not running (its connections closed with it). The owner's address is
        read again once when it refuses the connection (a restarted worker has a new port)."""
        gone = 410, json.dumps({"message": "Gone", "__type": "GoneException"}).encode()
        if self._forwarder is None:
            self._forwarder = httpx.Client(timeout=5.0)
        for fresh in (False, True):
            url = self.peer_url(owner, fresh) if self.peer_url is not None else None
            if not url:
                return gone
            try:
                answer = self._forwarder.request(method, f"{url}{MANAGEMENT_PREFIX}{quote(connection_id, safe='')}",
                                                 content=body)
            except httpx.ConnectError:
                continue
            except httpx.HTTPError:
                return gone
            return answer.status_code, answer.content
        return gone


_in_process: dict[str, Ag2Gateway] = {}  # "<management URL>/@connections/" -> the gateway serving it here
_in_process_lock = threading.Lock()


class _Body:
    """A response body botocore can read (``AWSResponse.raw``: ``stream()``)."""

    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_: Any):
        yield self.data


def _send_in_process(request: Any, **_: Any) -> Any:
    """botocore's ``before-send`` handler (:meth:`Ag2Gateway.serve_in_process`): the answer of the
    gateway that serves ``request.url`` in this process, else None (botocore sends it)."""
    url = request.url.split("?", 1)[0]
    with _in_process_lock:
        match = next(((prefix, gw) for prefix, gw in _in_process.items() if url.startswith(prefix)), None)
    if match is None:
        return None
    from botocore.awsrequest import AWSResponse

    prefix, gateway = match
    body = request.body or b""
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif not isinstance(body, bytes):
        body = body.read()
    status, data = gateway.manage(request.method, unquote(url[len(prefix):]), body)
    return AWSResponse(request.url, status, {"content-type": "application/json"} if data else {}, _Body(data))


def owner_index(connection_id: str) -> int | None:
    """The index of the hub process holding ``connection_id`` (its first byte); ``None`` for an
    id this hub did not make."""
    try:
        raw = base64.b64decode(connection_id, validate=True)
    except ValueError:
        return None
    return raw[0] if len(raw) == 10 else None
