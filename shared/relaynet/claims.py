"""Advisory, exclusive, time-limited claims (PROTOCOL.md 4.9, 4.10, 8), laid out by directory
subtree with no network-wide serialisation point (issue 25; relaynet.store.claims has the keys).

Where a claim lives
-------------------
A claim's *anchor* is the longest literal directory prefix of its glob (common to all its brace
alternatives): ``soak/a1`` for ``soak/a1/**``, ``src/app.py`` for ``src/app.py``, the root for
``**/*.md``. Every path the glob matches lies under its anchor, so two claims can overlap only if
one anchor is a prefix of the other. A claim at anchor ``a`` therefore reads (strongly
consistent) the items of ``a``'s whole subtree and the items *at* each proper prefix of ``a``
that has a *mark* (every announcement writes its anchor's mark, so an unmarked prefix holds no
claim): one Query beside one BatchGetItem of the prefixes' marks, plus a Query per marked
prefix, none of them seeing anything of disjoint subtrees (``soak/a1/**`` never reads
``soak/b2/**``); overlap is decided exactly with :mod:`relaynet.globs`. A task scope overlaps
only an equal one: one Query of its own anchor.

Announce, read, decide (why no counter is needed)
-------------------------------------------------
1. *Announce*: Put a ``pending`` tree item (one per instance and scope, on
   ``attribute_not_exists``; finding the instance's own granted item there is a renewal) and its
   anchor's mark, in one transaction.
2. *Read* the overlapping region.
3. *Decide*: a live granted claim of another instance that overlaps is a 409 (the announcement is
   withdrawn). Otherwise one TransactWriteItems grants it: our item ``pending -> granted`` on
   condition that nobody touched it since the read (``attempt``, ``state``, ``rev``); every
   overlapping ``pending`` item of another instance seen is marked ``defeated`` by us (on
   condition that it is still pending), and one of our own instance moved on a revision; every
   overlapping lapsed claim seen is moved to the ended partition (on ``expiresAt = :seen``).

Each caller writes before it reads, so of two overlapping concurrent claims at least one sees the
other's announcement (a claim below an announced anchor reads its mark after the announcement
committed, or else announced before the other read its subtree); the one that sees it names it in its grant; transactions are
serialisable, so whichever commits first wins and the other's grant is cancelled (its own item is
defeated, or the item it meant to defeat is granted), re-reads, and answers 409 naming the winner.
A defeated announcement is only ever defeated together with its defeater's grant, so some caller
always wins (PROTOCOL.md 4.9: exactly one succeeds). Disjoint claims touch no common item.

Fencing tokens (docs/protocol.md 4.9)
-------------------------------------
A grant's token is ``max(now_ms, 1 + every token it read)``: granted items in the region, and the
high-water mark of each anchor read, which the grant raises at its own anchor (on condition that
it is below the token; same-anchor grants thus order themselves). Of two overlapping claims the
later one has read the earlier's item or mark (the argument above), so tokens strictly increase
across overlapping claims; claims that cannot overlap are not ordered. The millisecond floor keeps
tokens above those of the counter before issue 25 and above marks removed by TTL two days later.

Renewals and expiry
-------------------
A renewal updates the granted item on ``expiresAt = :seen``; a new claim that judged the same
claim lapsed by another clock moves it on the same condition, so at most one of them lands. A
claim past ``expiresAt`` is inactive at once, by the reader's clock; ``ttl`` is cleanup only.
``network_release`` reads the claim's reference by id and deletes the tree item on condition that
it is still live; ended claims answer ``expired`` / ``already_released`` for a day, then 404.

A task's terminal move finds the task's claims through its index and checks the task's own head
counter (``TASK#<task>#HEAD``), which only claims carrying that task move.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from typing import Any, Callable

from relaynet import clock, events, globs, ids, observability
from relaynet.errors import ClaimConflict, Conflict, InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.models.worker import ClaimRequest, ClaimsCheckRequest, ReleaseRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import claims as store
from relaynet.store import tasks as task_store
from relaynet.store import unit_of_work as uow

MAX_ATTEMPTS = 60
MOVE_PER_CALL = 16  # lapsed claims, overlapping or not, moved out of the tree by one grant
STALE_PENDING_MS = 10_000  # an announcement of our own instance and scope this old lost its caller

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
    """A live claim: granted (not an announcement), not released and not past ``expiresAt``."""
    return (claim.get("state", "granted") == "granted" and not claim.get("releasedAt")
            and int(claim["expiresAt"]) > now_ms)


def _lapsed(claim: dict[str, Any], now_ms: int) -> bool:
    """A granted claim past its ``expiresAt`` that is still in the tree."""
    return claim.get("state") == "granted" and int(claim["expiresAt"]) <= now_ms


def view(claim: dict[str, Any]) -> dict[str, Any]:
    """``{claimId, scopeType, scope, resourceId, taskId, expiresAt, fencingToken, holder}``."""
    return {
        "claimId": claim["id"], "scopeType": claim["scopeType"], "scope": claim["scope"],
        "resourceId": claim.get("resourceId"), "taskId": claim.get("taskId"),
        "expiresAt": clock.iso(int(claim["expiresAt"])), "fencingToken": int(claim["fencingToken"]),
        "holder": claim["holder"],
    }




def _conflict_view(c: dict[str, Any]) -> dict[str, Any]:
    return {key: v for key, v in view(c).items() if key in ("claimId", "scope", "holder", "expiresAt")}


def _result(item: dict[str, Any]) -> dict[str, Any]:
    out = view(item)
    out.pop("holder")
    return out


# --------------------------------------------------------------------------- where a claim lives


def anchor(scope_type: str, scope: str) -> tuple[str, ...]:
    """The anchor of a normalised scope (module docstring): the literal directory prefix common
    to every alternative of the glob, shortened until its sort key fits DynamoDB's limit (a
    shorter anchor is still a prefix of every path the glob matches). A task scope is its own
    one-segment anchor (its SHA-256 when too long for a key)."""
    if scope_type == "task":
        return (scope,) if store.anchor_fits(scope) and "/" not in scope else (f"#{hashlib.sha256(scope.encode()).hexdigest()}",)
    return _glob_anchor(scope)


@functools.lru_cache(maxsize=8192)
def _glob_anchor(scope: str) -> tuple[str, ...]:
    prefix: list[str] | None = None
    for alt in globs.compile_scope(scope).alternatives:
        literal = []
        for seg in alt:
            if seg is globs.DOUBLESTAR or not all(tok.__class__ is str for tok in seg):
                break
            literal.append("".join(seg))
        if prefix is None:
            prefix = literal
        else:
            n = 0
            while n < min(len(prefix), len(literal)) and prefix[n] == literal[n]:
                n += 1
            prefix = prefix[:n]
    out = tuple(prefix or ())
    while out and not store.anchor_fits("/".join(out)):
        out = out[:-1]
    return out


def _overlap_test(scope_type: str, scope: str) -> Callable[[str], bool]:
    """``other_scope -> bool``: whether a claim on it overlaps ``scope`` (PROTOCOL.md 4.9, 8)."""
    if scope_type == "task":
        return lambda other: other == scope
    mine = globs.compile_scope(scope)
    return lambda other: globs.overlaps(mine, globs.compile_scope(other))


# --------------------------------------------------------------------------- claiming


class _Claiming:
    """One network_claim call: announce, read, decide (module docstring)."""

    def __init__(self, principal: Principal, req: ClaimRequest, scope: str, resource_id: str | None):
        self.p, self.req, self.scope, self.resource_id = principal, req, scope, resource_id
        self.net, self.me = principal.network_id, principal.instance_id
        self.pk = store.tree_pk(self.net, req.scopeType, resource_id)
        self.anchor = anchor(req.scopeType, scope)
        self.anchor_path = "/".join(self.anchor)
        self.sk = store.tree_sk(self.anchor_path, self.me, scope)
        self.overlaps = _overlap_test(req.scopeType, scope)

    def _retry(self) -> bool:
        """Count one lost race (announcing or granting, one budget for both) and wait a
        jittered moment; False once :data:`MAX_ATTEMPTS` are spent."""
        self.attempts += 1
        if self.attempts >= MAX_ATTEMPTS:
            return False
        uow.backoff(self.attempts)
        return True

    def run(self) -> dict[str, Any]:
        self.attempts = 0
        while True:
            now = clock.now_ms()
            mine = self._announcement(now)
            seen = store.announce(mine)
            if seen is not None:
                outcome = self._over(seen, mine, now)
                if outcome is None:
                    if self._retry():
                        continue
                    break
                if outcome is not mine:
                    return outcome  # a renewal
            decided = self._decide(mine)
            if decided is not None:
                return decided
            if not self._retry():
                break
        raise Conflict("in_progress", "too many concurrent claims on this scope; retry", headers={"Retry-After": "1"})

    def _announcement(self, now: int) -> dict[str, Any]:
        return store.tree_item(self.pk, self.sk, kind="claim", state="pending", attempt=secrets.token_hex(8),
                               rev=0, id=ids.new_id("clm"), scopeType=self.req.scopeType, scope=self.scope,
                               resourceId=self.resource_id, holder=self.p.actor, anchor=self.anchor_path,
                               announcedAt=now, createdAt=clock.iso(now), ttl=now // 1000 + store.PENDING_KEEP_S)

    def _over(self, seen: dict[str, Any], mine: dict[str, Any], now: int) -> dict[str, Any] | None:
        """Our own item was already there. Returns the renewal's result, ``mine`` once our
        announcement replaced a dead one, or None to try again."""
        if not seen:
            return None  # gone between the Put and the read
        state = seen.get("state")
        if state == "granted" and int(seen["expiresAt"]) > now:
            return self._renew(seen, now)
        if state == "granted":  # our own lapsed claim: it ends (unless it moved meanwhile), and a new one (new id) begins
            uow.commit(store.end_actions(self.net, seen, int(seen["expiresAt"]), "expired"))
            return None
        if state == "defeated" or now - int(seen.get("announcedAt", 0)) > STALE_PENDING_MS:
            return mine if store.replace_dead(mine, seen) else None
        return None  # our own instance is claiming this very scope right now: wait for it

    def _renew(self, seen: dict[str, Any], now: int) -> dict[str, Any] | None:
        """PROTOCOL.md 4.9: the same instance claims exactly the same scope again (same id and
        token). One Update; its reference's TTL (and the task index) move along when the claim
        would outlive them or is attached to a task."""
        expires = now + self.req.ttlSeconds * 1000
        task_id = self.req.taskId
        item = {**seen, "expiresAt": expires, "taskId": task_id or seen.get("taskId")}
        ref_ttl = int(seen.get("refTtl", 0))
        if expires // 1000 + store.KEEP_AFTER_END_S > ref_ttl or (task_id and task_id != seen.get("taskId")):
            ref_ttl = max(ref_ttl, expires // 1000 + 2 * store.KEEP_AFTER_END_S)
            item["refTtl"] = ref_ttl
            actions = [store.renew_action(seen, expires, task_id, ref_ttl=ref_ttl),
                       store.ref_ttl_update(self.net, seen["id"], ref_ttl)]
            if item.get("taskId"):
                actions += store.task_index_actions(self.net, item["taskId"], item, ref_ttl)
        else:
            actions = [store.renew_action(seen, expires, task_id)]
        actions.append(store.mark_action(self.pk, self.anchor_path, now))  # the mark outlives the claim
        return _result(item) if uow.commit(actions) else None

    def _decide(self, mine: dict[str, Any]) -> dict[str, Any] | None:
        """Read and decide until granted (the result), refused (ClaimConflict), or our
        announcement is gone or the budget is spent (None)."""
        while self.attempts < MAX_ATTEMPTS:
            now = clock.now_ms()
            around = store.read_around(self.pk, self.anchor, exact_only=self.req.scopeType == "task")
            current = next((i for i in around if store.sk_of(i) == self.sk), None)
            if current is None or current.get("attempt") != mine["attempt"]:
                return None
            others = [i for i in around if store.sk_of(i) != self.sk and not store.is_high_water(i)]
            overlapping = [i for i in others if self.overlaps(i["scope"])]
            rivals = [i for i in overlapping if is_active(i, now) and i["holder"].get("instanceId") != self.me]
            if current.get("state") == "granted":
                return _result(current)  # our grant committed, and its answer was lost on the way back
            if rivals or current.get("state") != "pending":
                store.withdraw(self.pk, self.sk, mine["attempt"])
                if rivals:
                    observability.count("ClaimConflict")
                    raise ClaimConflict([_conflict_view(c) for c in rivals])
                return None  # defeated by a claim that is gone already: try again
            actions = self._grant(current, around, others, overlapping, now)
            if actions is None:
                continue  # moved lapsed claims first (too many for one transaction)
            if not uow.commit(actions):
                if self._retry():
                    continue
                store.withdraw(self.pk, self.sk, mine["attempt"])
                return None
            return _result(self.granted)
        return None

    def _grant(self, current: dict[str, Any], around: list[dict[str, Any]], others: list[dict[str, Any]],
               overlapping: list[dict[str, Any]], now: int) -> list[dict[str, Any]] | None:
        token = max([now] + [int(i["fencingToken"]) + 1 for i in others if i.get("state") == "granted"]
                    + [int(i.get("tok", 0)) + 1 for i in around if store.is_high_water(i)])
        expires = now + self.req.ttlSeconds * 1000
        ref_ttl = expires // 1000 + 2 * store.KEEP_AFTER_END_S
        self.granted = tree = {**current, "state": "granted", "fencingToken": token, "expiresAt": expires,
                               "taskId": self.req.taskId, "refTtl": ref_ttl}
        must_move = [i for i in overlapping if _lapsed(i, now)]
        may_move = [i for i in others if _lapsed(i, now) and i not in must_move][:MOVE_PER_CALL]
        actions = [store.grant_action(current, token=token, expires_ms=expires, task_id=self.req.taskId,
                                      ref_ttl=ref_ttl),
                   store.ref_put(self.net, tree, ref_ttl),
                   store.high_water_action(self.pk, self.anchor_path, token, now),
                   events.event_action(self.net, "claim", self.p.actor, f"{self.p.agent} claimed "
                                       f"{self.req.scopeType} {self.scope}", claimId=tree["id"], state="claimed")]
        if self.req.taskId:
            actions += store.task_index_actions(self.net, self.req.taskId, tree, ref_ttl)
        for i in overlapping:
            if i.get("state") == "pending":
                actions.append(store.touch_action(i) if i["holder"].get("instanceId") == self.me
                               else store.defeat_action(i, tree["id"]))
        for i in must_move + may_move:
            moves = store.end_actions(self.net, i, int(i["expiresAt"]), "expired")
            if not uow.fits(actions, moves):
                if i in may_move:
                    break
                uow.commit(moves)  # an overlapping lapsed claim must leave before we are granted
                return None
            actions += moves
        return actions


def claim(principal: Principal, req: ClaimRequest) -> dict[str, Any]:
    """network_claim (PROTOCOL.md 4.9). Returns the claim view without ``holder``.

    Raises InvalidArgument (bad scope or resourceId), NotFound (unknown taskId), ClaimConflict
    (409 naming every overlapping active claim of another instance; nothing is left written),
    Conflict ``in_progress`` (still losing races after :data:`MAX_ATTEMPTS`).
    """
    scope = normalise_scope(req.scopeType, req.scope)
    resource_id = normalise_resource(req.resourceId, "resourceId") if req.resourceId else None
    if req.taskId and task_store.get(principal.network_id, req.taskId) is None:
        raise NotFound(f"no task {req.taskId!r} in this network")
    return _Claiming(principal, req, scope, resource_id).run()


# --------------------------------------------------------------------------- reading by id, task, holder


def _live(net: str, now_ms: int, wanted: Callable[[dict[str, Any]], bool] = lambda r: True) -> list[dict[str, Any]]:
    """The live claims (tree items) whose reference passes ``wanted``, oldest first: one Query of
    the references, one BatchGetItem per 100 of them."""
    return [c for c in store.trees_of(r for r in store.refs(net) if wanted(r)) if is_active(c, now_ms)]


def _of_task(net: str, task_id: str, now_ms: int) -> tuple[int, list[dict[str, Any]]]:
    """(the task head's counter, the live claims carrying ``task_id``, oldest first)."""
    counter, pointers = store.read_task(net, task_id)
    got = store.get_trees((p["treePk"], p["treeSk"]) for p in pointers)
    live = {}
    for p in pointers:
        c = got.get((p["treePk"], p["treeSk"]))
        if c is not None and c.get("id") == p["id"] and c.get("taskId") == task_id and is_active(c, now_ms):
            live[c["id"]] = c
    return counter, [live[i] for i in sorted(live)]


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
    conflicting}``; writes nothing (one Query of the references, then one BatchGetItem per 100
    claims of other instances in that namespace).

    Raises InvalidArgument naming every bad path (``paths.<i>``: empty, absolute, ``..``, a
    control character) or a bad ``resourceId``.
    """
    fields = [{"field": f"paths.{i}", "message": why} for i, p in enumerate(req.paths)
              if (why := _bad_path(p)) is not None]
    if fields:
        raise InvalidArgument("; ".join(f"{f['field']}: {f['message']}" for f in fields), fields)
    resource_id = normalise_resource(req.resourceId, "resourceId") if req.resourceId else None
    me = principal.instance_id
    theirs = [(c, globs.compile_scope(c["scope"])) for c in _live(
        principal.network_id, clock.now_ms(),
        lambda r: r["scopeType"] == "path" and r.get("resourceId") == resource_id
        and r["holder"].get("instanceId") != me)]
    results = []
    for path in req.paths:
        conflicts = [{key: v for key, v in view(c).items() if key in ("claimId", "scope", "holder", "expiresAt", "taskId")}
                     for c, pattern in theirs if globs.matches(pattern, path)]
        results.append({"path": path.strip(), "conflicts": conflicts})
    return {"results": results, "conflicting": sum(1 for r in results if r["conflicts"])}


# --------------------------------------------------------------------------- releasing


def release(principal: Principal, req: ReleaseRequest, *, any_holder: bool = False) -> dict[str, Any]:
    """network_release (PROTOCOL.md 4.10): ``{claimId, released: true}`` or ``released: false``
    with ``reason`` ``expired`` | ``already_released``.

    Raises NotFound (unknown id, or ended more than a day ago), PermissionDenied (not the holder,
    unless ``any_holder``: the representative's control_release_claim).
    """
    net = principal.network_id
    for _ in uow.attempts(MAX_ATTEMPTS):
        # The reference first, then the ended record: a move between the two reads is then seen
        # by the second (two GetItems are serialisable against the move's transaction).
        ref = store.get_ref(net, req.claimId)
        item = ref or store.get_ended(net, req.claimId)
        if item is None:
            raise NotFound(f"no claim {req.claimId!r} in this network")
        if not any_holder and item["holder"].get("instanceId") != principal.instance_id:
            raise PermissionDenied("only the holder instance may release this claim")
        if ref is None:
            reason = "expired" if item.get("endReason") == "expired" else "already_released"
            return {"claimId": req.claimId, "released": False, "reason": reason}
        if ref.get("kind") == "claim":  # a table not yet migrated (issue 25)
            migrate_network(net)
            continue
        now = clock.now_ms()
        who = principal.actor if principal.kind == "instance" else {"representative": principal.rep}
        released_event = events.event_action(net, "claim", who, f"claim {ref['scope']} of "
                                             f"{ref['holder'].get('agent')} released", claimId=req.claimId,
                                             state="released", scope=ref["scope"])
        if not uow.commit([*store.release_actions(net, ref, now), released_event]):
            tree = store.get_tree(ref["treePk"], ref["treeSk"])
            if tree is not None and tree.get("id") == ref["id"] and _lapsed(tree, now):
                return {"claimId": req.claimId, "released": False, "reason": "expired"}
            continue  # moved, renewed or released meanwhile: look again
        return {"claimId": req.claimId, "released": True}
    raise Conflict("in_progress", "the claim keeps changing; retry", headers={"Retry-After": "1"})


def active_for_task(net: str, task_id: str) -> list[dict[str, Any]]:
    """Active claims carrying ``task_id`` (for network_task_get), oldest first: one Query of the
    task's index and one BatchGetItem."""
    return [view(c) for c in _of_task(net, task_id, clock.now_ms())[1]]


class _TaskRelease:
    """The claims of a task that became terminal (PROTOCOL.md 4.8), as relaynet.tasks.update
    takes them (its ``TerminalRelease``)."""

    def actions(self, net: str, task_id: str, now_ms: int) -> list[dict[str, Any]]:
        """The actions releasing every active claim carrying ``task_id``, for the task's own
        transaction: one strongly consistent Query of the task's claim index (its head first) and
        one BatchGetItem, then a ConditionCheck of the task's head counter as read (a claim granted
        or renewed for this task meanwhile cancels the transaction, so none taken before the move
        commits survives it; claims elsewhere in the network never do) and 4 actions per claim (a
        claim released meanwhile cancels it too, ``expiresAt = :seen``)."""
        counter, live = _of_task(net, task_id, now_ms)
        return [store.task_head_check(net, task_id, counter), *(a for c in live for a in _hub_release(net, c, now_ms))]

    def __call__(self, net: str, task_id: str) -> int:
        """Release every active claim carrying ``task_id``, each in its own transaction. Returns how many."""
        return _release_each(net, _of_task(net, task_id, clock.now_ms())[1], lambda c: c.get("taskId") == task_id)


#: relaynet.tasks.update's ``on_terminal`` (network_task_update, tasks, control_cancel_task).
release_for_task = _TaskRelease()


def release_for_holder(net: str, instance_id: str) -> int:
    """Release every active claim an instance holds (control_stop_agent, PROTOCOL.md 6). Returns how many."""
    mine = _live(net, clock.now_ms(), lambda r: r["holder"].get("instanceId") == instance_id)
    return _release_each(net, mine, lambda c: c["holder"].get("instanceId") == instance_id)


def active_for_network(net: str) -> list[dict[str, Any]]:
    """Every active claim of the network (control status and graph), oldest first."""
    return [view(c) for c in _live(net, clock.now_ms())]


def _hub_release(net: str, item: dict[str, Any], now_ms: int) -> list[dict[str, Any]]:
    """The actions of the hub releasing ``item``: its move to the ended partition and the event."""
    return [*store.end_actions(net, {**item, "releasedAt": now_ms}, now_ms, "released"),
            events.event_action(net, "claim", {"system": "router"}, f"claim {item['scope']} of "
                                f"{item['holder'].get('agent')} released by the hub", claimId=item["id"],
                                state="released", scope=item["scope"])]


def holder_release_actions(net: str, instance_id: str, now_ms: int) -> tuple[int, list[dict[str, Any]]]:
    """(how many, the transaction actions releasing every active claim ``instance_id`` holds):
    one Query of the references and one BatchGetItem, 4 actions per claim (control_stop_agent's
    one transaction; a claim renewed meanwhile cancels it, ``expiresAt = :seen``)."""
    mine = _live(net, now_ms, lambda r: r["holder"].get("instanceId") == instance_id)
    return len(mine), [a for c in mine for a in _hub_release(net, c, now_ms)]


def _release_each(net: str, items: list[dict[str, Any]], wanted: Callable[[dict[str, Any]], bool]) -> int:
    released = 0
    for c in items:
        item = c
        for _ in uow.attempts(MAX_ATTEMPTS):
            now = clock.now_ms()
            if not is_active(item, now):
                break
            if not uow.commit(_hub_release(net, item, now)):  # renewed, released or moved meanwhile
                item = store.get_tree(*store.tree_key(c))
                if item is None or item.get("id") != c["id"] or not wanted(item):
                    break
                continue
            released += 1
            break
    return released


# --------------------------------------------------------------------------- the layout before issue 25


def migrate_network(net: str) -> int:
    """Move a network's claims from the layout before issue 25 (every claim under one HEAD
    counter in ``NET#<net>#CLAIMS``) into the claim tree: a live claim keeps its id, holder,
    expiry, task and fencing token (the mark of its anchor records it); a lapsed one moves to the
    ended partition; HEAD is deleted last. Idempotent, and safe beside live traffic: each claim
    moves in one transaction conditioned on the old item as read. Returns how many moved live."""
    head, old = store.legacy_claims(net)
    moved = 0
    for item in old:
        now = clock.now_ms()
        if not is_active(item, now):
            uow.commit(store.migrate_actions(net, item, None, 0))  # released meanwhile: nothing to move
            continue
        pk = store.tree_pk(net, item["scopeType"], item.get("resourceId"))
        at = anchor(item["scopeType"], item["scope"])
        ref_ttl = int(item["expiresAt"]) // 1000 + 2 * store.KEEP_AFTER_END_S
        sk = store.tree_sk("/".join(at), item["holder"].get("instanceId", ""), item["scope"])
        tree = {**store.rekeyed(item, pk, sk, drop=("kind", "ttl")),
                "kind": "claim", "state": "granted", "attempt": "migrated", "rev": 0, "anchor": "/".join(at),
                "refTtl": ref_ttl, "ttl": int(item["expiresAt"]) // 1000 + store.KEEP_AFTER_END_S}
        actions = [*store.migrate_actions(net, item, tree, ref_ttl),
                   store.high_water_action(pk, "/".join(at), int(item["fencingToken"]), now)]
        if item.get("taskId"):
            actions += store.task_index_actions(net, item["taskId"], tree, ref_ttl)
        if uow.commit(actions):
            moved += 1
        # else: released or renewed meanwhile by a hub that is not migrated: the next run moves it
    if head is not None and not store.legacy_claims(net)[1]:
        store.delete_head(net)
    return moved


def migrate() -> int:
    """:func:`migrate_network` for every network of the table (relaynet serve runs it at start).
    Returns how many live claims moved."""
    return sum(migrate_network(net) for net in store.networks())
