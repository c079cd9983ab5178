"""The one place that turns API Gateway HTTP API events into tool calls and domain errors into
the protocol's error envelope (PROTOCOL.md 2).

A handler file declares the DynamoDB actions its function may use (``DYNAMODB_ACTIONS``, the
same list as its policy in template.yaml), builds ``ToolApp(<tool>, actions=DYNAMODB_ACTIONS)``,
registers its single route with :meth:`ToolApp.route` and exposes ``handler = tool.handler``.
The handler runs inside :func:`relaynet.store.table.declared`, so a DynamoDB request outside the
declaration fails (500, logged) in every test instead of with AccessDenied in AWS.

Check order (PROTOCOL.md 2): authentication (401, before anything else), body size (413),
arguments (400, powertools validation against the pydantic model), then the domain's existence
(404), permission (403) and state (409) checks.

The steps before the resolver are powertools middlewares (``lambda_handler_decorator``), composed
by :meth:`ToolApp.handler`, outermost first: the DynamoDB declaration; the observability of
:func:`relaynet.observability.instrument` (``inject_lambda_context`` with the HTTP API correlation
id, the tracer when on, the invocation's one metrics flush, the one ``"request"`` log line); :func:`authenticate`
(401, the caller in the resolver's context and in the log keys); :func:`check_body` (413/400);
:func:`check_query` (400 for an unknown query parameter); :func:`refresh_presence` (the
caller's ``lastSeenAt``, worker and plugin surfaces); then the resolver (validation, the route,
the error mapping). They must run before the resolver's validation, which is why they are not
``app.use`` middlewares (those run after it).
"""

from __future__ import annotations

import base64
import inspect
import json
import typing
from typing import Any, Callable, Iterable

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.middleware_factory import lambda_handler_decorator

from relaynet import catalogue, observability
from relaynet.config import settings
from relaynet.errors import InvalidArgument, PayloadTooLarge, PermissionDenied, RelaynetError
from relaynet.identity import Principal, touch
from relaynet.observability import logger
from relaynet.store import table

MAX_BODY_BYTES = 64 * 1024


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
    if loc[:2] == ("query", "query"):  # a query-string model's field (catalogue.Endpoint.query_name)
        loc = loc[2:]
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


class _Resolver(APIGatewayHttpResolver):
    """powertools' HTTP API resolver, keeping the event it resolves on itself.

    powertools' ``resolve`` stores the event on the class (``BaseRouter.current_event``), shared
    by every resolver of the process, and its middlewares read it back from there. A Lambda
    process serves one request at a time, so that is harmless in AWS; but the local stack runs
    every function's containers in one process, and concurrent requests then read each other's
    event (seen under the local-store benchmark: a ``network_inbox`` call validated against a
    concurrent ``network_claim``'s body). Set on the instance first, each container (one resolver,
    one invocation at a time) reads its own event and context.
    """

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.current_event = self._to_proxy_event(event)
        self.lambda_context = context
        return super().resolve(event, context)


def make_resolver() -> APIGatewayHttpResolver:
    """A powertools HTTP API resolver with validation on and the protocol's error mapping."""
    app = _Resolver(enable_validation=True)

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


MAX_DEPTH = 16  # arrays and objects inside each other; DynamoDB stores at most 32 levels per item
MAX_NUMBER_DIGITS = 30


class _BadBody(ValueError):
    """A body that is JSON text but not one the protocol accepts (see :func:`parse_body`)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _BadBody(f"duplicate key {key!r}")
        out[key] = value
    return out


def _int_literal(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _BadBody(f"a number with more than {MAX_NUMBER_DIGITS} digits")
    return int(text)


def _float_literal(text: str) -> float:
    value = float(text)
    if len(text) > 2 * MAX_NUMBER_DIGITS or value in (float("inf"), float("-inf")):
        raise _BadBody(f"a number out of range ({text[:40]})")
    return value


def _constant(name: str) -> Any:
    raise _BadBody(f"{name} is not JSON")


def _depth(value: Any, level: int = 1) -> None:
    if level > MAX_DEPTH:
        raise _BadBody(f"nested deeper than {MAX_DEPTH} levels")
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        if isinstance(child, (dict, list)):
            _depth(child, level + 1)


def parse_body(body: str) -> dict[str, Any]:
    """The request body as a JSON object, strictly (PROTOCOL.md 2; docs/protocol.md 12): no
    duplicate keys, numbers of at most 30 digits (no NaN or Infinity), at most 16 levels of
    nesting, no lone surrogates (text that cannot be UTF-8). Raises InvalidArgument (field ``body``)."""
    def bad(message: str) -> InvalidArgument:
        return InvalidArgument(f"body: {message}", [{"field": "body", "message": message}])

    try:
        parsed = json.loads(body, object_pairs_hook=_pairs, parse_int=_int_literal, parse_float=_float_literal,
                            parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    except _BadBody as exc:
        raise bad(str(exc)) from None
    except (RecursionError, ValueError):
        raise bad(f"nested deeper than {MAX_DEPTH} levels or not valid JSON") from None
    if not isinstance(parsed, dict):
        raise bad("must be a JSON object")
    try:
        _depth(parsed)
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except _BadBody as exc:
        raise bad(str(exc)) from None
    except UnicodeEncodeError:
        raise bad("a string holds a lone surrogate (not UTF-8 text)") from None
    return parsed


def body_text(event: dict[str, Any]) -> str:
    """An HTTP API event's body as text (base64 decoded when API Gateway encoded it; ``""`` when
    there is none). Raises PayloadTooLarge over 64 KiB (PROTOCOL.md 2) and InvalidArgument
    (field ``body``) when it is not UTF-8."""
    body = event.get("body")
    if event.get("isBase64Encoded") and body:
        raw = base64.b64decode(body)
        if len(raw) > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"request body is over {MAX_BODY_BYTES // 1024} KiB")
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument("body: not UTF-8 text", [{"field": "body", "message": "not UTF-8 text"}]) from None
    body = body or ""
    if len(body.encode("utf-8", errors="surrogatepass")) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body is over {MAX_BODY_BYTES // 1024} KiB")
    return body


def _prepare(event: dict[str, Any]) -> dict[str, Any]:
    """Body checks before validation: size (413), empty body -> ``{}``, a strict JSON object
    (400, :func:`parse_body`).

    The body is JSON whatever ``Content-Type`` says (``curl -d`` sends a form type, browsers
    ``text/plain``): the header is normalised so validation reads the body as JSON.
    """
    body = body_text(event)
    if not body.strip():
        body = "{}"
    parse_body(body)
    headers = {key: value for key, value in (event.get("headers") or {}).items() if key.lower() != "content-type"}
    headers["content-type"] = "application/json"
    return {**event, "headers": headers, "body": body, "isBase64Encoded": False}


def authorizer_context(event: dict[str, Any]) -> dict[str, Any] | None:
    """What the Lambda authorizer put in the request context (simple responses), if anything."""
    return ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda")


class ToolApp:
    """One tool's Lambda: its route, its caller, its declared DynamoDB actions and its handler.

    ``ToolApp("network_claim", actions=DYNAMODB_ACTIONS)`` looks the tool up in
    :mod:`relaynet.catalogue` for its path, surface, request model and description; ``actions``
    are the IAM item actions (``"GetItem"``, ``"Query"``, ...) its function's policy grants.
    """

    def __init__(self, name: str, *, actions: Iterable[str]):
        self.tool: catalogue.Tool | catalogue.Endpoint = catalogue.TOOLS.get(name) or catalogue.ENDPOINTS[name]
        self.method = getattr(self.tool, "method", "POST")
        if self.tool.model is not None:
            self.tool.model.model_rebuild()  # its validator now, at init (request models defer_build)
        self.actions = table.check_actions(actions)
        self.app = make_resolver()
        self._idempotency = None
        settings()  # a bad setting fails the container's start, naming the variable (relaynet.config)

        def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
            return self.app.resolve(event, context)

        # The middlewares (module docstring), innermost first; they wrap functions, not bound methods.
        steps = authenticate(check_body(check_query(refresh_presence(resolve, tool=self), tool=self)), tool=self)
        self._entry = observability.instrument(steps, name=self.tool.name, source="http")

    def route(self, func: Callable) -> Callable:
        """Register ``func`` as ``POST /v1/tools/<name>`` (operationId = the tool name), or as an
        endpoint's ``method path`` (:data:`relaynet.catalogue.ENDPOINTS`).

        ``func`` takes the catalogue's request model as its body (``Annotated[<Model>, Body()]``),
        so the handlers, the MCP bridge and the OpenAPI document share one schema; anything else
        is a TypeError at import.
        """
        hints = typing.get_type_hints(func, include_extras=True).values()
        query_model = getattr(self.tool, "query_model", None)
        for kind, want_model, what in ((Body, self.tool.model, "body"), (Query, query_model, "query string")):
            found = [typing.get_args(hint)[0] for hint in hints
                     if typing.get_origin(hint) is typing.Annotated
                     and any(isinstance(m, kind) for m in hint.__metadata__)]
            want = [want_model] if want_model is not None else []
            if found != want:
                expected = (f"Annotated[{want_model.__name__}, {kind.__name__}()] (the catalogue's model)"
                            if want_model is not None else f"no {what} (the catalogue names no model)")
                raise TypeError(f"{self.tool.name}: the route must take {expected}, found "
                                f"{[getattr(m, '__name__', m) for m in found]} in {inspect.signature(func)}")
        return self.app.route(self.tool.path, self.method, operation_id=self.tool.name, summary=self.tool.name,
                              description=self.tool.description)(func)

    def caller(self) -> Principal:
        """The authenticated principal; 403 when its token belongs to another surface (PROTOCOL.md 1)."""
        principal: Principal = self.app.context["principal"]
        want = "representative" if self.tool.surface == "control" else "instance"
        if principal.kind != want:
            raise PermissionDenied(f"{principal.kind} tokens may not call {self.tool.name} (the {self.tool.surface} surface)")
        return principal

    def once(self, request: Any, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run a creating write at most once per ``Idempotency-Key`` (PROTOCOL.md 2).

        Same key and body within an hour: the first response. Same key, other body: 409
        ``already_exists``. First request still running: 409 ``in_progress`` with Retry-After.
        The tool's declaration must include :data:`relaynet.store.table.IDEMPOTENCY_ACTIONS`.
        """
        missing = sorted(table.IDEMPOTENCY_ACTIONS - self.actions)
        if missing:  # checked on every call, keyed or not, so any test of the tool finds it
            raise table.UndeclaredAction(f"{self.tool.name} takes an Idempotency-Key but does not declare "
                                         f"{missing}: add them to its actions in shared/relaynet/catalogue.py "
                                         "and run `make generate`")
        key = self.app.current_event.headers.get("idempotency-key")
        if key is None:  # present but empty is a bad key (400), not "no key"
            return fn()
        from relaynet.http import idempotency

        body = request.model_dump(mode="json") if hasattr(request, "model_dump") else request
        return idempotency.once(self.tool.name, self.caller(), key, body, fn, self.app.lambda_context)

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda entry point (runs inside the tool's DynamoDB declaration)."""
        with table.declared(self.actions, self.tool.name):
            return self._entry(event, context)


@lambda_handler_decorator
def authenticate(handler: Callable[..., dict[str, Any]], event: dict[str, Any], context: Any, *,
                 tool: ToolApp) -> dict[str, Any]:
    """401 unless the authorizer resolved a principal (PROTOCOL.md 2: before anything else);
    otherwise the principal goes in the resolver's context (:meth:`ToolApp.caller`) and
    ``network``, ``caller`` and ``agent`` in the request's log keys."""
    try:
        principal = Principal.from_context(authorizer_context(event))
    except RelaynetError as exc:
        return error_response(exc)
    observability.bind_caller(principal)
    tool.app.append_context(principal=principal)
    return handler(event, context)


@lambda_handler_decorator
def check_body(handler: Callable[..., dict[str, Any]], event: dict[str, Any], context: Any) -> dict[str, Any]:
    """413 / 400 for a body the protocol refuses (:func:`_prepare`); the handler gets it normalised."""
    try:
        event = _prepare(event)
    except RelaynetError as exc:
        return error_response(exc)
    return handler(event, context)


@lambda_handler_decorator
def check_query(handler: Callable[..., dict[str, Any]], event: dict[str, Any], context: Any, *,
                tool: ToolApp) -> dict[str, Any]:
    """400 for a query-string parameter the endpoint's query model does not name (a misspelt
    ``?timout=5`` would otherwise be ignored and the default used); powertools validates the
    named ones. Endpoints without a query model ignore a query string, as API Gateway does."""
    model = getattr(tool.tool, "query_model", None)
    if model is not None:
        unknown = sorted(set(event.get("queryStringParameters") or {}) - set(model.model_fields))
        if unknown:
            fields = [{"field": name, "message": "unknown argument"} for name in unknown]
            return error_response(InvalidArgument("; ".join(f"{f['field']}: {f['message']}" for f in fields), fields))
    return handler(event, context)


@lambda_handler_decorator
def refresh_presence(handler: Callable[..., dict[str, Any]], event: dict[str, Any], context: Any, *,
                     tool: ToolApp) -> dict[str, Any]:
    """Refresh the calling instance's presence (identity.touch) on the worker and plugin surfaces
    (presence is an instance's; control calls leave it alone). Best effort: a failure is logged,
    never answered, except an undeclared action (a bug in the declaration: 500)."""
    if tool.tool.surface != "control":
        try:
            touch(tool.app.context["principal"])
        except table.UndeclaredAction:  # a bug in the declaration, not a transient failure
            logger.exception("presence refresh is not declared")
            return error_response(RelaynetError("internal error"))
        except Exception:  # presence is best effort; never fail a call for it
            logger.exception("presence refresh failed")
    return handler(event, context)
