"""Logging, metrics and tracing of every Lambda entry point (powertools), configured once here.

Owns the service's one powertools :data:`logger` (domain modules take ``Logger(child=True)``),
the one-line-per-request log of a tool call (:func:`log_request`), the EMF :data:`metrics` and
:func:`count`, and the optional tracer (:func:`traced`, :func:`tracer`). docs/architecture.md
("Observability") lists what is logged and measured and how to query it.

- **Logs**: JSON lines from the powertools Logger; the service name comes from
  ``POWERTOOLS_SERVICE_NAME`` and the level from ``POWERTOOLS_LOG_LEVEL`` (template.yaml sets
  both). A tool call adds ``tool``, ``network``, ``caller``, ``agent`` and ``correlation_id`` (API
  Gateway's request id, ``correlation_paths.API_GATEWAY_HTTP``) to every line it logs, and ends
  with one ``"request"`` line holding those keys plus ``status`` and ``latency_ms``.
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

from relaynet.config import settings

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
    if pending is None or not settings().metrics:
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


def correlation_id(event: dict[str, Any]) -> str | None:
    """API Gateway's request id of an HTTP API event (``correlation_paths.API_GATEWAY_HTTP``)."""
    return (event.get("requestContext") or {}).get("requestId")


def bind(**keys: Any) -> None:
    """Add ``keys`` to every line this request logs from here on (None values are left out)."""
    logger.thread_safe_append_keys(**{k: v for k, v in keys.items() if v is not None})


@lambda_handler_decorator
def log_request(handler: Callable[..., dict[str, Any]], event: dict[str, Any], context: Any, *,
                tool: str) -> dict[str, Any]:
    """The one ``"request"`` line of a tool call (middleware around a ToolApp handler).

    Binds ``tool``, ``correlation_id`` and ``function_request_id`` for the call (the
    authentication step binds ``network``, ``caller`` and ``agent``), runs it, then logs
    ``status`` (the HTTP status answered) and ``latency_ms`` at INFO (ERROR for a 5xx) and
    clears the keys. An exception escaping the handler is logged as status 500 and re-raised.
    """
    started = time.perf_counter()
    logger.thread_safe_clear_keys()
    bind(tool=tool, correlation_id=correlation_id(event),
         function_request_id=getattr(context, "aws_request_id", None))
    active = tracer()
    if active is not None:  # X-Ray's console filters traces by annotation: annotation.tool = "network_claim"
        active.put_annotation(key="tool", value=tool)
    status = 500
    try:
        response = handler(event, context)
        status = int(response.get("statusCode", 200)) if isinstance(response, dict) else 200
        return response
    finally:
        latency = round((time.perf_counter() - started) * 1000, 1)
        (logger.error if status >= 500 else logger.info)("request", extra={"status": status, "latency_ms": latency})
        logger.thread_safe_clear_keys()


def instrument(handler: Callable[..., Any], *, name: str, tool: bool = False) -> Callable[..., Any]:
    """``handler`` (the entry point ``name``: a tool, ``sweep``, ``notifier``) with the service's
    observability, outermost first: ``inject_lambda_context`` (for a ``tool``, the correlation id
    from the HTTP API path), the tracer's ``capture_lambda_handler`` (when tracing is on),
    the invocation's metrics (one flush when it ends; they carry the dimension ``function=name``),
    and for a tool :func:`log_request`."""
    inner = log_request(handler, tool=name) if tool else handler

    @functools.wraps(handler)
    def wrapped(event: dict[str, Any], context: Any) -> Any:
        pending: list[tuple[str, float, dict[str, Any]]] = []
        token = _pending.set(pending)
        try:
            return inner(event, context)
        finally:
            _pending.reset(token)
            _flush(name, pending)
    active = tracer()
    if active is not None:
        wrapped = active.capture_lambda_handler(wrapped, capture_response=False)
    injected = logger.inject_lambda_context(wrapped,
                                            correlation_id_path=correlation_paths.API_GATEWAY_HTTP if tool else None)

    @functools.wraps(handler)
    def entry(event: dict[str, Any], context: Any) -> Any:
        # Lambda always passes a context; a direct call (a script, a test) may pass None, which
        # has no function name or request id to inject.
        return injected(event, context) if context is not None else wrapped(event, context)

    return entry


@functools.lru_cache(maxsize=1)
def tracer() -> Any:
    """The powertools Tracer when tracing is on (Settings.tracing), else None.

    Raises RuntimeError naming the fix when tracing is on but ``aws_xray_sdk`` (the
    ``aws-lambda-powertools[tracer]`` extra) is not installed.
    """
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
