"""Logging, metrics and tracing of every Lambda entry point (powertools), configured once here.

Owns the service's one powertools :data:`logger` (domain modules take ``Logger(child=True)``),
the wrapper every Lambda entry point in functions/ goes through (:func:`instrument`; a test fails
on a handler that does not), each invocation's log keys and closing line (:func:`log_request`),
the EMF :data:`metrics` and :func:`count`, and the optional tracer (:func:`traced`,
:func:`tracer`). docs/architecture.md ("Observability") lists what is logged and measured and how
to query it.

- **Logs**: JSON lines from the powertools Logger; the service name comes from
  ``POWERTOOLS_SERVICE_NAME`` and the level from ``POWERTOOLS_LOG_LEVEL`` (template.yaml sets
  both). Every line an invocation logs carries its ``correlation_id`` where its event has one
  (:data:`CORRELATION_PATHS`: API Gateway's request id for an HTTP route, the authorizer and a
  WebSocket route; the EventBridge event's id for a schedule) and ``function_request_id``. A tool
  call adds ``tool``, ``network``, ``caller`` and ``agent`` and ends with one ``"request"`` line
  holding those keys plus ``status`` and ``latency_ms``; the authorizer adds the caller's keys
  and ends with one ``"authorize"`` line; a WebSocket route adds ``function``,
  ``connection_id`` and ``route`` and ends with one ``"request"`` line.
  The per-request keys are powertools' *thread-safe* keys: a Lambda process serves one request
  at a time, but the local stack serves every function from one process, one thread per
  connection, and the shared formatter's plain keys would mix concurrent requests.
- **Metrics**: CloudWatch EMF (powertools Metrics), namespace ``POWERTOOLS_METRICS_NAMESPACE``
  (template.yaml: ``Relaynet``), dimensions ``service`` and ``function`` (the tool or entry point), flushed once per invocation
  (an invocation that counted nothing writes nothing; no cold-start metric), under a lock:
  :func:`_flush` says why.
  ``POWERTOOLS_METRICS_DISABLED=true`` (the local stack's default) makes :func:`count` a no-op,
  so nothing accumulates in memory.
- **Tracing**: only when :attr:`relaynet.config.Settings.tracing` is on (in Lambda, unless
  ``POWERTOOLS_TRACE_DISABLED``). Off, :func:`traced` returns the store function unchanged at
  call time and ``aws_xray_sdk`` is never imported (cold start, issue 16).
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from typing import Any, Callable

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.middleware_factory import lambda_handler_decorator
from aws_lambda_powertools.utilities import jmespath_utils

from relaynet import snapstart as _snapstart

# Every Lambda entry point goes through :func:`instrument` (a test fails on a handler that does
# not), so every handler file imports this module at init and registers the SnapStart
# after-restore hook there, as the runtime requires of hooks (relaynet.snapstart). It lived in
# relaynet/__init__ until ``relaynet`` became a namespace package shared with the client's
# distribution (docs/architecture.md, "Two distributions"), which has no __init__ to run.
_snapstart.register()

#: The service's logger: name and level from POWERTOOLS_SERVICE_NAME / POWERTOOLS_LOG_LEVEL.
logger = Logger()
#: EMF metrics; the namespace is POWERTOOLS_METRICS_NAMESPACE (powertools reads it). Metrics
#: without a namespace cannot be flushed, so a process that has none (a test, a script) uses
#: template.yaml's value rather than failing the request.
metrics = Metrics()
if not metrics.namespace:
    metrics.namespace = "Relaynet"


#: The counts of the running invocation (:func:`count`), None outside an entry point.
_pending: contextvars.ContextVar[list[tuple[str, float, dict[str, Any]]] | None] = contextvars.ContextVar(
    "relaynet_invocation_metrics", default=None)
_flush_lock = threading.Lock()

#: The metric names this hub writes (all of unit Count); docs/architecture.md says what each means.
METRICS = (
    "ClaimConflict",          # a network_claim refused because another holder's claim overlaps
    "TransactionCancelled",   # a TransactWriteItems cancelled (a condition failed or a conflict)
    "TransactionConflict",    # ... of which another transaction on the same items was in flight
    "RateLimited",            # a 429 of relaynet.limits (metadata rate_limit: mailbox_cap / fanout)
    "DeliveryChunks",         # further transactions a message to more than ~99 mailboxes needed
    "DeliveryChunkFailed",    # a chunk that could not be written after its retries
    # the sweep: one per outcome of relaynet.sweep.run and channels.sweep, "Sweep" + CamelCase
    # (SweepOffered, SweepExpired, SweepParked, SweepLostRaces, SweepErrors, SweepChannelsExpired,
    # SweepChannelsReplyWithin, ...)
)


def count(name: str, value: float = 1, **metadata: Any) -> None:
    """Add ``value`` to the Count metric ``name`` of this invocation (flushed when it ends).

    ``metadata`` goes into the EMF record (searchable in Logs Insights, not a dimension). A no-op
    when metrics are disabled (``POWERTOOLS_METRICS_DISABLED``) and outside an entry point made
    by :func:`instrument` (the admin CLI, a script, a domain test): nothing would flush the
    metric there, and powertools prints its set to stdout once 100 values pile up.
    """
    pending = _pending.get()
    if pending is None:
        return
    from relaynet.config import settings  # here: health, openapi and ui never load the settings

    if not settings().metrics:
        return
    pending.append((name, value, metadata))


def _flush(entry: str, pending: list[tuple[str, float, dict[str, Any]]]) -> None:
    """Write one invocation's counts as one EMF record (dimension ``function=entry``).

    powertools keeps one metric set per process, shared by every thread; a Lambda environment
    serves one invocation at a time, but the local stack serves all of them from one process at
    once, so the counts wait in the invocation's own list (:func:`count`) and are added and
    flushed under one lock: no invocation flushes another's counts under its own name, or finds
    the set emptied between powertools' check and its write (which raised SchemaValidationError,
    a 500, under 32 agents)."""
    if not pending:
        return
    with _flush_lock:
        metrics.add_dimension(name="function", value=entry)
        for name, value, metadata in pending:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
            for key, item in metadata.items():
                metrics.add_metadata(key=key, value=item)
        metrics.flush_metrics()


def count_outcomes(prefix: str, stats: dict[str, Any]) -> None:
    """One Count metric per integer of ``stats``: ``{"lost_races": 2}`` -> ``<prefix>LostRaces``."""
    for key, value in stats.items():
        if isinstance(value, int) and not isinstance(value, bool):
            count(prefix + "".join(part.capitalize() for part in key.split("_")), value)


#: Where each kind of event an entry point takes holds its correlation id: a JMESPath, as
#: powertools' ``correlation_paths`` name them, by the ``source`` given to :func:`instrument`;
#: None when the event has none.
CORRELATION_PATHS: dict[str, str | None] = {
    # an HTTP API route (payload 2.0): API Gateway's request id, the apigw-requestid header clients see
    "http": correlation_paths.API_GATEWAY_HTTP,
    # the HTTP API's Lambda authorizer (payload 2.0 REQUEST event): the id of the request it
    # authorises, so one filter finds the authorizer's line and the tool's
    "authorizer": correlation_paths.API_GATEWAY_HTTP,
    # a WebSocket API route ($connect, $disconnect, a message): the id of that one event
    "websocket": correlation_paths.API_GATEWAY_REST,
    # an EventBridge schedule: the event's id
    "schedule": correlation_paths.EVENT_BRIDGE,
    # a DynamoDB stream batch (or its records handed over at the write): each record has its own
    # eventID, the batch none
    "stream": None,
}

#: The one line each source's invocation ends with (:func:`log_request`); None: no closing line
#: (a schedule or a stream batch logs its outcomes itself when it did anything, and an error).
CLOSING_LINES: dict[str, str | None] = {
    "http": "request", "websocket": "request", "authorizer": "authorize", "schedule": None, "stream": None}


def correlation_id(event: Any, source: str = "http") -> str | None:
    """The correlation id of ``event``, an event of ``source`` (:data:`CORRELATION_PATHS`), or
    None when that kind of event has none or this one lacks it. Raises KeyError for an unknown
    ``source``."""
    path = CORRELATION_PATHS[source]
    if path is None or not isinstance(event, dict):
        return None
    found = jmespath_utils.query(envelope=path, data=event)
    return found if isinstance(found, str) else None


def bind(**keys: Any) -> None:
    """Add ``keys`` to every line this request logs from here on (None values are left out)."""
    logger.thread_safe_append_keys(**{k: v for k, v in keys.items() if v is not None})


def bind_caller(principal: Any) -> None:
    """Add a principal's ``network``, ``agent`` and ``caller`` (its instance id, or ``rep:<name>``
    for a representative) to this invocation's lines; nothing for None (an unknown token).
    ``principal`` is a :class:`relaynet.identity.Principal` (``kind``, ``network_id``,
    ``instance_id``, ``agent``, ``rep``)."""
    if principal is None:
        return
    bind(network=principal.network_id, agent=principal.agent,
         caller=principal.instance_id if principal.kind == "instance" else f"rep:{principal.rep}")


@lambda_handler_decorator
def log_request(handler: Callable[..., Any], event: Any, context: Any, *, name: str, source: str = "http") -> Any:
    """The per-invocation log keys and closing line of the entry point ``name``, whose events are
    of ``source`` (middleware inside :func:`instrument`).

    Clears the thread-safe keys, then binds ``correlation_id`` (:func:`correlation_id`) and
    ``function_request_id`` (Lambda's request id), and ``tool`` (``source="http"``) or
    ``function`` (any other) naming the entry point; a WebSocket event adds ``connection_id``
    and ``route`` (its route key). For an HTTP route the authentication step binds ``network``,
    ``caller`` and ``agent``; the authorizer binds them itself. It runs the handler, then logs
    the source's closing line (:data:`CLOSING_LINES`): ``"request"`` with ``status`` (the
    ``statusCode`` answered) and ``latency_ms`` at INFO, ERROR for a 5xx; ``"authorize"`` with
    ``latency_ms``; none for a schedule or a stream batch. An exception escaping the handler is
    logged, with its traceback except for an HTTP route (ToolApp logs its own "unhandled
    error"), as status 500 on a ``"request"`` line, or ``"authorize failed"`` / ``"invocation
    failed"``, and re-raised. The keys are cleared when it returns.
    """
    started = time.perf_counter()
    logger.thread_safe_clear_keys()
    keys = {"tool" if source == "http" else "function": name, "correlation_id": correlation_id(event, source),
            "function_request_id": getattr(context, "aws_request_id", None)}
    if source == "websocket":
        request_context = (event.get("requestContext") if isinstance(event, dict) else None) or {}
        keys.update(connection_id=request_context.get("connectionId"), route=request_context.get("routeKey"))
    # None values too: a thread-safe None hides the plain key inject_lambda_context left from
    # another function's call in the local stack's one process, and the formatter drops it.
    logger.thread_safe_append_keys(**keys)
    line = CLOSING_LINES[source]
    try:
        try:
            response = handler(event, context)
        except BaseException:
            latency = _ms_since(started)
            if source == "http":  # ToolApp logged the error itself ("unhandled error") where it could
                logger.error(line, extra={"status": 500, "latency_ms": latency})
            elif line == "request":
                logger.exception(line, extra={"status": 500, "latency_ms": latency})
            else:
                logger.exception(f"{line or 'invocation'} failed", extra={"latency_ms": latency})
            raise
        if line == "request":
            status = int(response.get("statusCode", 200)) if isinstance(response, dict) else 200
            (logger.error if status >= 500 else logger.info)(line, extra={"status": status,
                                                                          "latency_ms": _ms_since(started)})
        elif line is not None:
            logger.info(line, extra={"latency_ms": _ms_since(started)})
        return response
    finally:
        logger.thread_safe_clear_keys()


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def instrument(handler: Callable[..., Any], *, name: str, source: str, trace: bool = True) -> Callable[..., Any]:
    """``handler`` (the entry point ``name``: a tool, ``authorizer``, ``sweep``, ``ag2_frames``,
    ...) with the service's observability. ``source`` says what its events are, and so where
    their correlation id is (:data:`CORRELATION_PATHS`: ``"http"``, ``"authorizer"``,
    ``"websocket"``, ``"schedule"``, ``"stream"``; any other raises ValueError). Outermost first:
    ``inject_lambda_context`` (Lambda's context keys), the tracer's
    ``capture_lambda_handler`` with the annotation ``tool`` (an HTTP route) or ``function``
    (when tracing is on and ``trace``), the invocation's metrics (one flush when it ends, one EMF
    record with the dimension ``function=name``, none when it counted nothing: :func:`_flush`),
    then :func:`log_request` (its keys and closing line).

    ``trace=False`` is for the functions that make no store call and load no settings (health,
    openapi, ui): API Gateway and ``Tracing: Active`` give their invocation its X-Ray segment
    anyway, and deciding whether tracing is on would import relaynet.config (pydantic) into their
    cold start.
    """
    if source not in CORRELATION_PATHS:
        raise ValueError(f"unknown event source {source!r} of {name}: one of {sorted(CORRELATION_PATHS)}")
    inner = log_request(handler, name=name, source=source)
    active = tracer() if trace else None
    annotation = "tool" if source == "http" else "function"

    @functools.wraps(handler)
    def wrapped(event: Any, context: Any) -> Any:
        if active is not None:  # X-Ray's console filters traces by annotation: annotation.tool = "network_claim"
            active.put_annotation(key=annotation, value=name)
        pending: list[tuple[str, float, dict[str, Any]]] = []
        token = _pending.set(pending)
        try:
            return inner(event, context)
        finally:
            _pending.reset(token)
            _flush(name, pending)
    traced_entry = active.capture_lambda_handler(wrapped, capture_response=False) if active is not None else wrapped
    # no correlation_id_path: log_request reads the id once and binds it per thread (the logger's
    # plain correlation id would be shared by the local stack's concurrent invocations)
    injected = logger.inject_lambda_context(traced_entry)

    @functools.wraps(handler)
    def entry(event: Any, context: Any) -> Any:
        # Lambda always passes a context; a direct call (a script, a test) may pass None, which
        # has no function name or request id to inject.
        return injected(event, context) if context is not None else traced_entry(event, context)

    entry.instrumented = (name, source)  # type: ignore[attr-defined]  # tests/api/test_entry_points.py
    return entry


@functools.lru_cache(maxsize=1)
def tracer() -> Any:
    """The powertools Tracer when tracing is on (Settings.tracing), else None.

    Raises RuntimeError naming the fix when tracing is on but ``aws_xray_sdk`` (the
    ``aws-lambda-powertools[tracer]`` extra) is not installed.
    """
    from relaynet.config import settings  # here: health, openapi and ui never load the settings

    if not settings().tracing:
        return None
    try:
        import aws_xray_sdk  # noqa: F401  # only here: without tracing it is never imported
    except ImportError:
        raise RuntimeError("tracing is on (in Lambda, POWERTOOLS_TRACE_DISABLED unset) but aws_xray_sdk is not "
                           "installed: install aws-lambda-powertools[tracer] or set "
                           "POWERTOOLS_TRACE_DISABLED=true") from None
    from aws_lambda_powertools import Tracer

    return Tracer()


def traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a store call: an X-Ray subsegment ``## store.<name>`` when tracing is on;
    otherwise a direct call (one cached lookup)."""
    name = f"## store.{fn.__name__}"

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        active = tracer()
        if active is None:
            return fn(*args, **kwargs)
        with active.provider.in_subsegment(name=name) as subsegment:
            subsegment.put_annotation(key="operation", value=fn.__name__)
            return fn(*args, **kwargs)

    return call
