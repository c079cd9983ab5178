"""DynamoDB Streams for the local stack: the template's stream-triggered functions (the webhook
notifier) run from the same changes as in AWS.

In AWS, Lambda polls the table's stream and invokes the function with batches of records
(``{"Records": [...]}``, each ``{eventID, eventName, eventVersion, eventSource: "aws:dynamodb",
awsRegion, dynamodb: {Keys, NewImage, SequenceNumber, SizeBytes, StreamViewType,
ApproximateCreationDateTime}, eventSourceARN}``), filtered by the event source's
``FilterCriteria``. Here :class:`StreamRunner` does the same against the local store's Streams API
(moto's server and DynamoDB Local both serve it at the DynamoDB endpoint): it polls every shard
of the table's latest stream, turns what ``GetRecords`` answers into Lambda's record shape, keeps
the records the filter patterns match, and invokes the function in batches of at most
``BatchSize``. A record the function reports in ``batchItemFailures`` (powertools' partial batch
response) is retried up to ``MaximumRetryAttempts`` times, then logged as what AWS would send to
the ``OnFailure`` destination.

Only the event-filter subset the template uses is implemented (relaynet.stream_records, shared
with the AWS push at the write): exact values in a list, ``{"exists": true|false}`` and
``{"prefix": "..."}``, nested objects; a pattern using anything else raises
:class:`relaynet_local.template.TemplateError` at start.

The table's stream is switched on here, when the stack starts (``UpdateTable``), not by
:func:`relaynet_local.template.create_table`: moto's in-process tables deep-copy their stream
records in every transaction, so the unit tests' tables stay without one. (moto's *server*
keeps every record of the stream for its lifetime, so a long-running moto-backed hub slows
down as it goes; DynamoDB Local trims its streams after 24 hours, as AWS does.)

The runner also sets ``RELAYNET_PUSH_ALLOW_LOOPBACK=true`` (unless set) for its lifetime:
webhooks to ``http://127.0.0.1`` receivers are how a local stack is used.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from relaynet.stream_records import PatternError, check_pattern, insert_record, matches, offered, wanted
from relaynet_local.template import Function, Template, TemplateError

__all__ = ["StreamRunner", "WriteNotifier", "PushedAtWrite", "StreamSource", "stream_sources", "matches",
           "lambda_record", "digest"]

log = logging.getLogger("relaynet_local.streams")

POLL_SECONDS = 0.1
#: The longest pause between polls: after each poll that found nothing the pause doubles from
#: ``poll_seconds`` up to this, and a poll that finds records to hand over brings it back. The
#: hub's own writes are pushed at the write (:class:`WriteNotifier`), so a stream that carries
#: only those is read less often, idle or busy (an idle hub polled ten times a second: 10
#: GetRecords a second on each side; one agent's calls kept it at 9 to 12 a second).
IDLE_POLL_SECONDS = 1.0


@dataclass
class StreamSource:
    """One ``Type: DynamoDB`` event source of a function (the properties the runner honours)."""

    function: Function
    batch_size: int
    max_retries: int
    patterns: list[dict[str, Any]]


def stream_sources(template: Template) -> list[StreamSource]:
    """The template's DynamoDB stream event sources on its table."""
    out = []
    table_id = template.table.logical_id if template.table else None
    for lid, resource in template.document["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        for source in ((resource.get("Properties") or {}).get("Events") or {}).values():
            props = source.get("Properties") or {}
            if source.get("Type") != "DynamoDB" or props.get("Stream") != {"Fn::GetAtt": [table_id, "StreamArn"]}:
                continue
            patterns = [json.loads(f["Pattern"]) for f in ((props.get("FilterCriteria") or {}).get("Filters") or [])]
            for pattern in patterns:
                _check_pattern(pattern)
            retries = props.get("MaximumRetryAttempts", -1)
            out.append(StreamSource(template.functions[lid], int(props.get("BatchSize", 100)),
                                    10_000 if int(retries) < 0 else int(retries), patterns))
    return out


def _check_pattern(pattern: Any) -> None:
    try:
        check_pattern(pattern)
    except PatternError as exc:
        raise TemplateError(f"the local stack does not implement this filter: {exc}") from None


def lambda_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A ``GetRecords`` record as Lambda passes it to the function (times as epoch seconds)."""
    body = dict(record.get("dynamodb") or {})
    when = body.get("ApproximateCreationDateTime")
    if hasattr(when, "timestamp"):
        body["ApproximateCreationDateTime"] = float(int(when.timestamp()))
    return {"eventID": record.get("eventID"), "eventName": record.get("eventName"),
            "eventVersion": record.get("eventVersion", "1.1"), "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion") or region, "dynamodb": body, "eventSourceARN": stream_arn}


class StreamRunner:
    """Polls the local table's stream and invokes the stream functions (module docstring):
    every ``poll_seconds`` while it finds records to hand over, the pause doubling up to
    :data:`IDLE_POLL_SECONDS` while it finds none, or only records no function wants or the
    write pushed already (under load most of them: the stream is the backstop).

    ``invoke(function, event)`` runs a function as the stack does (its container cache);
    ``endpoint`` and ``table`` name the store. :meth:`start` returns at once when the template has
    no stream function; records written before :meth:`start` are not delivered (``LATEST``).
    """

    def __init__(self, template: Template, endpoint: str, table: str,
                 invoke: Callable[[Function, dict[str, Any]], Any], poll_seconds: float = POLL_SECONDS,
                 pushed: "PushedAtWrite | None" = None):
        self.sources = stream_sources(template)
        self.pushed = pushed
        self.table_properties = template.table.properties if template.table else {}
        self.endpoint, self.table, self.invoke, self.poll_seconds = endpoint, table, invoke, poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved_env: str | None = None
        self._set_env = False
        self.stream_arn: str | None = None

    def start(self) -> "StreamRunner":
        if not self.sources:
            return self
        import boto3

        if "RELAYNET_PUSH_ALLOW_LOOPBACK" not in os.environ:
            os.environ["RELAYNET_PUSH_ALLOW_LOOPBACK"] = "true"
            self._set_env = True
            _clear_settings()
        from relaynet.store.table import client_config

        ddb = boto3.client("dynamodb", endpoint_url=self.endpoint)
        self._streams = boto3.client("dynamodbstreams", endpoint_url=self.endpoint, config=client_config())
        self.region = ddb.meta.region_name
        desc = ddb.describe_table(TableName=self.table)["Table"]
        if not desc.get("LatestStreamArn"):  # create_table leaves streams out (moto copies them per transaction)
            view = (self.table_properties.get("StreamSpecification") or {}).get("StreamViewType", "NEW_IMAGE")
            ddb.update_table(TableName=self.table, StreamSpecification={"StreamEnabled": True, "StreamViewType": view})
            desc = ddb.describe_table(TableName=self.table)["Table"]
        self.stream_arn = desc["LatestStreamArn"]
        self._iterators: dict[str, str | None] = {}
        for shard in self._shards():
            if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {}):
                self._iterators[shard["ShardId"]] = self._iterator(shard["ShardId"], "LATEST")
            else:
                self._iterators[shard["ShardId"]] = None  # closed before we started: nothing new in it
        self._thread = threading.Thread(target=self._loop, name="relaynet-local-streams", daemon=True)
        self._thread.start()
        log.info("stream functions %s on %s", [s.function.logical_id for s in self.sources], self.stream_arn)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._set_env:
            os.environ.pop("RELAYNET_PUSH_ALLOW_LOOPBACK", None)
            self._set_env = False
            _clear_settings()

    # -- internals -------------------------------------------------------------------------

    def _shards(self) -> list[dict[str, Any]]:
        shards, start = [], None
        while True:
            kwargs = {"StreamArn": self.stream_arn, **({"ExclusiveStartShardId": start} if start else {})}
            desc = self._streams.describe_stream(**kwargs)["StreamDescription"]
            shards += desc.get("Shards", [])
            start = desc.get("LastEvaluatedShardId")
            if not start:
                return shards

    def _iterator(self, shard_id: str, kind: str) -> str:
        return self._streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=shard_id,
                                                ShardIteratorType=kind)["ShardIterator"]

    def _loop(self) -> None:
        last_scan, pause = 0.0, self.poll_seconds
        while not self._stop.wait(pause):
            found = False
            try:
                if time.monotonic() - last_scan > 2.0:  # new shards appear as old ones close
                    last_scan = time.monotonic()
                    for shard in self._shards():
                        if shard["ShardId"] not in self._iterators:
                            self._iterators[shard["ShardId"]] = self._iterator(shard["ShardId"], "TRIM_HORIZON")
                for shard_id, iterator in list(self._iterators.items()):
                    if iterator is None:
                        continue
                    resp = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                    self._iterators[shard_id] = resp.get("NextShardIterator")
                    records = [lambda_record(r, self.stream_arn, self.region) for r in resp.get("Records", [])]
                    if records and self._dispatch(records):
                        found = True
            except Exception:  # noqa: BLE001 - logged; the next poll tries again
                if not self._stop.is_set():
                    log.exception("polling the stream failed")
            pause = self.poll_seconds if found else min(pause * 2, max(self.poll_seconds, IDLE_POLL_SECONDS))

    def _dispatch(self, records: list[dict[str, Any]]) -> int:
        """Invoke each stream function with the records its filters match and the write did not
        push already; returns how many (record, function) pairs were handed over."""
        handed = 0
        for source in self.sources:
            mine = [r for r in records if wanted(r, source.patterns)]
            if self.pushed is not None:
                mine = [r for r in mine if not self.pushed.take(source.function.logical_id, r)]
            handed += len(mine)
            for i in range(0, len(mine), source.batch_size):
                self._run(source, mine[i:i + source.batch_size])
        return handed

    def _run(self, source: StreamSource, batch: list[dict[str, Any]]) -> None:
        for attempt in range(source.max_retries + 1):
            try:
                result = self.invoke(source.function, {"Records": batch})
            except Exception:  # noqa: BLE001 - the whole batch failed: retried as Lambda would
                log.exception("%s failed on a batch of %d records", source.function.logical_id, len(batch))
                failed = {r["dynamodb"].get("SequenceNumber") for r in batch}
            else:
                failed = {f.get("itemIdentifier") for f in (result or {}).get("batchItemFailures") or []}
            if not failed:
                return
            # Lambda retries from the first failed record on (stream order is kept)
            first = min(i for i, r in enumerate(batch) if r["dynamodb"].get("SequenceNumber") in failed)
            batch = batch[first:]
        log.error("%s: %d stream records failed %d times; AWS would send them to the OnFailure destination "
                  "(sequence numbers %s)", source.function.logical_id, len(batch), source.max_retries + 1,
                  [r["dynamodb"].get("SequenceNumber") for r in batch])


class WriteNotifier:
    """Push at the write (docs/architecture.md "Push at the write"): every item a Put of this
    process commits (:func:`relaynet.store.table.on_commit`) is made the INSERT record the table's
    stream will carry for it, and offered at once to the template's stream functions whose
    ``FilterCriteria`` match it, the same functions the :class:`StreamRunner` invokes: the webhook
    notifier's first POST and the AG2 notifier's ``notify`` frames leave when the write is
    answered, not at the next stream poll.

    One thread per function takes what the writers queued, in commit order, and invokes the
    function with up to its ``BatchSize`` records at a time (a burst rides one invocation). What
    a function handled is told to ``on_pushed(function_id, digests)`` (:class:`PushedAtWrite`), so
    the stream does not hand it over again; a record the stream reads first is handed over by
    both, and the functions deduplicate by their delivery markers (AG2: one per envelope,
    recipient and connection; webhooks: one per delivery id), so each push is made once whichever
    path comes first. A batch that raises or reports failed records is only logged: the stream
    is the backstop. Off when ``RELAYNET_PUSH_AT_WRITE`` is
    false. Writes made by other processes (the admin CLI) reach their recipients by the stream.
    """

    def __init__(self, template: Template, invoke: Callable[[Function, dict[str, Any]], Any],
                 region: str = "us-east-1", stream_arn: str = "push-at-write",
                 on_pushed: Callable[[str, list[str]], None] | None = None):
        self.sources = stream_sources(template)
        self.on_pushed = on_pushed
        self.invoke, self.region, self.stream_arn = invoke, region, stream_arn
        self._queues: list[tuple[StreamSource, queue.SimpleQueue]] = []
        self._threads: list[threading.Thread] = []
        self._remove: Callable[[], None] | None = None

    def start(self) -> "WriteNotifier":
        """Start listening to this process's commits (no-op without stream functions, or off)."""
        from relaynet.config import settings
        from relaynet.store import table

        if not self.sources or not settings().push_at_write:
            return self
        for source in self.sources:
            q: queue.SimpleQueue = queue.SimpleQueue()
            thread = threading.Thread(target=self._work, args=(source, q), daemon=True,
                                      name=f"relaynet-local-push-{source.function.logical_id}")
            self._queues.append((source, q))
            self._threads.append(thread)
            thread.start()
        self._remove = table.on_commit(self._committed)
        log.info("push at the write: %s", [s.function.logical_id for s in self.sources])
        return self

    def stop(self) -> None:
        """Stop listening; what was queued is still handed over before the threads end."""
        if self._remove is not None:
            self._remove()
            self._remove = None
        for _, q in self._queues:
            q.put(None)
        for thread in self._threads:
            thread.join(timeout=10)
        self._queues, self._threads = [], []

    def record(self, image: dict[str, Any]) -> dict[str, Any]:
        """The stream record (Lambda's shape, relaynet.stream_records) of a Put's new ``image``."""
        return insert_record(image, region=self.region, stream_arn=self.stream_arn)

    def _committed(self, images: list[dict[str, Any]]) -> None:
        sources = [(q, source.patterns) for source, q in self._queues]
        for q, records in offered(images, sources, region=self.region, stream_arn=self.stream_arn):
            if records:
                q.put(records)

    def _work(self, source: StreamSource, q: queue.SimpleQueue) -> None:
        stopping = False
        while not stopping:
            first = q.get()
            if first is None:
                return
            batch = list(first)
            while len(batch) < source.batch_size:
                try:
                    more = q.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.extend(more)
            for i in range(0, len(batch), source.batch_size):
                self._run(source, batch[i:i + source.batch_size])

    def _run(self, source: StreamSource, batch: list[dict[str, Any]]) -> None:
        try:
            result = self.invoke(source.function, {"Records": batch})
        except Exception:  # noqa: BLE001 - the stream delivers these records
            log.exception("%s failed on %d records at the write; the stream delivers them",
                          source.function.logical_id, len(batch))
            return
        failed = (result or {}).get("batchItemFailures") or [] if isinstance(result, dict) else []
        if failed:
            log.warning("%s: %d of %d records failed at the write; the stream delivers them",
                        source.function.logical_id, len(failed), len(batch))
        if self.on_pushed is not None:
            failed_ids = {f.get("itemIdentifier") for f in failed}
            done = [digest(r) for r in batch if r["dynamodb"]["SequenceNumber"] not in failed_ids]
            if done:
                self.on_pushed(source.function.logical_id, done)


def digest(record: dict[str, Any]) -> str:
    """What a stream function is handed in ``record`` (its ``eventName`` and ``NewImage``), as
    16 bytes of BLAKE2b in hex: the write path's record of a Put and the stream's record of the
    same commit have one digest (their ids and sequence numbers differ)."""
    body = json.dumps([record["eventName"], record["dynamodb"].get("NewImage")], sort_keys=True,
                      separators=(",", ":"))
    return hashlib.blake2b(body.encode(), digest_size=16).hexdigest()


class PushedAtWrite:
    """The records each stream function already handled at the write (:class:`WriteNotifier`,
    in any of the hub's processes), so the :class:`StreamRunner` does not hand them to it a
    second time: the stream stays the backstop for what the write path did not do (a batch
    that raised, a record reported in ``batchItemFailures``, a write by another program, a
    process killed between its commit and its push), and a record it reads before the write
    path is done is still handed over (the functions deduplicate). In AWS both paths run; the
    local stack skips the second because on DynamoDB Local each of the notifiers' reads costs
    the hub and the store as much as a tool call's (docs/architecture.md "Hub processes").

    Thread-safe. Holds at most ``limit`` digests (a digest the stream never reads, such as a
    record the stream function's filter drops, is forgotten oldest first)."""

    def __init__(self, limit: int = 20_000):
        self.limit = limit
        self._seen: "collections.OrderedDict[tuple[str, str], int]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, function_id: str, digests: list[str]) -> None:
        """``function_id`` (a template logical id) handled the records with these digests."""
        with self._lock:
            for d in digests:
                key = (function_id, d)
                self._seen[key] = self._seen.get(key, 0) + 1
                while len(self._seen) > self.limit:
                    self._seen.popitem(last=False)

    def take(self, function_id: str, record: dict[str, Any]) -> bool:
        """Whether ``function_id`` already handled ``record`` at the write (each handling
        answers True once)."""
        key = (function_id, digest(record))
        with self._lock:
            count = self._seen.get(key)
            if count is None:
                return False
            if count > 1:
                self._seen[key] = count - 1
            else:
                del self._seen[key]
            return True


def _clear_settings() -> None:
    import sys

    config = sys.modules.get("relaynet.config")
    if config is not None:
        config.settings.cache_clear()
