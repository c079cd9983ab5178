"""Advisory, exclusive, time-limited claims (PROTOCOL.md 4.9, 4.10, 8).

Claims are serialised per network by optimistic concurrency (DESIGN.md): read the claims
partition strongly consistently (its HEAD holds a counter), drop inactive claims, decide overlap
in memory with the exact glob intersection of :mod:`relaynet.globs`, then one TransactWriteItems:
``counter = counter + 1`` on condition ``counter = :seen`` and the new claim on
``attribute_not_exists``. A cancelled transaction means another claim landed first: read again
and retry (bounded, with jitter). The new counter is the fencing token, so tokens strictly
increase across successful claims. A claim past ``expiresAt`` is inactive at once, whatever
DynamoDB's TTL deletion is doing.
"""

from __future__ import annotations

import random
import time
from typing import Any

from relaynet import clock, globs, ids
from relaynet.errors import ClaimConflict, Conflict, InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.models.worker import ClaimRequest, ReleaseRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import keys as k
from relaynet.store import table as t

MAX_ATTEMPTS = 60
KEEP_AFTER_END_S = 86_400  # released/expired claims stay readable a day (for release answers)


def normalise_scope(scope_type: str, scope: str) -> str:
    """The canonical scope: globs for ``path``/``resource``, the trimmed string for ``task``.

    Raises InvalidArgument (field ``scope``) for malformed globs or an empty task key.
    """
    if scope_type == "task":
        value = scope.strip()
        if not value:
            raise InvalidArgument.field("scope", "a task scope must not be empty")
        return value
    try:
        return globs.normalise(scope)
    except globs.GlobError as exc:
        raise InvalidArgument.field("scope", exc.message) from exc


def is_active(claim: dict[str, Any], now_ms: int) -> bool:
    """Not released and not past ``expiresAt``."""
    return not claim.get("releasedAt") and int(claim["expiresAt"]) > now_ms


def _overlap(a: dict[str, Any], scope_type: str, scope: str, resource_id: str | None) -> bool:
    if a["scopeType"] != scope_type or a.get("resourceId") != resource_id:
        return False
    if scope_type == "task":
        return a["scope"] == scope
    return globs.overlaps(a["scope"], scope)


def view(claim: dict[str, Any]) -> dict[str, Any]:
    """``{claimId, scopeType, scope, resourceId, taskId, expiresAt, fencingToken, holder}``."""
    return {
        "claimId": claim["id"], "scopeType": claim["scopeType"], "scope": claim["scope"],
        "resourceId": claim.get("resourceId"), "taskId": claim.get("taskId"),
        "expiresAt": clock.iso(int(claim["expiresAt"])), "fencingToken": int(claim["fencingToken"]),
        "holder": claim["holder"],
    }


def _read(net: str, now_ms: int) -> tuple[int, list[dict[str, Any]]]:
    """(head counter, active claims) of the network, strongly consistent."""
    items = t.query(k.claims_pk(net), filter_expr="#kind = :head OR (attribute_not_exists(releasedAt) AND expiresAt > :now)",
                    filter_values=t.values(head="head", now=now_ms), filter_names={"#kind": "kind"})
    counter = 0
    active = []
    for item in items:
        if item.get("kind") == "head":
            counter = int(item.get("counter", 0))
        elif is_active(item, now_ms):
            active.append(item)
    return counter, active


def claim(principal: Principal, req: ClaimRequest) -> dict[str, Any]:
    """network_claim (PROTOCOL.md 4.9). Returns the claim view without ``holder``.

    Raises InvalidArgument (bad scope or resourceId), NotFound (unknown taskId), ClaimConflict
    (409 naming every overlapping active claim of another instance; nothing written).
    """
    scope = normalise_scope(req.scopeType, req.scope)
    resource_id = normalise_resource(req.resourceId, "resourceId") if req.resourceId else None
    net = principal.network_id
    if req.taskId and t.get(*k.task(net, req.taskId)) is None:
        raise NotFound(f"no task {req.taskId!r} in this network")
    for attempt in range(MAX_ATTEMPTS):
        now = clock.now_ms()
        expires = now + req.ttlSeconds * 1000
        counter, active = _read(net, now)
        same = [c for c in active if _overlap(c, req.scopeType, scope, resource_id)]
        mine = next((c for c in same if c["holder"]["instanceId"] == principal.instance_id and c["scope"] == scope), None)
        conflicts = [c for c in same if c["holder"]["instanceId"] != principal.instance_id]
        if conflicts:
            raise ClaimConflict([{k_: v for k_, v in view(c).items() if k_ in ("claimId", "scope", "holder", "expiresAt")}
                                 for c in conflicts])
        if mine is not None:
            renewed = t.update(*k.claim(net, mine["id"]), "SET expiresAt = :exp, #ttl = :ttl",
                               condition="attribute_not_exists(releasedAt) AND expiresAt > :now",
                               names={"#ttl": "ttl"}, exp=expires, ttl=expires // 1000 + KEEP_AFTER_END_S, now=now)
            if renewed:
                return _result({**mine, "expiresAt": expires})
            continue
        claim_id = ids.new_id("clm")
        item = {
            "PK": k.claims_pk(net), "SK": f"CLAIM#{claim_id}", "kind": "claim", "id": claim_id,
            "scopeType": req.scopeType, "scope": scope, "resourceId": resource_id, "taskId": req.taskId,
            "holder": principal.actor, "expiresAt": expires, "fencingToken": counter + 1,
            "createdAt": clock.iso(now), "ttl": expires // 1000 + KEEP_AFTER_END_S,
        }
        head_pk, head_sk = k.claims_head(net)
        try:
            t.transact([
                t.tx_update(head_pk, head_sk, "SET #c = :next, #kind = :head",
                            "#c = :seen" if counter else "attribute_not_exists(#c)",
                            names={"#c": "counter", "#kind": "kind"}, next=counter + 1, head="head",
                            **({"seen": counter} if counter else {})),
                t.tx_put(item, "attribute_not_exists(PK)"),
            ])
            return _result(item)
        except t.TransactionCancelled:
            time.sleep(random.uniform(0, min(0.2, 0.005 * (2 ** min(attempt, 6)))))
    raise Conflict("in_progress", "too many concurrent claims in this network; retry", headers={"Retry-After": "1"})


def _result(item: dict[str, Any]) -> dict[str, Any]:
    out = view(item)
    out.pop("holder")
    return out


def release(principal: Principal, req: ReleaseRequest, *, any_holder: bool = False) -> dict[str, Any]:
    """network_release (PROTOCOL.md 4.10): ``{claimId, released: true}`` or ``released: false``
    with ``reason`` ``expired`` | ``already_released``.

    Raises NotFound (unknown id), PermissionDenied (not the holder, unless ``any_holder``: the
    representative's control_release_claim).
    """
    net = principal.network_id
    item = t.get(*k.claim(net, req.claimId))
    if item is None:
        raise NotFound(f"no claim {req.claimId!r} in this network")
    if not any_holder and item["holder"].get("instanceId") != principal.instance_id:
        raise PermissionDenied("only the holder instance may release this claim")
    now = clock.now_ms()
    if item.get("releasedAt"):
        return {"claimId": req.claimId, "released": False, "reason": "already_released"}
    if int(item["expiresAt"]) <= now:
        return {"claimId": req.claimId, "released": False, "reason": "expired"}
    if _mark_released(net, req.claimId, now):
        return {"claimId": req.claimId, "released": True}
    return release(principal, req, any_holder=any_holder)


def _mark_released(net: str, claim_id: str, now_ms: int) -> bool:
    return bool(t.update(*k.claim(net, claim_id), "SET releasedAt = :now",
                         condition="attribute_exists(PK) AND attribute_not_exists(releasedAt) AND expiresAt > :now",
                         now=now_ms))


def active_for_task(net: str, task_id: str) -> list[dict[str, Any]]:
    """Active claims carrying ``task_id`` (for network_task_get)."""
    _, active = _read(net, clock.now_ms())
    return [view(c) for c in active if c.get("taskId") == task_id]


def release_for_task(net: str, task_id: str) -> int:
    """Release every active claim of a task that became terminal (PROTOCOL.md 4.8). Returns how many."""
    now = clock.now_ms()
    _, active = _read(net, now)
    return sum(_mark_released(net, c["id"], now) for c in active if c.get("taskId") == task_id)
