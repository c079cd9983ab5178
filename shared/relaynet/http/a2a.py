"""A2A's JSON-RPC binding and Agent Card routes over API Gateway HTTP API events
(docs/protocol.md 13; relaynet.a2a holds the methods and shapes).

``POST /a2a/{network}/{agent}`` (behind the Lambda authorizer): one JSON-RPC 2.0 request per
body, answered with HTTP 200 and a JSON-RPC response, except where the transport answers: no
token 401 (API Gateway; an unknown or revoked one: the handler), a representative below ``delegate`` 403, no such network or agent 404,
a body over 64 KiB 413 (each still a JSON-RPC error body). Check order: the body parses (-32700),
is a request object (-32600), ``A2A-Version`` is 1.0 (empty or missing means 0.3, which is not
served: 0.3's UnsupportedOperationError -32004; another version -32009), names a method
(-32601), the params validate (-32602), then the endpoint, then
the method. No malformed request writes anything.

``SendMessage`` runs at most once per ``message.messageId`` and caller (relaynet.http.idempotency,
as an ``Idempotency-Key`` over the message, not the configuration): a retry within the hour
answers the first response; the same id with another message is -32600.
"""

from __future__ import annotations

import base64
import importlib
import json
import re
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from relaynet.a2a import card, wire
from relaynet.a2a.wire import A2AError
from relaynet.errors import InvalidArgument, NotFound, PayloadTooLarge, PermissionDenied, RelaynetError, Unauthenticated
from relaynet.http.api import MAX_BODY_BYTES, authorizer_context, body_text, parse_body
from relaynet.identity import Principal
from relaynet.observability import logger

#: Methods Relaynet serves (wire.SERVED) -> (params model, "module.function" under relaynet.a2a).
#: Named, not imported: the card and push-receipt functions import this module too, and need
#: neither the service (tasks, messaging, claims) nor the push configs (issue 30: no function
#: imports more than it uses). :func:`_call` imports the one a request needs.
METHODS: dict[str, tuple[type[BaseModel], str]] = {
    "SendMessage": (wire.SendMessageParams, "service.send_message"),
    "GetTask": (wire.GetTaskParams, "service.get_task"),
    "ListTasks": (wire.ListTasksParams, "service.list_tasks"),
    "CancelTask": (wire.CancelTaskParams, "service.cancel_task"),
    "CreateTaskPushNotificationConfig": (wire.PushConfigParams, "push.create"),
    "GetTaskPushNotificationConfig": (wire.PushConfigRef, "push.get"),
    "ListTaskPushNotificationConfigs": (wire.ListPushConfigsParams, "push.list_configs"),
    "DeleteTaskPushNotificationConfig": (wire.PushConfigRef, "push.delete"),
}
assert tuple(METHODS) == wire.SERVED, "relaynet.a2a.wire.SERVED names the methods mapped here"
REFUSED = wire.REFUSED


def _reply(status: int, rpc_id: Any, *, result: Any = None, error: A2AError | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id}
    if error is not None:
        body["error"] = error.body()
    else:
        body["result"] = result
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}


_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?")


def origin(event: dict[str, Any]) -> str:
    """``scheme://host`` the caller reached: ``X-Forwarded-Proto`` when it is ``https`` (API
    Gateway sets it) else http, and the Host header when it is a ``host[:port]`` (else the request
    context's domain name): what goes into a card is never more than a scheme and an authority."""
    headers = event.get("headers") or {}
    host = headers.get("host") or ""
    if not _HOST.fullmatch(host):  # not a host[:port]: the domain API Gateway was reached at
        host = (event.get("requestContext") or {}).get("domainName") or ""
        host = host if _HOST.fullmatch(host) else "localhost"
    scheme = "https" if (headers.get("x-forwarded-proto") or "").strip().lower() == "https" else "http"
    return f"{scheme}://{host}"


def _version(headers: dict[str, str]) -> None:
    """Serve A2A 1.0 only: an empty or missing ``A2A-Version`` means 0.3, which gets 0.3's own
    error for what it cannot do (UnsupportedOperationError: 0.3 has no VersionNotSupportedError);
    any other version but 1.x.y gets 1.0's VersionNotSupportedError."""
    raw = (headers.get("a2a-version") or "").strip() or "0.3"
    parts = raw.split(".")
    if parts[:2] == ["1", "0"]:
        return
    message = (f"A2A-Version {raw} is not served: this agent speaks A2A {wire.PROTOCOL_VERSION} "
               f"(send the header A2A-Version: {wire.PROTOCOL_VERSION})")
    code = wire.UNSUPPORTED_OPERATION if parts[:2] == ["0", "3"] else wire.VERSION_NOT_SUPPORTED
    raise A2AError(code, message, {"supported": [wire.PROTOCOL_VERSION]})


def _request(event: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    """(id, method, params) of the body, or A2AError (parse, invalid request)."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded") and body:
        try:
            body = base64.b64decode(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise A2AError(wire.JSON_PARSE, f"parse error: the body is not UTF-8 (byte {exc.start})") from None
    if len(body.encode("utf-8", errors="surrogatepass")) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body is over {MAX_BODY_BYTES // 1024} KiB")
    try:
        parsed = parse_body(body)
    except InvalidArgument as exc:
        try:
            doc = json.loads(body)
        except RecursionError:  # JSON nested past Python's own limit: certainly not a request object
            doc = None
        except ValueError:
            raise A2AError(wire.JSON_PARSE, f"parse error: {exc.message}") from None
        # JSON, but not one request object (a batch, a scalar, a duplicate key, ...): not served
        hint = " (one JSON-RPC request object per body; batches are not served)" if isinstance(doc, list) else ""
        raise A2AError(wire.INVALID_REQUEST, f"invalid request: {exc.message}{hint}") from None
    rpc_id = parsed.get("id")
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, (str, int, type(None))):
        raise A2AError(wire.INVALID_REQUEST, "id must be a string, a number or null")
    if "id" not in parsed:
        raise A2AError(wire.INVALID_REQUEST, "a notification (a request without id) is not served: every "
                       "call is answered, so send an id")
    method, params = parsed.get("method"), parsed.get("params", {})
    if parsed.get("jsonrpc") != "2.0" or not isinstance(method, str) or not isinstance(params, dict):
        raise _Invalid(rpc_id, A2AError(wire.INVALID_REQUEST, 'not a JSON-RPC 2.0 request: {"jsonrpc": "2.0", '
                                        '"method": <string>, "params": <object>, "id": ...}'))
    return rpc_id, method, params


class _Invalid(Exception):
    def __init__(self, rpc_id: Any, error: A2AError):
        self.rpc_id, self.error = rpc_id, error


def _params(model: type[BaseModel], params: dict[str, Any]) -> BaseModel:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        fields = [{"field": ".".join(str(p) for p in e["loc"]) or "params", "message": e["msg"]} for e in exc.errors()]
        raise A2AError(wire.INVALID_PARAMS, "invalid params: " + "; ".join(f"{f['field']}: {f['message']}" for f in fields),
                       {"fields": fields}) from None


def _domain_error(exc: RelaynetError) -> tuple[int, A2AError]:
    """A domain error as (HTTP status, A2A error): 400 -> InvalidParams, 401/403/404/413 at the
    transport with a JSON-RPC body, anything else InvalidRequest with Relaynet's envelope."""
    if isinstance(exc, InvalidArgument):
        return 200, A2AError(wire.INVALID_PARAMS, exc.message, exc.envelope()["error"].get("details"))
    if isinstance(exc, (Unauthenticated, PermissionDenied, NotFound, PayloadTooLarge)):
        return exc.status, A2AError(wire.INVALID_REQUEST, exc.message, {"relaynet": exc.envelope()["error"]})
    return 200, A2AError(wire.INVALID_REQUEST, exc.message, {"relaynet": exc.envelope()["error"]})


def _call(target: str) -> Callable[..., dict[str, Any]]:
    """``"service.send_message"`` -> relaynet.a2a.service.send_message (imported on first use)."""
    module, _, name = target.partition(".")
    return getattr(importlib.import_module(f"relaynet.a2a.{module}"), name)


def rpc(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The JSON-RPC endpoint (module docstring): an API Gateway proxy result."""
    rpc_id = None
    try:
        principal = Principal.from_context(authorizer_context(event))
        rpc_id, method, raw_params = _request(event)
        _version(event.get("headers") or {})
        if method in REFUSED:
            code, message = REFUSED[method]
            raise A2AError(code, message)
        if method not in METHODS:
            raise A2AError(wire.METHOD_NOT_FOUND, f"no method {method!r}: this agent serves "
                           f"{', '.join(METHODS)}", {"methods": list(METHODS)})
        model, target = METHODS[method]
        params = _params(model, raw_params)
        call = _call(target)
        from relaynet.a2a import service

        path = event.get("pathParameters") or {}
        agent = path.get("agent", "")
        bound = service.bind(principal, path.get("network", ""), agent)
        if method == "SendMessage":
            from relaynet.http import idempotency

            # the message is the request: a retry may ask for another historyLength and still be one
            result = idempotency.once("a2a_send_message", bound, params.message.messageId,
                                      params.message.model_dump(mode="json"), lambda: call(bound, agent, params),
                                      context)
        else:
            result = call(bound, agent, params)
        return _reply(200, rpc_id, result=result)
    except _Invalid as exc:
        return _reply(200, exc.rpc_id, error=exc.error)
    except A2AError as exc:
        return _reply(200, rpc_id, error=exc)
    except RelaynetError as exc:
        status, error = _domain_error(exc)
        return _reply(status, rpc_id, error=error)
    except Exception:  # a bug: logged with its traceback, answered as JSON-RPC's internal error
        logger.exception("a2a: unexpected error")
        return _reply(500, rpc_id, error=A2AError(wire.INTERNAL, "internal error"))


def _json(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}


def cards(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``GET /a2a/{network}/{agent}/.well-known/agent-card.json`` (one card) and
    ``GET /a2a/{network}`` (``{network, agents: [card]}``): no token; 404 with Relaynet's error
    envelope for an unknown network or agent."""
    path = event.get("pathParameters") or {}
    try:
        if "agent" in path:
            return _json(200, card.agent_card(origin(event), path.get("network", ""), path["agent"]))
        return _json(200, card.network_cards(origin(event), path.get("network", "")))
    except RelaynetError as exc:
        return _json(exc.status, exc.envelope())


def push_in(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``POST /a2a/{network}/push/{instance}/{task}`` (no token: the notification's own
    ``X-A2A-Notification-Token`` proves it; docs/protocol.md 13.4): a remote A2A agent's push
    notification about the task the bridge sent it for Relaynet task ``task``. 200
    ``{"received": true}``: the bridge follows the task now (relaynet.a2a.bridge.receive_push).
    Errors in Relaynet's envelope, none writing anything: 413 a body over 64 KiB; 400 a body that
    is not a strict JSON object (relaynet.http.api.parse_body); 404 no remote task followed
    there; 401 a missing or wrong token."""
    path = event.get("pathParameters") or {}
    try:
        parse_body(body_text(event))  # the body is not applied (the bridge asks GetTask): only checked
        token = (event.get("headers") or {}).get("x-a2a-notification-token")
        from relaynet.a2a import bridge

        bridge.receive_push(path.get("network", ""), path.get("instance", ""), path.get("task", ""), token)
        return _json(200, {"received": True})
    except RelaynetError as exc:
        return _json(exc.status, exc.envelope())
