"""Advisory, exclusive, time-limited claims (PROTOCOL.md 4.9, 4.10, 8).

Serialisation (DESIGN.md)
-------------------------
Claims are serialised per network by optimistic concurrency on the claims HEAD counter. A
claim call reads the hot claims partition ``NET#<net>#CLAIMS`` strongly consistently (HEAD and
every claim item), decides overlap in memory with the exact glob intersection of
:mod:`relaynet.globs`, then makes one TransactWriteItems:

* HEAD ``counter = counter + 1`` on condition ``counter = :seen``, and
* a new claim: Put on ``attribute_not_exists`` with ``fencingToken`` = the new counter; or a
  renewal (the same instance claims exactly the same scope again, PROTOCOL.md 4.9): Update of
  its ``expiresAt`` on condition ``expiresAt = :seen``, keeping ``claimId`` and ``fencingToken``.

A cancelled transaction means another claim or renewal landed first: read again and retry
(:data:`MAX_ATTEMPTS`, full jitter); under contention a loser re-reads, sees the winner and
answers 409 naming it, so of any number of concurrent overlapping claims exactly one succeeds.
The token is the counter, so tokens strictly increase across successful claims. Renewals bump
the counter too (their token is unchanged; the counter skips a value): otherwise a renewal
judged "still active" by one clock could land next to a new claim that judged the same claim
expired by another clock. Releases do not touch HEAD: removing a claim can only free scopes,
and a claim that read it before the release answers 409 at its read, which is linearisable.

The Query reads in *descending* sort-key order so HEAD (``HEAD`` sorts after ``CLAIM#``) is read
before the claims: DynamoDB's Query is only read-committed against transactions, and a counter
read *after* the claims could already include a transaction whose claim the query missed. Read
first, any transaction committed after it moves the counter and cancels ours.

Expiry
------
A claim past ``expiresAt`` is inactive at once, by the reader's clock, whatever DynamoDB's TTL
deletion is doing: every read (claim, release, task get, release on a terminal task) checks
``expiresAt`` itself; ``ttl`` is cleanup only.

Where ended claims go (the hot partition holds only live claims)
---------------------------------------------------------------
A claim call costs one Query over the hot partition, so the partition must not accumulate
ended claims (before, released and expired items stayed until their TTL, a day later, and every
claim call read them all). Ended claims therefore *move* to ``NET#<net>#CLAIMS#ENDED`` (same
``CLAIM#<clm>`` sort key, the whole item plus ``endedAt`` and ``endReason``
``released`` | ``expired``, ``ttl`` one day after the end):

* a release moves the claim in one transaction (Delete on ``expiresAt = :seen``, Put on
  ``attribute_not_exists``);
* a claim transaction also moves up to :data:`MOVE_PER_CALL` lapsed claims it read (the same
  Delete + Put pairs), so each expired claim is read by at most a few calls after it lapses and
  costs no extra request. A claim nobody ever releases and no later claim call sees is removed
  by TTL as before.

The hot partition thus holds the active claims plus a bounded backlog of recently lapsed
ones, and a claim call's time grows linearly in the *active* claims: one Query page per ~1 MB of
them, one decode each, and one overlap test each only within the request's namespace
(``scopeType`` and ``resourceId``), against scopes compiled once and memoised by
:mod:`relaynet.globs`; path scopes are first bucketed by their literal first segment, so the
dynamic program runs only on claims that could overlap at all. ``network_release`` answers
``expired`` / ``already_released`` from the ended record for a day (one GetItem more than for a
live claim), then 404.
"""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from relaynet import clock, events, globs, ids, observability
from relaynet.errors import ClaimConflict, Conflict, InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.models.worker import ClaimRequest, ClaimsCheckRequest, ReleaseRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import claims as store
from relaynet.store import tasks as task_store
from relaynet.store.claims import KEEP_AFTER_END_S

MAX_ATTEMPTS = 60
MOVE_PER_CALL = 16  # lapsed claims moved out of the hot partition by one claim transaction

#: The DynamoDB item actions (IAM names) each entry point into this module needs.
DYNAMODB_ACTIONS = {
    "claim": frozenset({"GetItem", "Query", "UpdateItem", "PutItem", "DeleteItem"}),
    "release": frozenset({"GetItem", "PutItem", "DeleteItem"}),
    "release_for_task": frozenset({"Query", "GetItem", "PutItem", "DeleteItem", "ConditionCheckItem"}),
    "active_for_task": frozenset({"Query"}),
}


def normalise_scope(scope_type: str, scope: str) -> str:
    """The canonical scope: globs for ``path``/``resource``, the trimmed string for ``task``.

    Raises InvalidArgument (field ``scope``) for malformed globs or an empty task key.
    """
    if scope_type == "task":
        value = scope.strip()
        if not value:
            raise InvalidArgument.field("scope", "a task scope must not be empty")
        if len(value) > globs.MAX_SCOPE_LENGTH:
            raise InvalidArgument.field("scope", f"scope is {len(value)} characters long; the limit is "
                                                 f"{globs.MAX_SCOPE_LENGTH}")
        return value
    try:
        return globs.normalise(scope)
    except globs.GlobError as exc:
        raise InvalidArgument.field("scope", exc.message) from exc


def is_active(claim: dict[str, Any], now_ms: int) -> bool:
    """A live claim: not released and not past ``expiresAt``."""
    return not claim.get("releasedAt") and int(claim["expiresAt"]) > now_ms


def view(claim: dict[str, Any]) -> dict[str, Any]:
    """``{claimId, scopeType, scope, resourceId, taskId, expiresAt, fencingToken, holder}``."""
    return {
        "claimId": claim["id"], "scopeType": claim["scopeType"], "scope": claim["scope"],
        "resourceId": claim.get("resourceId"), "taskId": claim.get("taskId"),
        "expiresAt": clock.iso(int(claim["expiresAt"])), "fencingToken": int(claim["fencingToken"]),
        "holder": claim["holder"],
    }


# --------------------------------------------------------------------------- reading


@dataclass
class _Snapshot:
    counter: int = 0  # HEAD's counter: the last fencing token issued (0 before the first claim)
    active: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    lapsed: list[dict[str, Any]] = field(default_factory=list)  # still in the hot partition


def _read(net: str, now_ms: int) -> _Snapshot:
    """HEAD, then the claims of the hot partition, strongly consistent (HEAD first: see above)."""
    snap = _Snapshot()
    snap.counter, items = store.read_partition(net)
    for item in items:
        if is_active(item, now_ms):
            snap.active.append(item)
        else:
            snap.lapsed.append(item)
    snap.active.reverse()
    snap.lapsed.reverse()
    return snap


def _head(pattern: globs.Pattern) -> frozenset[str] | None:
    """The literal first segments of ``pattern``'s alternatives, or None if one is not literal.

    Two patterns can only overlap if some pair of alternatives can share a first segment, so a
    claim whose heads are all literal need only be tested against claims with one of the same
    heads or a non-literal one.
    """
    heads = set()
    for alt in pattern.alternatives:
        first = alt[0]
        if first is globs.DOUBLESTAR or not all(tok.__class__ is str for tok in first):
            return None
        heads.add("".join(first))
    return frozenset(heads)


def _overlapping(active: Iterable[dict[str, Any]], scope_type: str, scope: str,
                 resource_id: str | None) -> list[dict[str, Any]]:
    """Active claims that overlap the (normalised) scope in its namespace (PROTOCOL.md 4.9, 8)."""
    same_ns = [c for c in active if c["scopeType"] == scope_type and c.get("resourceId") == resource_id]
    if scope_type == "task":
        return [c for c in same_ns if c["scope"] == scope]
    mine = globs.compile_scope(scope)
    mine_heads = _head(mine)
    out = []
    for c in same_ns:
        other = globs.compile_scope(c["scope"])
        if mine_heads is not None:
            heads = _head_cached(other)
            if heads is not None and not (heads & mine_heads):
                continue
        if globs.overlaps(mine, other):
            out.append(c)
    return out


_head_cached = functools.lru_cache(maxsize=8192)(_head)


# --------------------------------------------------------------------------- writing


def _move(net: str, item: dict[str, Any], now_ms: int, *, released: bool) -> list[dict[str, Any]]:
    """Transaction actions moving ``item`` out of the hot partition into the ended one:
    released now (``released``), or lapsed at its ``expiresAt``."""
    if released:
        item = {**item, "releasedAt": now_ms}
    end = int(item.get("releasedAt") or item["expiresAt"])
    return store.end_actions(net, item, end, "released" if item.get("releasedAt") else "expired")


def _bump(net: str, counter: int) -> dict[str, Any]:
    """HEAD ``counter = counter + 1`` on condition that it is still ``counter``."""
    return store.bump_action(net, counter)


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(0.2, 0.005 * (2 ** min(attempt, 6)))))


def claim(principal: Principal, req: ClaimRequest) -> dict[str, Any]:
    """network_claim (PROTOCOL.md 4.9). Returns the claim view without ``holder``.

    Raises InvalidArgument (bad scope or resourceId), NotFound (unknown taskId), ClaimConflict
    (409 naming every overlapping active claim of another instance; nothing written), Conflict
    ``in_progress`` (still losing the transaction race after :data:`MAX_ATTEMPTS`).
    """
    scope = normalise_scope(req.scopeType, req.scope)
    resource_id = normalise_resource(req.resourceId, "resourceId") if req.resourceId else None
    net = principal.network_id
    if req.taskId and task_store.get(net, req.taskId) is None:
        raise NotFound(f"no task {req.taskId!r} in this network")
    me = principal.instance_id
    for attempt in range(MAX_ATTEMPTS):
        now = clock.now_ms()
        expires = now + req.ttlSeconds * 1000
        snap = _read(net, now)
        rivals = _overlapping(snap.active, req.scopeType, scope, resource_id)
        conflicts = [c for c in rivals if c["holder"].get("instanceId") != me]
        if conflicts:
            observability.count("ClaimConflict")
            raise ClaimConflict([{key: v for key, v in view(c).items() if key in ("claimId", "scope", "holder", "expiresAt")}
                                 for c in conflicts])
        mine = next((c for c in snap.active if c["holder"].get("instanceId") == me and c["scope"] == scope
                     and c["scopeType"] == req.scopeType and c.get("resourceId") == resource_id), None)
        actions = [_bump(net, snap.counter)]
        if mine is not None:
            item = {**mine, "expiresAt": expires, "taskId": req.taskId or mine.get("taskId")}
            actions.append(store.renew_action(net, mine, expires, req.taskId))
        else:
            item, put = store.new_claim(net, {
                "id": ids.new_id("clm"), "scopeType": req.scopeType, "scope": scope, "resourceId": resource_id,
                "taskId": req.taskId, "holder": principal.actor, "expiresAt": expires,
                "fencingToken": snap.counter + 1, "createdAt": clock.iso(now),
            })
            actions.append(put)
        for old in snap.lapsed[:MOVE_PER_CALL]:
            actions += _move(net, old, now, released=False)
        if mine is None:
            actions.append(events.event_action(net, "claim", principal.actor, f"{principal.agent} claimed "
                                               f"{req.scopeType} {scope}", claimId=item["id"], state="claimed"))
        try:
            store.commit(actions)
        except store.TransactionCancelled:
            _backoff(attempt)
            continue
        return _result(item)
    raise Conflict("in_progress", "too many concurrent claims in this network; retry", headers={"Retry-After": "1"})


def _bad_path(path: str) -> str | None:
    """Why ``path`` cannot be checked, or None (docs/protocol.md 10.4)."""
    if not path.strip():
        return "empty"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        return f"{path!r} holds a control character"
    if path.strip().startswith("/"):
        return f"{path!r} is absolute: give it relative to the repository's top level"
    if ".." in path.strip().split("/"):
        return f"{path!r} has a '..' segment"
    return None


def check(principal: Principal, req: ClaimsCheckRequest) -> dict[str, Any]:
    """``POST /v1/claims/check`` (docs/protocol.md 10.4; issue 25): for each path, in the order
    given, the live ``path`` claims of *other* instances whose glob matches it (PROTOCOL.md 8, the
    path taken literally), in the namespace of ``resourceId`` (absent is its own, as in 4.9).
    Returns ``{results: [{path, conflicts: [{claimId, scope, holder, expiresAt, taskId}]}],
    conflicting}``; writes nothing (one strongly consistent Query of the claims partition).

    Raises InvalidArgument naming every bad path (``paths.<i>``: empty, absolute, ``..``, a
    control character) or a bad ``resourceId``.
    """
    fields = [{"field": f"paths.{i}", "message": why} for i, p in enumerate(req.paths)
              if (why := _bad_path(p)) is not None]
    if fields:
        raise InvalidArgument("; ".join(f"{f['field']}: {f['message']}" for f in fields), fields)
    resource_id = normalise_resource(req.resourceId, "resourceId") if req.resourceId else None
    me = principal.instance_id
    theirs = [(c, globs.compile_scope(c["scope"])) for c in _read(principal.network_id, clock.now_ms()).active
              if c["scopeType"] == "path" and c.get("resourceId") == resource_id
              and c["holder"].get("instanceId") != me]
    results = []
    for path in req.paths:
        conflicts = [{key: v for key, v in view(c).items() if key in ("claimId", "scope", "holder", "expiresAt", "taskId")}
                     for c, pattern in theirs if globs.matches(pattern, path)]
        results.append({"path": path.strip(), "conflicts": conflicts})
    return {"results": results, "conflicting": sum(1 for r in results if r["conflicts"])}


def _result(item: dict[str, Any]) -> dict[str, Any]:
    out = view(item)
    out.pop("holder")
    return out


def release(principal: Principal, req: ReleaseRequest, *, any_holder: bool = False) -> dict[str, Any]:
    """network_release (PROTOCOL.md 4.10): ``{claimId, released: true}`` or ``released: false``
    with ``reason`` ``expired`` | ``already_released``.

    Raises NotFound (unknown id, or ended more than a day ago), PermissionDenied (not the holder,
    unless ``any_holder``: the representative's control_release_claim).
    """
    net = principal.network_id
    for attempt in range(MAX_ATTEMPTS):
        # The hot item first, then the ended one: a move between the two reads is then seen by
        # the second (two GetItems are serialisable against the move's transaction).
        live = store.get_live(net, req.claimId)
        item = live or store.get_ended(net, req.claimId)
        if item is None:
            raise NotFound(f"no claim {req.claimId!r} in this network")
        if not any_holder and item["holder"].get("instanceId") != principal.instance_id:
            raise PermissionDenied("only the holder instance may release this claim")
        now = clock.now_ms()
        if live is None:
            reason = "expired" if item.get("endReason") == "expired" else "already_released"
            return {"claimId": req.claimId, "released": False, "reason": reason}
        if item.get("releasedAt"):
            return {"claimId": req.claimId, "released": False, "reason": "already_released"}
        if int(item["expiresAt"]) <= now:
            return {"claimId": req.claimId, "released": False, "reason": "expired"}
        who = principal.actor if principal.kind == "instance" else {"representative": principal.rep}
        released_event = events.event_action(net, "claim", who, f"claim {item['scope']} of "
                                             f"{item['holder'].get('agent')} released", claimId=req.claimId,
                                             state="released")
        try:
            store.commit([*_move(net, item, now, released=True), released_event])
        except store.TransactionCancelled:  # renewed or released meanwhile: look again
            _backoff(attempt)
            continue
        return {"claimId": req.claimId, "released": True}
    raise Conflict("in_progress", "the claim keeps changing; retry", headers={"Retry-After": "1"})


def active_for_task(net: str, task_id: str) -> list[dict[str, Any]]:
    """Active claims carrying ``task_id`` (for network_task_get), oldest first."""
    return [view(c) for c in _read(net, clock.now_ms()).active if c.get("taskId") == task_id]


class _TaskRelease:
    """The claims of a task that became terminal (PROTOCOL.md 4.8), as relaynet.tasks.update
    takes them (its ``TerminalRelease``)."""

    def actions(self, net: str, task_id: str, now_ms: int) -> list[dict[str, Any]]:
        """The actions releasing every active claim carrying ``task_id``, for the task's own
        transaction: one strongly consistent Query of the claims partition, then a ConditionCheck
        of HEAD's counter as read (a claim taken or renewed in the network meanwhile cancels the
        transaction, so none taken before the move commits survives it) and 3 actions per claim
        (a claim released meanwhile cancels it too, ``expiresAt = :seen``)."""
        snap = _read(net, now_ms)
        return [store.head_check(net, snap.counter),
                *(a for c in snap.active if c.get("taskId") == task_id for a in _hub_release(net, c, now_ms))]

    def __call__(self, net: str, task_id: str) -> int:
        """Release every active claim carrying ``task_id``, each in its own transaction. Returns how many."""
        return _release_where(net, lambda c: c.get("taskId") == task_id)


#: relaynet.tasks.update's ``on_terminal`` (network_task_update, tasks, control_cancel_task).
release_for_task = _TaskRelease()


def release_for_holder(net: str, instance_id: str) -> int:
    """Release every active claim an instance holds (control_stop_agent, PROTOCOL.md 6). Returns how many."""
    return _release_where(net, lambda c: c["holder"].get("instanceId") == instance_id)


def active_for_network(net: str) -> list[dict[str, Any]]:
    """Every active claim of the network (control status and graph), oldest first."""
    return [view(c) for c in _read(net, clock.now_ms()).active]


def _hub_release(net: str, item: dict[str, Any], now_ms: int) -> list[dict[str, Any]]:
    """The actions of the hub releasing ``item``: its move to the ended partition and the event."""
    return [*_move(net, item, now_ms, released=True),
            events.event_action(net, "claim", {"system": "router"}, f"claim {item['scope']} of "
                                f"{item['holder'].get('agent')} released by the hub", claimId=item["id"],
                                state="released")]


def holder_release_actions(net: str, instance_id: str, now_ms: int) -> tuple[int, list[dict[str, Any]]]:
    """(how many, the transaction actions releasing every active claim ``instance_id`` holds):
    one read of the claims partition, 3 actions per claim (control_stop_agent's one transaction;
    a claim renewed meanwhile cancels it, ``expiresAt = :seen``)."""
    mine = [c for c in _read(net, now_ms).active if c["holder"].get("instanceId") == instance_id]
    return len(mine), [a for c in mine for a in _hub_release(net, c, now_ms)]


def _release_where(net: str, wanted: Callable[[dict[str, Any]], bool]) -> int:
    released = 0
    for c in _read(net, clock.now_ms()).active:
        if not wanted(c):
            continue
        item = c
        for attempt in range(MAX_ATTEMPTS):
            now = clock.now_ms()
            if not is_active(item, now):
                break
            try:
                store.commit(_hub_release(net, item, now))
            except store.TransactionCancelled:  # renewed, released or moved meanwhile
                item = store.get_live(net, c["id"])
                if item is None or not wanted(item):
                    break
                _backoff(attempt)
                continue
            released += 1
            break
    return released
