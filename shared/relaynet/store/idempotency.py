"""Where powertools' idempotency records live (PROTOCOL.md 2 ``Idempotency-Key``;
relaynet.http.idempotency runs the utility): on the project's own table, at
``PK = idempotency#relaynet``, ``SK = <hash of tool, caller and key>`` (powertools hashes it),
expiring through the table's TTL attribute ``ttl``. The in-progress record rides with the call's
first transaction (:func:`ride`, relaynet.store.table.ride).
"""

from __future__ import annotations

from typing import Any

from relaynet.store import table as t

#: The partition of every idempotency record (benchmarks and tests tell them apart by it).
RECORDS_PK = "idempotency#relaynet"

ride = t.ride
flush_rider = t.flush_rider
RiderRefused = t.RiderRefused


def persistence_args() -> dict[str, Any]:
    """The keyword arguments of powertools' ``DynamoDBPersistenceLayer`` for this table: its name,
    the record layout (key attributes ``PK`` / ``SK``, the static partition :data:`RECORDS_PK`,
    expiry ``ttl``) and the container's client (relaynet.store.table.client, so the idempotency
    layer's requests are checked against the entry point's declared actions too)."""
    return {"table_name": t.table_name(), "key_attr": "PK", "sort_key_attr": "SK", "static_pk_value": RECORDS_PK,
            "expiry_attr": "ttl", "boto3_client": t.client()}
