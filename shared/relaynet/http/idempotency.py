"""``Idempotency-Key`` for creating writes, with powertools' idempotency utility on the
project's own table (PROTOCOL.md 2). Records live at ``PK = idempotency#relaynet``,
``SK = <hash of tool, caller and key>`` and expire through the table's TTL attribute after 1 h.

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
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from relaynet.errors import Conflict, InvalidArgument
from relaynet.identity import Principal, request_key
from relaynet.store import table

TTL_SECONDS = 3600
MAX_KEY_LENGTH = 255


def _persistence() -> DynamoDBPersistenceLayer:
    """The persistence layer on the current table and client (both can change: tests, the bench)."""
    return _persistence_for(table.table_name(), table.client())


@functools.lru_cache(maxsize=4)
def _persistence_for(table_name: str, client: Any) -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(
        table_name=table_name, key_attr="PK", sort_key_attr="SK", static_pk_value="idempotency#relaynet",
        expiry_attr="ttl", boto3_client=client,
    )


_CONFIG = IdempotencyConfig(event_key_jmespath="key", payload_validation_jmespath="body",
                            expires_after_seconds=TTL_SECONDS, raise_on_no_idempotency_key=True)


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

    @idempotent_function(data_keyword_argument="request", persistence_store=_persistence(), config=_CONFIG)
    def run(request: dict[str, Any]) -> dict[str, Any]:
        with request_key(scoped):
            return fn()

    try:
        return run(request={"key": scoped, "body": body})
    except IdempotencyValidationError:
        raise Conflict("already_exists", "this Idempotency-Key was used with a different body") from None
    except IdempotencyAlreadyInProgressError:
        raise Conflict("in_progress", "the first request with this Idempotency-Key has not finished",
                       headers={"Retry-After": "1"}) from None
