"""The DynamoDB client, the item codec and the table primitives every store module uses.

One low-level client per container (created on first use, so importing costs nothing), the
table name from ``RELAYNET_TABLE``, and the endpoint from boto3's own ``AWS_ENDPOINT_URL_DYNAMODB``
(so the local stack needs no special code). Items cross this boundary as plain Python dicts:
numbers come back as ``int`` (or ``float``), string sets as ``set``.

Least privilege, checked here: each Lambda entry point declares the DynamoDB actions it may use
(``DYNAMODB_ACTIONS`` in its ``functions/<name>.py``, the same list its policy in template.yaml
names) and runs inside :func:`declared`. Every request made through :func:`client` -- the
primitives below and powertools' idempotency layer alike -- is checked against the declaration
of the entry point currently running, and one that needs an undeclared action raises
:class:`UndeclaredAction` before anything is sent, so an under-declared handler fails its tests
instead of failing in AWS with AccessDenied. Outside any declaration (the admin CLI, domain
tests) nothing is restricted.

Observability: each primitive is an X-Ray subsegment ``## store.<name>`` when tracing is on
(relaynet.observability.traced; off, nothing of the tracer is imported), and a cancelled
transaction is counted (EMF ``TransactionCancelled``, and ``TransactionConflict`` when another
transaction was in flight on its items).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Iterable, Iterator

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import ClientError

from relaynet import observability
from relaynet.config import settings

_ser = TypeSerializer()
_de = TypeDeserializer()

MAX_TRANSACT_ITEMS = 100  # DynamoDB's limit for one TransactWriteItems


# --------------------------------------------------------------------------------------------
# Declared actions (least privilege)

#: The IAM actions (``dynamodb:<name>``) a declaration may name: the item-level actions on the
#: table and its indexes. A transaction is authorised per item (``Put`` -> PutItem, ``Update`` ->
#: UpdateItem, ``Delete`` -> DeleteItem, ``ConditionCheck`` -> ConditionCheckItem; a
#: TransactGetItems ``Get`` -> GetItem), so those are what a transaction needs.
ITEM_ACTIONS = frozenset({
    "GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem",
    "BatchWriteItem", "ConditionCheckItem",
})
#: What powertools' idempotency utility does on the table (``Idempotency-Key``, PROTOCOL.md 2):
#: put the in-progress record, read it back on a conflict, complete it, delete it on a failure.
IDEMPOTENCY_ACTIONS = frozenset({"PutItem", "GetItem", "UpdateItem", "DeleteItem"})

_TRANSACT_WRITE = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                   "ConditionCheck": "ConditionCheckItem"}


class UndeclaredAction(RuntimeError):
    """A request needs a DynamoDB action (or a table) the running entry point did not declare.

    A bug in the declaration, never the caller's fault: API handlers answer it as 500
    ``internal`` and log this message, which names the entry point, the action and the fix.
    """


@dataclass(frozen=True)
class Declaration:
    """The DynamoDB actions ``owner`` (a tool name, ``authorizer``, ``sweep``) may use."""

    owner: str
    actions: frozenset[str]


_declaration: contextvars.ContextVar[Declaration | None] = contextvars.ContextVar(
    "relaynet_dynamodb_declaration", default=None)


def check_actions(actions: Iterable[str]) -> frozenset[str]:
    """``actions`` as a frozenset; ValueError for a name outside :data:`ITEM_ACTIONS`."""
    out = frozenset(actions)
    unknown = sorted(out - ITEM_ACTIONS)
    if unknown:
        raise ValueError(f"not DynamoDB item actions: {unknown} (known: {sorted(ITEM_ACTIONS)})")
    return out


@contextlib.contextmanager
def declared(actions: Iterable[str], owner: str) -> Iterator[Declaration]:
    """Run the body with only ``actions`` allowed on the table (see the module docstring)."""
    decl = Declaration(owner, check_actions(actions))
    token = _declaration.set(decl)
    try:
        yield decl
    finally:
        _declaration.reset(token)


def declares(actions: Iterable[str], owner: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a Lambda entry point that is not a ToolApp (the authorizer, the sweep):
    the call runs inside :func:`declared`; the wrapper carries ``dynamodb_actions``."""
    allowed = check_actions(actions)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def entry(*args: Any, **kwargs: Any) -> Any:
            with declared(allowed, owner):
                return fn(*args, **kwargs)

        entry.dynamodb_actions = allowed  # type: ignore[attr-defined]
        return entry

    return wrap


def current_declaration() -> Declaration | None:
    """The declaration in force here, or None (unrestricted)."""
    return _declaration.get()


def required_actions(operation: str, params: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The IAM actions and the table names a DynamoDB request ``operation(**params)`` needs."""
    if operation == "TransactWriteItems":
        actions, tables = set(), set()
        for item in params.get("TransactItems") or []:
            for kind, body in item.items():
                actions.add(_TRANSACT_WRITE.get(kind, kind))
                tables.add(body.get("TableName"))
        return actions, tables
    if operation == "TransactGetItems":
        return {"GetItem"}, {item["Get"].get("TableName") for item in params.get("TransactItems") or []}
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return {operation}, set(params.get("RequestItems") or {})
    return {operation}, {params.get("TableName")}


def _enforce(params: dict[str, Any], model: Any, **_: Any) -> None:
    """botocore ``before-parameter-build`` hook on :func:`client`: refuse what is undeclared."""
    decl = _declaration.get()
    if decl is None:
        return
    actions, tables = required_actions(model.name, params)
    missing = sorted(actions - decl.actions)
    if missing:
        raise UndeclaredAction(
            f"{decl.owner} called DynamoDB {model.name}, which needs "
            f"{', '.join('dynamodb:' + a for a in missing)}, but declares only "
            f"{sorted(decl.actions)}: add it to DYNAMODB_ACTIONS in functions/{decl.owner}.py "
            f"and to that function's policy in template.yaml (or do not make this call)")
    others = sorted(str(t) for t in tables - {table_name()})
    if others:
        raise UndeclaredAction(f"{decl.owner} called DynamoDB {model.name} on {others}; "
                               f"its policy covers only the table {table_name()!r}")


def client_config(**overrides: Any) -> Config:
    """The botocore configuration of every DynamoDB (and DynamoDB Streams) client Relaynet makes.

    - ``max_pool_connections=50``: a Lambda container runs one request at a time, but the local
      stack runs every function in one process, so the pool holds enough connections for a
      team's concurrent calls instead of botocore's 10, past which connections are dropped and
      reopened per request.
    - ``user_agent``: a fixed ``relaynet/<version> botocore/<version>``. Without it botocore
      rebuilds its structured User-Agent twice per request, sanitising each of ~36 components
      character by character: about a fifth of a GetItem's client CPU (benchmarks/probe_botocore.py).
    - ``parameter_validation=False``: every request is built by the store from values the domain
      has validated already; DynamoDB validates again (a ValidationException, never a
      silent write), so botocore's client-side walk of the input shapes is spent twice
      (issue 31: 0.1-0.3 ms per transaction).

    ``overrides`` replace any of these or add others (``retries``, timeouts).
    """
    import botocore

    from relaynet.version import __version__

    options: dict[str, Any] = {"max_pool_connections": 50, "parameter_validation": False,
                               "user_agent": f"relaynet/{__version__} botocore/{botocore.__version__}"}
    options.update(overrides)
    return Config(**options)


_client: Any = None
_client_lock = threading.Lock()


def client():
    """The process-wide DynamoDB client (one per Lambda container; :func:`client_config`).

    Every request it makes is checked against the running entry point's declaration. Made once,
    under a lock: the local stack serves concurrent requests in one process, and a cold burst of
    them would otherwise build one client each (about 20 ms of CPU apiece, issue 31) from boto3's
    default session, which botocore does not promise is safe to share between threads that are
    creating clients.
    """
    global _client
    with _client_lock:
        if _client is None:
            _client = boto3.client("dynamodb", config=client_config(
                retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=2, read_timeout=10))
            _client.meta.events.register("before-parameter-build.dynamodb", _enforce,
                                         unique_id="relaynet-declared-actions")
        return _client


def close_connections() -> None:
    """Close the DynamoDB client's connection pool if the client was made (after a SnapStart
    restore, relaynet.snapstart); it reconnects on its next request. Makes no client."""
    made = _client
    if made is not None:
        made.close()


def table_name() -> str:
    """The table every item lives in (``RELAYNET_TABLE``)."""
    return settings().table_name


def reset() -> None:
    """Forget the cached client and settings (tests that switch endpoints or tables)."""
    global _client
    with _client_lock:
        _client = None
    settings.cache_clear()


def _norm(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def _py(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _py(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_py(v) for v in value]
    if isinstance(value, set):
        return {_py(v) for v in value}
    return value


def encode(item: dict[str, Any]) -> dict[str, Any]:
    """A Python dict to DynamoDB's typed JSON; ``None`` values are dropped."""
    return {k: _ser.serialize(_norm(v)) for k, v in item.items() if v is not None}


def encode_value(value: Any) -> dict[str, Any]:
    """One Python value to DynamoDB's typed JSON (for expression attribute values)."""
    return _ser.serialize(_norm(value))


def decode(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """DynamoDB's typed JSON to a Python dict (numbers as int/float)."""
    if item is None:
        return None
    return {k: _py(_de.deserialize(v)) for k, v in item.items()}


def values(**kwargs: Any) -> dict[str, Any]:
    """``values(now=1)`` -> ``{":now": {"N": "1"}}`` for ExpressionAttributeValues."""
    return {f":{k}": encode_value(v) for k, v in kwargs.items()}


def key(pk: str, sk: str) -> dict[str, Any]:
    """The typed primary key ``{"PK": .., "SK": ..}``."""
    return {"PK": {"S": pk}, "SK": {"S": sk}}


@observability.traced
def get(pk: str, sk: str, consistent: bool = True) -> dict[str, Any] | None:
    """One item by primary key, or None."""
    resp = client().get_item(TableName=table_name(), Key=key(pk, sk), ConsistentRead=consistent)
    return decode(resp.get("Item"))


@observability.traced
def batch_get(keys: Iterable[tuple[str, str]], consistent: bool = True) -> dict[tuple[str, str], dict[str, Any]]:
    """Up to 100 items by primary key in one request (unprocessed keys are retried).

    Returns ``{(pk, sk): item}`` for the items that exist.
    """
    wanted = list(dict.fromkeys(keys))
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for start in range(0, len(wanted), 100):
        req = {table_name(): {"Keys": [key(pk, sk) for pk, sk in wanted[start:start + 100]], "ConsistentRead": consistent}}
        while req:
            resp = client().batch_get_item(RequestItems=req)
            for raw in resp.get("Responses", {}).get(table_name(), []):
                item = decode(raw)
                out[(item["PK"], item["SK"])] = item
            req = resp.get("UnprocessedKeys") or None
    return out


@observability.traced
def batch_delete(keys: Iterable[tuple[str, str]]) -> int:
    """Delete items by primary key, 25 per BatchWriteItem (unprocessed keys are retried);
    unconditional, so an absent item is no error. Returns how many keys were sent."""
    wanted = list(dict.fromkeys(keys))
    flush_rider()
    for start in range(0, len(wanted), 25):
        req: dict[str, Any] | None = {table_name(): [{"DeleteRequest": {"Key": key(pk, sk)}}
                                                      for pk, sk in wanted[start:start + 25]]}
        while req:
            resp = client().batch_write_item(RequestItems=req)
            req = resp.get("UnprocessedItems") or None
    return len(wanted)


@observability.traced
def query(
    pk: str,
    *,
    sk_prefix: str | None = None,
    sk_gt: str | None = None,
    sk_lt: str | None = None,
    sk_between: tuple[str, str] | None = None,
    index: str | None = None,
    forward: bool = True,
    limit: int | None = None,
    consistent: bool = True,
    filter_expr: str | None = None,
    filter_values: dict[str, Any] | None = None,
    filter_names: dict[str, str] | None = None,
    one_page: bool = False,
) -> Any:
    """Items of one partition, in sort-key order, following pages until ``limit`` items.

    ``index`` names a GSI (``GSI1``/``GSI2``/``GSI3``: keys ``GSIxPK``/``GSIxSK``; never
    consistent). With ``one_page``, exactly one request is made (``limit`` is its ``Limit``:
    items *evaluated*, before the filter) and the answer is ``(items, more)``, ``more`` being
    whether DynamoDB stopped before the end of the partition.
    """
    if one_page:
        kwargs = _query_kwargs(pk, sk_prefix=sk_prefix, sk_gt=sk_gt, sk_lt=sk_lt, sk_between=sk_between,
                               index=index, forward=forward, consistent=consistent, filter_expr=filter_expr,
                               filter_values=filter_values, filter_names=filter_names)
        if limit is not None:
            kwargs["Limit"] = max(limit, 1)
        resp = client().query(**kwargs)
        return [decode(raw) for raw in resp.get("Items", [])], bool(resp.get("LastEvaluatedKey"))
    items: list[dict[str, Any]] = []
    for item in iterate(pk, sk_prefix=sk_prefix, sk_gt=sk_gt, sk_lt=sk_lt, sk_between=sk_between, index=index,
                        forward=forward, page_size=limit, consistent=consistent, filter_expr=filter_expr,
                        filter_values=filter_values, filter_names=filter_names):
        items.append(item)
        if limit is not None and len(items) >= limit:
            break
    return items


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def in_parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, the first in this thread and the others on shared threads (each
    keeps the caller's context: its declared actions), and return their results in order; the
    first exception raised is raised. A Lambda container serves one request at a time, so it
    uses at most a few; the local stack runs every function in one process, so the pool is as
    large as the requests it serves at once (32)."""
    global _pool
    if len(calls) <= 1:
        return [call() for call in calls]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="relaynet-store")
    futures = [_pool.submit(contextvars.copy_context().run, call) for call in calls[1:]]
    first = calls[0]()
    return [first, *(f.result() for f in futures)]


def query_prefixes(pk: str, prefixes: list[str]) -> list[dict[str, Any]]:
    """The strongly consistent Queries of one partition for each sort-key prefix, sent at once
    (:func:`in_parallel`), their items concatenated in the order of ``prefixes``."""
    results = in_parallel(*(functools.partial(query, pk, sk_prefix=p) for p in prefixes))
    return [item for items in results for item in items]


def iterate(
    pk: str,
    *,
    sk_prefix: str | None = None,
    sk_gt: str | None = None,
    sk_lt: str | None = None,
    sk_between: tuple[str, str] | None = None,
    index: str | None = None,
    forward: bool = True,
    page_size: int | None = None,
    consistent: bool = True,
    filter_expr: str | None = None,
    filter_values: dict[str, Any] | None = None,
    filter_names: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Items of one partition in sort-key order, lazily: the next page (``page_size`` items per
    Query, DynamoDB's 1 MB page when None) is requested only when the caller iterates past the
    previous one. Arguments as :func:`query`; ``sk_lt`` keeps sort keys below it (a list cursor
    walking newest first)."""
    kwargs = _query_kwargs(pk, sk_prefix=sk_prefix, sk_gt=sk_gt, sk_lt=sk_lt, sk_between=sk_between,
                           index=index, forward=forward, consistent=consistent, filter_expr=filter_expr,
                           filter_values=filter_values, filter_names=filter_names)
    yield from _pages(kwargs, page_size)


#: Indexes whose key attributes are not ``<index>PK`` / ``<index>SK`` (template.yaml): GSI4 orders
#: the task listing partition (GSI2PK) by the tasks' own ``updatedAt``, so every task is in it
#: without a key attribute of its own.
INDEX_KEYS = {"GSI4": ("GSI2PK", "updatedAt")}


def _query_kwargs(pk: str, *, sk_prefix: str | None, sk_gt: str | None, sk_lt: str | None,
                  sk_between: tuple[str, str] | None, index: str | None, forward: bool, consistent: bool,
                  filter_expr: str | None, filter_values: dict[str, Any] | None,
                  filter_names: dict[str, str] | None) -> dict[str, Any]:
    """The Query request of :func:`query` and :func:`iterate` (without ``Limit``)."""
    pk_attr, sk_attr = ("PK", "SK") if index is None else INDEX_KEYS.get(index, (f"{index}PK", f"{index}SK"))
    cond = "#pk = :pk"
    names = {"#pk": pk_attr}
    vals: dict[str, Any] = {":pk": {"S": pk}}
    if sk_prefix is not None:
        cond += " AND begins_with(#sk, :skp)"
        names["#sk"] = sk_attr
        vals[":skp"] = {"S": sk_prefix}
    elif sk_gt is not None:
        cond += " AND #sk > :skg"
        names["#sk"] = sk_attr
        vals[":skg"] = {"S": sk_gt}
    elif sk_lt is not None:
        cond += " AND #sk < :skl"
        names["#sk"] = sk_attr
        vals[":skl"] = {"S": sk_lt}
    elif sk_between is not None:
        cond += " AND #sk BETWEEN :ska AND :skb"
        names["#sk"] = sk_attr
        vals[":ska"] = {"S": sk_between[0]}
        vals[":skb"] = {"S": sk_between[1]}
    kwargs: dict[str, Any] = {
        "TableName": table_name(),
        "KeyConditionExpression": cond,
        "ScanIndexForward": forward,
    }
    if index is not None:
        kwargs["IndexName"] = index
    else:
        kwargs["ConsistentRead"] = consistent
    if filter_expr:
        kwargs["FilterExpression"] = filter_expr
        vals.update(filter_values or {})
        names.update(filter_names or {})
    kwargs["ExpressionAttributeNames"] = names
    kwargs["ExpressionAttributeValues"] = vals
    return kwargs


@observability.traced
def count(pk: str, *, sk_prefix: str | None = None, limit: int, consistent: bool = False) -> int:
    """How many items of one partition (whose sort key starts with ``sk_prefix``) exist, counting
    at most ``limit`` (a Query with ``Select=COUNT`` that stops there: it reads at most ``limit``
    items, so its cost is bounded by the limit)."""
    cond, names = "#pk = :pk", {"#pk": "PK"}
    vals: dict[str, Any] = {":pk": {"S": pk}}
    if sk_prefix is not None:
        cond += " AND begins_with(#sk, :skp)"
        names["#sk"] = "SK"
        vals[":skp"] = {"S": sk_prefix}
    kwargs: dict[str, Any] = {"TableName": table_name(), "KeyConditionExpression": cond, "Select": "COUNT",
                              "ExpressionAttributeNames": names, "ExpressionAttributeValues": vals,
                              "ConsistentRead": consistent}
    seen = 0
    while seen < limit:
        kwargs["Limit"] = limit - seen
        resp = client().query(**kwargs)
        seen += int(resp.get("Count", 0))
        if not resp.get("LastEvaluatedKey"):
            break
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
    return seen


def _pages(kwargs: dict[str, Any], limit: int | None) -> Iterator[dict[str, Any]]:
    while True:
        if limit is not None:
            kwargs["Limit"] = max(limit, 1)
        resp = client().query(**kwargs)
        for raw in resp.get("Items", []):
            yield decode(raw)
        lek = resp.get("LastEvaluatedKey")
        if not lek:
            return
        kwargs["ExclusiveStartKey"] = lek


@observability.traced
def put(item: dict[str, Any], condition: str | None = None, /, **cond_values: Any) -> bool:
    """Put an item; with ``condition``, a conditional write. Returns False if the condition failed."""
    flush_rider()
    kwargs: dict[str, Any] = {"TableName": table_name(), "Item": encode(item)}
    if condition:
        kwargs["ConditionExpression"] = condition
        if cond_values:
            kwargs["ExpressionAttributeValues"] = values(**cond_values)
    try:
        client().put_item(**kwargs)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    if _on_commit:
        _committed([kwargs["Item"]])
    return True


@observability.traced
def update(
    pk: str,
    sk: str,
    expr: str,
    /,
    *,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    return_new: bool = False,
    **vals: Any,
) -> dict[str, Any] | None | bool:
    """An UpdateItem. Returns the new item (``return_new``), True, or False if the condition failed."""
    flush_rider()
    kwargs: dict[str, Any] = {"TableName": table_name(), "Key": key(pk, sk), "UpdateExpression": expr}
    if condition:
        kwargs["ConditionExpression"] = condition
    if names:
        kwargs["ExpressionAttributeNames"] = names
    if vals:
        kwargs["ExpressionAttributeValues"] = values(**vals)
    if return_new:
        kwargs["ReturnValues"] = "ALL_NEW"
    try:
        resp = client().update_item(**kwargs)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return decode(resp.get("Attributes")) if return_new else True


class TransactionCancelled(Exception):
    """A TransactWriteItems was cancelled; ``reasons`` holds one code per item (``None`` = fine)."""

    def __init__(self, reasons: list[str | None]):
        super().__init__(f"transaction cancelled: {reasons}")
        self.reasons = reasons


@observability.traced
def delete_if(pk: str, sk: str, condition: str, /, names: dict[str, str] | None = None, **vals: Any) -> bool:
    """A conditional DeleteItem. Returns False when the item is absent or the condition failed."""
    flush_rider()
    kwargs: dict[str, Any] = {"TableName": table_name(), "Key": key(pk, sk),
                              "ConditionExpression": f"attribute_exists(PK) AND ({condition})"}
    if names:
        kwargs["ExpressionAttributeNames"] = names
    if vals:
        kwargs["ExpressionAttributeValues"] = values(**vals)
    try:
        client().delete_item(**kwargs)
        return True
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise


def tx_put(item: dict[str, Any], condition: str | None = None, /, names: dict[str, str] | None = None, **vals: Any) -> dict[str, Any]:
    """A ``Put`` action for :func:`transact`."""
    action: dict[str, Any] = {"TableName": table_name(), "Item": encode(item)}
    _cond(action, condition, names, vals)
    return {"Put": action}


def tx_update(pk: str, sk: str, expr: str, condition: str | None = None, /, names: dict[str, str] | None = None, **vals: Any) -> dict[str, Any]:
    """An ``Update`` action for :func:`transact`."""
    action: dict[str, Any] = {"TableName": table_name(), "Key": key(pk, sk), "UpdateExpression": expr}
    _cond(action, condition, names, vals)
    return {"Update": action}


def tx_delete(pk: str, sk: str, condition: str | None = None, /, names: dict[str, str] | None = None, **vals: Any) -> dict[str, Any]:
    """A ``Delete`` action for :func:`transact`."""
    action: dict[str, Any] = {"TableName": table_name(), "Key": key(pk, sk)}
    _cond(action, condition, names, vals)
    return {"Delete": action}


def tx_check(pk: str, sk: str, condition: str, /, names: dict[str, str] | None = None, **vals: Any) -> dict[str, Any]:
    """A ``ConditionCheck`` action for :func:`transact`."""
    action: dict[str, Any] = {"TableName": table_name(), "Key": key(pk, sk)}
    _cond(action, condition, names, vals)
    return {"ConditionCheck": action}


def _cond(action: dict[str, Any], condition: str | None, names: dict[str, str] | None, vals: dict[str, Any]) -> None:
    if condition:
        action["ConditionExpression"] = condition
    if names:
        action["ExpressionAttributeNames"] = names
    if vals:
        action["ExpressionAttributeValues"] = values(**vals)


class RiderRefused(Exception):
    """The record riding along with the domain's first write (:func:`ride`) met its condition
    failing: another request holds it. Nothing of the cancelled write happened."""


@dataclass
class _Rider:
    action: dict[str, Any]  # a TransactWriteItems Put action (TableName, Item, ConditionExpression, ...)
    written: bool = False


_rider: contextvars.ContextVar[_Rider | None] = contextvars.ContextVar("relaynet_rider", default=None)


@contextlib.contextmanager
def ride(action: dict[str, Any]) -> Iterator[_Rider]:
    """Within the block, write the conditional Put ``action`` with the first write the domain
    makes: as one more item of its first :func:`transact` (no request of its own), or as a PutItem
    just before a first :func:`put`, :func:`update` or :func:`delete_if`. The Idempotency-Key's
    in-progress record rides this way (relaynet.http.idempotency), so it commits atomically with
    the call's first change. A refused condition raises :class:`RiderRefused` from that write
    (which then did not happen). The yielded rider's ``written`` says whether it went out."""
    rider = _Rider(action)
    reset_to = _rider.set(rider)
    try:
        yield rider
    finally:
        _rider.reset(reset_to)


def flush_rider() -> None:
    """Write a pending rider now as its own PutItem (no-op without one). Raises RiderRefused."""
    rider = _rider.get()
    if rider is None or rider.written:
        return
    try:
        client().put_item(**rider.action["Put"])
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            raise RiderRefused() from exc
        raise
    rider.written = True


@observability.traced
def transact(actions: list[dict[str, Any]], token: str | None = None) -> None:
    """One TransactWriteItems (at most 100 actions): all or nothing.

    Raises :class:`TransactionCancelled` with per-action reasons when a condition failed or the
    transaction conflicted with another one. ``token`` is DynamoDB's ClientRequestToken.
    """
    if len(actions) > MAX_TRANSACT_ITEMS:
        raise ValueError(f"a transaction holds at most {MAX_TRANSACT_ITEMS} actions, got {len(actions)}")
    rider = _rider.get()
    if rider is not None and not rider.written and len(actions) >= MAX_TRANSACT_ITEMS:
        flush_rider()  # no room for it: on its own, first
    riding = rider is not None and not rider.written
    kwargs: dict[str, Any] = {"TransactItems": [rider.action, *actions] if riding else actions}
    if token:
        kwargs["ClientRequestToken"] = token
    try:
        client().transact_write_items(**kwargs)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        reasons = [
            (r.get("Code") if r.get("Code") not in (None, "None") else None)
            for r in exc.response.get("CancellationReasons", [])
        ]
        # Every caller either retries (claims, channels, messaging) or answers a conflict: the
        # one place that sees them all counts them (relaynet.observability.METRICS).
        observability.count("TransactionCancelled")
        if "TransactionConflict" in reasons:
            observability.count("TransactionConflict")
        if riding:
            if reasons and reasons[0] == "ConditionalCheckFailed":
                raise RiderRefused() from exc
            reasons = reasons[1:]  # the caller's own actions, as it numbered them
        raise TransactionCancelled(reasons) from exc
    if riding:
        rider.written = True
    if _on_commit:
        _committed([action["Put"]["Item"] for action in actions if "Put" in action])


# --------------------------------------------------------------------------------------------
# Committed writes (push at the write: docs/architecture.md)

_on_commit: list[Callable[[list[dict[str, Any]]], None]] = []


def on_commit(listener: Callable[[list[dict[str, Any]]], None]) -> Callable[[], None]:
    """Call ``listener(images)`` after each write this process commits with :func:`put` or
    :func:`transact`. ``images`` are the items its Puts wrote, in DynamoDB JSON (``{"PK": {"S":
    ...}, ...}``, what the table's stream will carry as ``NewImage``), in the request's order; a
    write without a Put gives none (no call). Called in the writing thread, after DynamoDB
    answered and before the write returns, so a listener must be quick (hand the images to
    another thread); what it raises is logged and dropped, since the write happened. Returns a
    function that removes the listener."""
    _on_commit.append(listener)

    def remove() -> None:
        if listener in _on_commit:
            _on_commit.remove(listener)

    return remove


def _committed(images: list[dict[str, Any]]) -> None:
    if not images:
        return
    for listener in list(_on_commit):
        try:
            listener(images)
        except Exception:  # noqa: BLE001 - the write committed; a listener's failure is not the caller's
            logging.getLogger(__name__).exception("a commit listener failed")


# In AWS a write hands its pushes to the notifiers as it commits (relaynet.push_at_write): a no-op
# unless RELAYNET_PUSH_AT_WRITE_TARGETS is set. A malformed value is left to the settings, which
# refuse it by name at the cold start (ToolApp loads them), and is logged here.
def _install_push_at_write() -> None:
    from relaynet import push_at_write

    try:
        push_at_write.install()
    except ValueError as exc:
        logging.getLogger(__name__).error("push at the write is off: %s", exc)


_install_push_at_write()
