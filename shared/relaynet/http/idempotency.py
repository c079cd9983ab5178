"""``Idempotency-Key`` for creating writes, with powertools' idempotency utility on the
project's own table (PROTOCOL.md 2). Records live at ``PK = idempotency#relaynet``,
``SK = <hash of tool, caller and key>`` (laid out by relaynet.store.idempotency) and expire
through the table's TTL attribute after 1 h.

What powertools gives: the same key and body within the hour answers the stored first response
and runs nothing; the same key with another body is 409 ``already_exists``; a second request
while the first is still running is 409 ``in_progress`` with ``Retry-After``. A request that
*failed* deletes its record, so its retry runs again; and a Lambda killed after its writes
committed but before the record was completed leaves an in-progress record that expires with
the invocation's deadline, after which a retry also runs again. For those two cases the domain
call runs with the scoped key available as :func:`relaynet.identity.current_request_key`, and a
write that must not happen twice (``network_ask`` / ``network_reply``: a durable send record,
relaynet.messaging) keys itself with it and resumes instead of writing again.

Body comparison: ``body`` is the request model dumped to JSON (defaults included), so two bodies
that validate to the same arguments are the same body.

Requests (issue 16): powertools writes its in-progress record (PutItem) before the call runs and
completes it (UpdateItem) after, two requests of their own. Its persistence layer cannot join
the domain's TransactWriteItems (``save_inprogress`` writes at once and must raise before the call
runs; the call's writes are not known to it), so :class:`RidingPersistence` keeps powertools'
record, conditions and flow and only defers the in-progress PutItem: it rides as one more item of
the call's first transaction (relaynet.store.idempotency.ride), committing atomically with the call's
first change. A keyed write costs one request more than without the key (the completing
UpdateItem) instead of two. What a client sees is the same: a retry after the first completed
gets the stored response; a retry while the first is running past its first write is 409
``in_progress``; a retry racing the first *before* its first write runs the domain too, but only
one of the two commits (the other's transaction is cancelled by the record's condition, and that
request answers from the record as a retry would).

Deferring the record also defers powertools' look-up of an earlier one to the first write. A
keyed call the domain refuses *before* writing (a ``handoff`` retried after its turn passed:
``not_your_turn``) therefore looks its key up then (:func:`earlier_answer`, one GetItem on that
refusal path only), and answers the first response, ``in_progress`` or ``already_exists`` as a
retry must (issue 24; docs/architecture.md).
"""

from __future__ import annotations

from typing import Any, Callable

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyItemNotFoundError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS

from relaynet import clock
from relaynet.errors import Answered, Conflict, InvalidArgument, RelaynetError
from relaynet.identity import Principal, request_key
from relaynet.store import idempotency as store

TTL_SECONDS = 3600
MAX_KEY_LENGTH = 255


class _Deferred:
    """Stands in for the DynamoDB client while powertools builds its in-progress PutItem: keeps
    the request instead of sending it."""

    def __init__(self) -> None:
        self.put: dict[str, Any] | None = None

    def put_item(self, **kwargs: Any) -> None:
        self.put = kwargs


class RidingPersistence(DynamoDBPersistenceLayer):
    """powertools' DynamoDB persistence layer whose in-progress record rides with the call's
    first write (see the module docstring). One instance per keyed call (it holds that call's
    record); ``defer=False`` behaves exactly as powertools' own layer."""

    def __init__(self, defer: bool = True):
        super().__init__(**store.persistence_args())
        self.defer = defer
        self.pending: dict[str, Any] | None = None  # the Put action of the in-progress record
        self.rider: Any = None  # relaynet.store.table's rider, once the call runs

    def _put_record(self, data_record: Any) -> None:
        if not self.defer:
            return super()._put_record(data_record)
        real, shim = self.client, _Deferred()
        self.client = shim
        try:
            super()._put_record(data_record)  # builds the item and its condition, sends nothing
        finally:
            self.client = real
        self.pending = {"Put": shim.put}

    def _written(self) -> bool:
        return not self.defer or (self.rider is not None and self.rider.written)

    def _update_record(self, data_record: Any) -> None:
        if not self._written():  # the call wrote nothing: the record goes out now, then completes
            with store.ride(self.pending) as rider:
                self.rider = rider
                store.flush_rider()
        super()._update_record(data_record)

    def _delete_record(self, data_record: Any) -> None:
        if self._written():  # a record never written is not deleted (it may be another request's)
            super()._delete_record(data_record)


_CONFIG = IdempotencyConfig(event_key_jmespath="key", payload_validation_jmespath="body",
                            expires_after_seconds=TTL_SECONDS, raise_on_no_idempotency_key=True)


def earlier_answer(persistence: DynamoDBPersistenceLayer, data: dict[str, Any]) -> dict[str, Any] | None:
    """The stored first response for ``data``'s key (one consistent GetItem), or None when there
    is none to answer with (no record, an expired one, or an in-progress one whose invocation's
    deadline passed: that first request died, so this one's own answer stands).

    For a keyed call the domain refused *before* its first write: with the in-progress record
    deferred to ride with that write, the key's record was never looked at, and a retry of a call
    that succeeded would otherwise meet the state the first call left (a ``handoff`` retried after
    the turn passed: 409 ``not_your_turn``). PROTOCOL.md 2: the retry gets the first response.

    Raises IdempotencyValidationError (the key was used with another body) and
    IdempotencyAlreadyInProgressError (the first request is still running).
    """
    try:
        record = persistence.get_record(data)
    except IdempotencyItemNotFoundError:
        return None
    if record.status == STATUS_CONSTANTS["COMPLETED"]:
        return record.response_json_as_dict()
    if record.status == STATUS_CONSTANTS["INPROGRESS"]:
        deadline = record.in_progress_expiry_timestamp
        if deadline is None or deadline >= clock.now_ms():
            raise IdempotencyAlreadyInProgressError(f"in progress: {record.idempotency_key}")
    return None


#: The key of a stored response that is an error answer (:func:`kept`).
KEPT_ERROR = "__relaynet_error__"


def kept(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``fn()``; a ``committed`` RelaynetError (raised after the call's writes committed) is
    returned as ``{KEPT_ERROR: {status, code, message, details, headers}}`` instead, so powertools
    stores it as the first response and a retry with the key answers it again, running nothing
    (PROTOCOL.md 2). Any other error propagates, and powertools deletes the record: the retry runs."""
    try:
        return fn()
    except RelaynetError as exc:
        if not exc.committed:
            raise
        return {KEPT_ERROR: {"status": exc.status, "code": exc.code, "message": exc.message,
                             "details": exc.details, "headers": exc.headers}}


def once(tool: str, principal: Principal, key: str, body: dict[str, Any], fn: Callable[[], dict[str, Any]],
         lambda_context: Any = None) -> dict[str, Any]:
    """Run ``fn`` once per (tool, caller, key); see :meth:`relaynet.http.api.ToolApp.once`.

    Raises InvalidArgument (key empty or over 255 chars), Conflict ``already_exists`` or
    ``in_progress``.
    """
    if not key.strip() or len(key) > MAX_KEY_LENGTH:
        raise InvalidArgument.field("Idempotency-Key", f"must be 1 to {MAX_KEY_LENGTH} characters")
    who = principal.instance_id or principal.rep
    if lambda_context is not None and hasattr(lambda_context, "get_remaining_time_in_millis"):
        _CONFIG.register_lambda_context(lambda_context)

    scoped = f"{tool}#{who}#{key}"

    def attempt(defer: bool) -> dict[str, Any]:
        persistence = RidingPersistence(defer=defer)

        @idempotent_function(data_keyword_argument="request", persistence_store=persistence, config=_CONFIG)
        def run(request: dict[str, Any]) -> dict[str, Any]:
            with request_key(scoped):
                if persistence.pending is None:
                    return kept(fn)
                with store.ride(persistence.pending) as rider:
                    persistence.rider = rider
                    return kept(fn)

        data = {"key": scoped, "body": body}
        try:
            return run(request=data)
        except RelaynetError:
            if not defer or persistence._written():
                raise  # powertools looked the key up (or deleted the record this call wrote)
            answer = earlier_answer(persistence, data)
            if answer is None:
                raise
            return answer

    try:
        try:
            result = attempt(defer=True)
        except store.RiderRefused:  # another request holds the key: answer as powertools does for a retry
            result = attempt(defer=False)
        error = result.get(KEPT_ERROR) if isinstance(result, dict) else None
        if error is not None:
            raise Answered(**error)
        return result
    except IdempotencyValidationError:
        raise Conflict("already_exists", "this Idempotency-Key was used with a different body") from None
    except IdempotencyAlreadyInProgressError:
        raise Conflict("in_progress", "the first request with this Idempotency-Key has not finished",
                       headers={"Retry-After": "1"}) from None
