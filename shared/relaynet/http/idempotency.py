"""``Idempotency-Key`` for creating writes, with powertools' idempotency utility on the
project's own table (PROTOCOL.md 2). Records live at ``PK = idempotency#relaynet``,
``SK = <hash of tool, caller and key>`` and expire through the table's TTL attribute after 1 h."""

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
from relaynet.identity import Principal
from relaynet.store import table

TTL_SECONDS = 3600
MAX_KEY_LENGTH = 255


@functools.lru_cache(maxsize=1)
def _persistence() -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(
        table_name=table.table_name(), key_attr="PK", sort_key_attr="SK", static_pk_value="idempotency#relaynet",
        expiry_attr="ttl", boto3_client=table.client(),
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

    @idempotent_function(data_keyword_argument="request", persistence_store=_persistence(), config=_CONFIG)
    def run(request: dict[str, Any]) -> dict[str, Any]:
        return fn()

    try:
        return run(request={"key": f"{tool}#{who}#{key}", "body": body})
    except IdempotencyValidationError:
        raise Conflict("already_exists", "this Idempotency-Key was used with a different body") from None
    except IdempotencyAlreadyInProgressError:
        raise Conflict("in_progress", "the first request with this Idempotency-Key has not finished",
                       headers={"Retry-After": "1"}) from None
