"""The one place that turns API Gateway HTTP API events into tool calls and domain errors into
the protocol's error envelope (PROTOCOL.md 2).

A handler file builds a :class:`ToolApp`, registers its single route with :meth:`ToolApp.route`
and exposes ``handler = tool.handler``. Check order (PROTOCOL.md 2): authentication (401, before
anything else), body size (413), arguments (400, powertools validation against the pydantic
model), then the domain's existence (404), permission (403) and state (409) checks.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from relaynet import catalogue
from relaynet.errors import InvalidArgument, PayloadTooLarge, PermissionDenied, RelaynetError, Unauthenticated
from relaynet.identity import Principal, touch

MAX_BODY_BYTES = 64 * 1024
logger = Logger(service="relaynet")


def error_response(exc: RelaynetError) -> dict[str, Any]:
    """An API Gateway proxy result carrying ``exc``'s envelope."""
    return {
        "statusCode": exc.status,
        "headers": {"Content-Type": "application/json", **exc.headers},
        "body": json.dumps(exc.envelope()),
    }


def _json_response(exc: RelaynetError) -> Response:
    return Response(status_code=exc.status, content_type="application/json", body=json.dumps(exc.envelope()),
                    headers=exc.headers or None)


def _field_path(loc: tuple) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def validation_fields(errors: list[dict[str, Any]]) -> list[dict[str, str]]:
    """pydantic/powertools errors -> ``[{"field", "message"}]``, one per bad field."""
    fields: list[dict[str, str]] = []
    seen: set[str] = set()
    for err in errors:
        loc = tuple(err.get("loc", ()))
        etype = err.get("type", "")
        if etype == "extra_forbidden":
            message = "unknown argument"
        elif etype == "missing":
            message = "required"
        else:
            message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        # Union/Optional errors repeat the field with a type suffix (e.g. "toAgent.str"): keep one.
        path = _field_path(tuple(p for p in loc if not (isinstance(p, str) and p in ("str", "int", "list", "dict"))))
        if path in seen:
            continue
        seen.add(path)
        fields.append({"field": path, "message": message})
    return fields


def make_resolver() -> APIGatewayHttpResolver:
    """A powertools HTTP API resolver with validation on and the protocol's error mapping."""
    app = APIGatewayHttpResolver(enable_validation=True)

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        fields = validation_fields(list(exc.errors()))
        summary = "; ".join(f"{f['field']}: {f['message']}" for f in fields) or "invalid arguments"
        return _json_response(InvalidArgument(summary, fields))

    @app.exception_handler(RelaynetError)
    def _domain(exc: RelaynetError) -> Response:
        return _json_response(exc)

    @app.not_found
    def _missing(_exc: Exception) -> Response:
        return _json_response(_NotFoundRoute("no such route"))

    @app.exception_handler(Exception)
    def _bug(exc: Exception) -> Response:
        logger.exception("unhandled error")
        return _json_response(RelaynetError("internal error"))

    return app


class _NotFoundRoute(RelaynetError):
    status = 404
    code = "not_found"


def _prepare(event: dict[str, Any]) -> dict[str, Any]:
    """Body checks before validation: size (413), empty body -> ``{}``, a JSON object (400)."""
    body = event.get("body")
    if event.get("isBase64Encoded") and body:
        import base64

        body = base64.b64decode(body).decode("utf-8", errors="replace")
    body = body or ""
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body is over {MAX_BODY_BYTES // 1024} KiB")
    if not body.strip():
        body = "{}"
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidArgument("the body is not valid JSON", [{"field": "body", "message": str(exc)}]) from None
    if not isinstance(parsed, dict):
        raise InvalidArgument("the body must be a JSON object", [{"field": "body", "message": "must be an object"}])
    return {**event, "body": body, "isBase64Encoded": False}


def authorizer_context(event: dict[str, Any]) -> dict[str, Any] | None:
    """What the Lambda authorizer put in the request context (simple responses), if anything."""
    return ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda")


class ToolApp:
    """One tool's Lambda: its route, its caller and its handler.

    ``ToolApp("network_claim")`` looks the tool up in :mod:`relaynet.catalogue` for its path,
    surface and description.
    """

    def __init__(self, name: str):
        self.tool = catalogue.TOOLS[name]
        self.app = make_resolver()
        self._idempotency = None

    def route(self, func: Callable) -> Callable:
        """Register ``func`` as ``POST /v1/tools/<name>`` (operationId = the tool name)."""
        return self.app.post(self.tool.path, operation_id=self.tool.name, summary=self.tool.name,
                             description=self.tool.description)(func)

    def caller(self) -> Principal:
        """The authenticated principal; 403 when its token belongs to another surface (PROTOCOL.md 1)."""
        principal: Principal = self.app.context["principal"]
        want = "representative" if self.tool.surface == "control" else "instance"
        if principal.kind != want:
            raise PermissionDenied(f"a {principal.kind} token may not call {self.tool.name}")
        return principal

    def once(self, request: Any, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run a creating write at most once per ``Idempotency-Key`` (PROTOCOL.md 2).

        Same key and body within an hour: the first response. Same key, other body: 409
        ``already_exists``. First request still running: 409 ``in_progress`` with Retry-After.
        """
        key = self.app.current_event.headers.get("idempotency-key")
        if not key:
            return fn()
        from relaynet.http import idempotency

        body = request.model_dump(mode="json") if hasattr(request, "model_dump") else request
        return idempotency.once(self.tool.name, self.caller(), key, body, fn, self.app.lambda_context)

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda entry point."""
        try:
            principal = Principal.from_context(authorizer_context(event))
            event = _prepare(event)
        except RelaynetError as exc:
            return error_response(exc)
        self.app.append_context(principal=principal)
        try:
            touch(principal)
        except Exception:  # presence is best effort; never fail a call for it
            logger.exception("presence refresh failed")
        return self.app.resolve(event, context)
