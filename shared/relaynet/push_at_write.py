"""Push at the write in AWS (issue 26; docs/architecture.md "Push at the write"): a writing
function hands its committed Puts to the stream functions by an asynchronous Invoke, so a push
leaves when the write commits instead of when Lambda next polls the table's stream.

``RELAYNET_PUSH_AT_WRITE_TARGETS`` (template.yaml's Globals: ``NotifierFunction=<alias ARN>,...``)
names the stream functions and the alias each is invoked by. When it is set,
:func:`install` (called by relaynet.store.table at import, so at the init of every function that
uses the table) adds a listener to :func:`relaynet.store.table.on_commit`. For each commit it builds the INSERT records
the stream will carry (:func:`relaynet.stream_records.insert_record`), keeps those each target's
event source would hand it (the ``FilterCriteria`` of template.yaml, generated into
:mod:`relaynet.stream_targets`), and sends them, at most its ``BatchSize`` and
:data:`MAX_PAYLOAD_BYTES` per request, with ``Invoke(InvocationType="Event")``: Lambda queues
the event and answers 202, and the function runs at once in another environment.

The Invoke is made on the writer's thread before the write returns, so before the handler
answers: Lambda freezes an environment once it has answered, and a thread left to send later
would send at the next request, or never. It costs the write one request to the Lambda API per
target that wants a record (about one, for a mailbox entry or an AG2 envelope), at most its
``BatchSize`` records each: a broadcast to many mailboxes is several Invokes in a row.

Nothing is lost when this path fails: an Invoke that is refused, throttled or times out is
logged (and counted, ``PushAtWriteFailed``) and the write still succeeds; the table's stream
invokes the same functions with the same records, as it always has. A failure also stops this
process's Invokes for :data:`BREAK_SECONDS`, and one commit's Invokes stop after
:data:`COMMIT_BUDGET_SECONDS`, so a Lambda API that is down costs a write at most one timeout
(0.5 s to connect, 1 s to answer, one attempt) in that time. The notifiers' asynchronous
invocations are not retried late (template.yaml: ``EventInvokeConfig``, no retries, 60 s at most). Both paths run for every
record, so the functions deduplicate by their delivery markers (the AG2 notifier's per envelope,
recipient and connection; the webhook notifier's delivery lease per delivery id; the A2A
bridge's per history entry): one post per receiver whichever comes first. The targets are the
two notifiers. Not the A2A bridge: it reads the HttpApi's id, which refers to every routed
function, so the writers referring to its alias would make a circular dependency (its remote
calls take seconds anyway). The stream functions have no targets (template.yaml sets the
variable empty for them): their own writes reach the notifiers by the stream.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

TARGETS_ENV = "RELAYNET_PUSH_AT_WRITE_TARGETS"
#: The largest payload an asynchronous invocation takes (Lambda quotas: 256 KB); a record whose
#: batch would pass it goes in a request of its own, and one that alone passes it is left to the
#: stream.
MAX_PAYLOAD_BYTES = 256 * 1024
#: After a failed Invoke, this process sends none for this long (seconds): a Lambda API that is
#: down or throttling would otherwise cost every write a timeout, and the stream delivers anyway.
BREAK_SECONDS = 30.0
#: One commit's Invokes stop once they have taken this long (seconds); the rest go by the stream.
COMMIT_BUDGET_SECONDS = 1.0

#: The records' ``eventSourceARN``: the writer does not know the stream's ARN, and no function reads it.
STREAM_ARN = "push-at-write"

#: ``(function_name, payload) -> None``: one asynchronous Invoke; raises on any failure.
Invoker = Callable[[str, bytes], None]


def parse_targets(text: str) -> dict[str, str]:
    """``"Logical=name,..."`` as ``{logical_id: function name or alias ARN}``, in order; empty
    text is no targets. Raises ValueError naming an entry without ``=`` or a logical id that is
    not a stream function of template.yaml (relaynet.stream_targets)."""
    from relaynet.stream_targets import SOURCES

    out: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        logical, sep, name = entry.partition("=")
        if not sep or not logical or not name:
            raise ValueError(f"{entry!r} is not <logical id>=<function name or ARN>")
        if logical not in SOURCES:
            raise ValueError(f"{logical!r} is not a stream function of template.yaml "
                             f"(one of {', '.join(sorted(SOURCES))})")
        out[logical] = name
    return out


class InvokeAtWrite:
    """The on-commit listener (module docstring). ``targets``: logical id -> the function name or
    alias ARN to invoke; ``invoke``: one asynchronous Invoke (default: a boto3 Lambda client made
    on first use, :func:`lambda_invoker`). Calling it never raises: a failed Invoke is logged and
    left to the stream, and opens a breaker: for :data:`BREAK_SECONDS` this process sends none.
    One commit's Invokes stop after :data:`COMMIT_BUDGET_SECONDS`. ``sent``, ``failed`` and
    ``skipped`` count payloads, for tests and diagnostics."""

    def __init__(self, targets: dict[str, str], *, region: str, invoke: Invoker | None = None):
        from relaynet.stream_targets import SOURCES

        self.targets = [(logical, name, SOURCES[logical]) for logical, name in targets.items()]
        self.region = region
        self.invoke = invoke or lambda_invoker
        self.sent = 0
        self.failed = 0
        self.skipped = 0  # payloads left to the stream: the breaker was open or the commit's budget spent
        self._broken_until = 0.0

    def __call__(self, images: list[dict[str, Any]]) -> None:
        from relaynet.stream_records import offered

        deadline = time.monotonic() + COMMIT_BUDGET_SECONDS
        sources = [(target, target[2]["patterns"]) for target in self.targets]
        for (logical, name, source), records in offered(images, sources, region=self.region, stream_arn=STREAM_ARN):
            for payload in batches(records, source["batchSize"]):
                now = time.monotonic()
                if now < self._broken_until or now > deadline:
                    self.skipped += 1
                    continue
                self._send(logical, name, payload)

    def _send(self, logical: str, name: str, payload: bytes) -> None:
        try:
            self.invoke(name, payload)
        except Exception as exc:  # noqa: BLE001 - the stream delivers these records
            self.failed += 1
            self._broken_until = time.monotonic() + BREAK_SECONDS
            log.warning("push at the write: Invoke of %s failed (%s: %s); the stream delivers its records, "
                        "and this process's for %.0f s", logical, type(exc).__name__, exc, BREAK_SECONDS)
            from relaynet import observability

            observability.count("PushAtWriteFailed")
            return
        self.sent += 1


def batches(records: list[dict[str, Any]], batch_size: int) -> list[bytes]:
    """``{"Records": [...]}`` payloads (JSON bytes) of at most ``batch_size`` records and
    :data:`MAX_PAYLOAD_BYTES` each, in order; a record too large alone is dropped here (the
    stream hands it over)."""
    out: list[bytes] = []
    batch: list[bytes] = []
    size = 0
    for record in records:
        encoded = json.dumps(record, separators=(",", ":")).encode()
        if len(encoded) + 20 > MAX_PAYLOAD_BYTES:
            log.info("push at the write: a %d-byte record is left to the stream", len(encoded))
            continue
        if batch and (len(batch) >= batch_size or size + len(encoded) + 1 + 20 > MAX_PAYLOAD_BYTES):
            out.append(b'{"Records":[' + b",".join(batch) + b"]}")
            batch, size = [], 0
        batch.append(encoded)
        size += len(encoded) + 1
    if batch:
        out.append(b'{"Records":[' + b",".join(batch) + b"]}")
    return out


# --------------------------------------------------------------------------- the Lambda client

_client_lock = threading.Lock()
_client: Any = None


def lambda_client() -> Any:
    """This process's Lambda client, made once on first use (a write that wants a push), with
    short timeouts and one attempt: the writer's answer waits for it. ``AWS_ENDPOINT_URL_LAMBDA`` points it at
    the local stack's Invoke API (relaynet_local.lambda_api)."""
    global _client
    with _client_lock:
        if _client is None:
            import boto3
            from botocore.config import Config

            # its own Session: botocore's default one is not safe to share with a thread making
            # the DynamoDB client (relaynet.store.table.client). One attempt, short timeouts: the
            # stream is the retry.
            _client = boto3.session.Session().client("lambda", config=Config(
                connect_timeout=0.5, read_timeout=1, retries={"mode": "standard", "total_max_attempts": 1},
                user_agent="relaynet-push-at-write", max_pool_connections=10))
        return _client


def lambda_invoker(name: str, payload: bytes) -> None:
    """One asynchronous Invoke of ``name`` (a function name or alias ARN). Raises on anything but
    202 (botocore's errors, or RuntimeError naming the status)."""
    answer = lambda_client().invoke(FunctionName=name, InvocationType="Event", Payload=payload)
    if answer.get("StatusCode") != 202:
        raise RuntimeError(f"Invoke answered {answer.get('StatusCode')}, not 202")


def close_clients() -> None:
    """Close the Lambda client's pooled connections (relaynet.snapstart after a restore); it
    reopens on first use."""
    with _client_lock:
        if _client is not None:
            _client.close()


def reset_client() -> None:
    """Forget the Lambda client, so the next push makes one from the environment as it is now (the
    local stack, after pointing ``AWS_ENDPOINT_URL_LAMBDA`` at its Invoke API)."""
    global _client
    with _client_lock:
        if _client is not None:
            _client.close()
        _client = None


# --------------------------------------------------------------------------- installing

_installed: InvokeAtWrite | None = None
_remove: Callable[[], None] | None = None


def install(environ: Any = None, invoke: Invoker | None = None) -> InvokeAtWrite | None:
    """Listen to this process's commits when ``RELAYNET_PUSH_AT_WRITE_TARGETS`` names targets and
    ``RELAYNET_PUSH_AT_WRITE`` is not false (the settings of ``environ``, default the process's:
    relaynet.config); replaces an earlier installation. Returns the listener, or None when there
    is nothing to do. Raises relaynet.config.SettingsError (a ValueError naming the variable) for
    a bad value. relaynet.store.table calls it when it is first imported, so every function that
    uses the table listens from its init, and no other (health, the UI) loads anything for it."""
    global _installed, _remove
    env = os.environ if environ is None else environ
    uninstall()
    if not env.get(TARGETS_ENV, "").strip():
        return None  # the common case (a client, the local stack's default): no settings read
    from relaynet.config import Settings, settings

    current = settings() if environ is None else Settings.from_environ(environ)
    if not current.push_at_write:
        return None
    from relaynet.store import table

    listener = InvokeAtWrite(parse_targets(current.push_targets), invoke=invoke,
                             region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1")
    _installed, _remove = listener, table.on_commit(listener)
    return listener


def uninstall(listener: InvokeAtWrite | None = None) -> None:
    """Stop listening (no-op when not installed); given ``listener``, only if it is the one
    installed (a local stack removes its own, never another's)."""
    global _installed, _remove
    if listener is not None and listener is not _installed:
        return
    if _remove is not None:
        _remove()
    _installed, _remove = None, None


def installed() -> InvokeAtWrite | None:
    """The listener :func:`install` added, or None."""
    return _installed
