"""The table's stream records as Lambda hands them to a function, and the event-filter subset the
template's ``FilterCriteria`` use (issue 26: one definition for both push paths).

Both paths that offer a write to the stream functions build the same records: the local stack's
stream reader and its in-process push at the write (relaynet_local.streams), and, in AWS, the
writing function's asynchronous invocation of the notifiers (:mod:`relaynet.push_at_write`). A
record is Lambda's shape of a DynamoDB stream record: ``{eventID, eventName, eventVersion,
eventSource: "aws:dynamodb", awsRegion, dynamodb: {ApproximateCreationDateTime (epoch seconds),
Keys, NewImage, SequenceNumber, SizeBytes, StreamViewType}, eventSourceARN}``.

Filters: only what the template uses is implemented (:func:`matches`): exact values in a list,
``{"exists": true|false}``, ``{"prefix": "..."}``, nested objects (AWS Lambda's "Filter rule
syntax"). :func:`check_pattern` refuses anything else, so a pattern this module would misread
fails where it is loaded, never silently.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from typing import Any, TypeVar

#: The table's key attributes: a record's ``Keys`` (relaynet.store.keys).
KEY_ATTRIBUTES = ("PK", "SK")

_sequence = itertools.count(1)
K = TypeVar("K")


class PatternError(ValueError):
    """A filter pattern uses a rule :func:`matches` does not implement, or is malformed."""


def check_pattern(pattern: Any) -> None:
    """Raise :class:`PatternError` unless every rule of ``pattern`` (a parsed filter pattern)
    is one :func:`matches` implements."""
    if isinstance(pattern, dict):
        for value in pattern.values():
            check_pattern(value)
    elif isinstance(pattern, list):
        for rule in pattern:
            if isinstance(rule, dict) and not (set(rule) <= {"exists", "prefix"}):
                raise PatternError(f"the filter rule {rule} is not implemented")
    else:
        raise PatternError(f"a filter pattern value must be a list or an object, not {pattern!r}")


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` (a record, or any part of one) matches the filter ``pattern``."""
    for key, rule in pattern.items():
        present = isinstance(event, dict) and key in event
        value = event.get(key) if isinstance(event, dict) else None
        if isinstance(rule, dict):
            if not present or not matches(rule, value):
                return False
            continue
        ok = False
        for option in rule:
            if isinstance(option, dict) and "exists" in option:
                ok = present == bool(option["exists"])
            elif isinstance(option, dict) and "prefix" in option:
                ok = present and isinstance(value, str) and value.startswith(option["prefix"])
            else:
                ok = present and value == option
            if ok:
                break
        if not ok:
            return False
    return True


def wanted(record: dict[str, Any], patterns: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> bool:
    """Whether an event source with these filter patterns hands ``record`` to its function
    (any pattern matches; no patterns: every record)."""
    return not patterns or any(matches(p, record) for p in patterns)


def _bare(image: dict[str, Any], region: str, stream_arn: str) -> dict[str, Any]:
    """An INSERT record of ``image`` without what makes each record unique (its ids, time and
    size): what a filter pattern is tried on."""
    keys = {name: image[name] for name in KEY_ATTRIBUTES if name in image}
    return {"eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": region,
            "eventSourceARN": stream_arn, "dynamodb": {"Keys": keys, "NewImage": image, "StreamViewType": "NEW_IMAGE"}}


def _complete(record: dict[str, Any]) -> dict[str, Any]:
    record["eventID"] = uuid.uuid4().hex
    body = record["dynamodb"]
    body.update(ApproximateCreationDateTime=float(int(time.time())), SequenceNumber=f"w{next(_sequence):020d}",
                SizeBytes=len(json.dumps(body["NewImage"])))
    return record


def insert_record(image: dict[str, Any], *, region: str, stream_arn: str) -> dict[str, Any]:
    """The INSERT record the table's stream carries for a Put of ``image`` (DynamoDB JSON, the
    stream's ``NewImage``), in Lambda's shape. Its ``eventID`` is a fresh UUID and its
    ``SequenceNumber`` ``w<20 digits>`` counts this process's records: the stream's own record of
    the same commit has other ids (consumers key on the image, never on these)."""
    return _complete(_bare(image, region, stream_arn))


def offered(images: list[dict[str, Any]], sources: list[tuple[K, Any]], *, region: str,
            stream_arn: str) -> list[tuple[K, list[dict[str, Any]]]]:
    """For each ``(key, filter patterns)`` of ``sources``, in order, the INSERT records
    (:func:`insert_record`) of the Put ``images`` its patterns take, in commit order. A record is
    built whole once, and only when some source takes it (a commit no function wants costs no
    UUID and no JSON encoding); sources that take the same image share its record."""
    bare = [_bare(image, region, stream_arn) for image in images]
    taken = [(key, [r for r in bare if wanted(r, patterns)]) for key, patterns in sources]
    for record in {id(r): r for _, records in taken for r in records}.values():
        _complete(record)
    return taken
