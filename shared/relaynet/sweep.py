"""The routing sweep (PROTOCOL.md 7): expired offers go back to pending and on to another eligible
instance when there is one; pending tasks are offered; pending tasks nobody is eligible for are
parked, and offered as soon as someone is.

A run has two phases, each bounded by ``batch`` tasks (``RELAYNET_SWEEP_BATCH``, default 500)
and both by a time budget, all read through the sparse GSI1, never a scan:

1. *Due*: Query ``ROUTE`` for ``GSI1SK <= now``, oldest first: offers whose ``offerExpiresAt``
   passed and pending tasks not yet routed (returned by a stopped instance). Each is offered (an
   expired offer to an instance that has not let it expire, while one exists) or, when nobody is
   eligible, parked in its wait group; either way it leaves the due range, so stuck tasks never
   come back to the front of it.
2. *Wake*: Query the ``WAITING`` markers (one per wait group: tasks with the same target and
   creator exclusions, hence eligible for exactly the same instances), check each group against
   its network's directory (loaded once per run), and Query only the groups someone is eligible
   for now, sharing the budget fairly between them. A task whose target gains a live instance is
   offered by the first run that starts after that (the second, if it was parked during a run).
   Stuck groups cost one marker read per run, never a read or write of their tasks. Empty
   groups' markers are deleted (conditionally: nobody parked meanwhile); a group nobody is
   eligible for is checked for emptiness at most every 10 minutes (one Query of one item).

Every move is a conditional put on the task's version (relaynet.tasks), so two overlapping runs
never offer one task twice: the loser of each race skips that task (``lost_races``).
"""

from __future__ import annotations

import random
import time
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from relaynet import clock, routing
from relaynet.config import settings
from relaynet.directory import Directory, load
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.tasks import Before, expire_offer, instance_update, offer_actions, park, save

log = Logger(child=True)  # relaynet.observability.logger's child: "<service>.sweep"

TIME_BUDGET_S = 40.0  # the function's Timeout is 60 s; what is left waits for the next run
MARKER_GRACE_MS = 60_000  # an empty group's marker is deleted only when nobody parked in it lately
EMPTY_CHECK_MS = 600_000  # how often a group nobody is eligible for is checked for being empty


class _Run:
    def __init__(self, now: int, deadline: float):
        self.now = now
        self.deadline = deadline
        self.directories: dict[str, Directory] = {}
        self.stats = {"seen": 0, "offered": 0, "expired": 0, "parked": 0, "lost_races": 0, "errors": 0,
                      "groups": 0, "groups_ready": 0, "groups_closed": 0}

    def directory(self, net: str) -> Directory:
        if net not in self.directories:
            self.directories[net] = load(net)
        return self.directories[net]

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def route(self, task: dict[str, Any]) -> None:
        self.stats["seen"] += 1
        try:
            for outcome in _route(task, self.directory(task["networkId"]), self.now):
                self.stats[outcome] += 1
        except ClientError:  # one bad task (e.g. an oversized item) never stops the run
            log.exception("sweep could not route task %s", task.get("id"))
            self.stats["errors"] += 1


def run(now_ms: int | None = None, batch: int | None = None, time_budget_s: float | None = None) -> dict[str, int]:
    """One sweep: at most ``batch`` due tasks, then at most ``batch`` parked tasks of ready groups.

    Returns counts: ``seen`` (tasks looked at), ``offered``, ``expired`` (offers that went back to
    pending), ``parked``, ``lost_races`` (another writer moved the task first), ``errors``,
    ``groups`` / ``groups_ready`` / ``groups_closed`` (wait groups read / with someone eligible /
    whose marker was deleted).
    """
    now = clock.now_ms() if now_ms is None else now_ms
    limit = max(1, batch or settings().sweep_batch)
    r = _Run(now, time.monotonic() + (TIME_BUDGET_S if time_budget_s is None else time_budget_s))
    for task in t.query(k.ROUTE, index="GSI1", sk_between=("0", f"{now:013d}~"), limit=limit):
        if r.out_of_time():
            break
        r.route(task)
    _wake(r, limit)
    return r.stats


def _wake(r: _Run, limit: int) -> None:
    """Phase 2: offer parked tasks of the wait groups someone is now eligible for."""
    ready = []
    for marker in t.query(k.WAITING, index="GSI1"):
        r.stats["groups"] += 1
        if routing.any_eligible(marker["probe"], r.directory(marker["networkId"]), r.now):
            ready.append(marker)
        elif _quiet(r, marker) and int(marker.get("lastCheckedAt", 0)) <= r.now - EMPTY_CHECK_MS:
            if _empty(marker):
                _close(r, marker)
            else:  # still waiting for someone: look again in a while
                t.update(marker["PK"], marker["SK"], "SET lastCheckedAt = :now", condition="attribute_exists(PK)",
                         now=r.now)
    r.stats["groups_ready"] = len(ready)
    random.shuffle(ready)  # no group is always last in line when the budget runs out
    budget = limit
    for n, marker in enumerate(ready):
        if budget <= 0 or r.out_of_time():
            break
        share = -(-budget // (len(ready) - n))  # the rest, shared by the groups still to go
        parked = t.query(k.wait_pk(marker["networkId"], marker["waitKey"]), index="GSI1", limit=share)
        if not parked and _quiet(r, marker):
            _close(r, marker)
        for task in parked:
            if r.out_of_time():
                break
            r.route(task)
            budget -= 1


def _quiet(r: _Run, marker: dict[str, Any]) -> bool:
    """Nobody parked in the group within the grace (so an empty index really means empty)."""
    return int(marker.get("lastParkedAt", 0)) <= r.now - MARKER_GRACE_MS


def _empty(marker: dict[str, Any]) -> bool:
    return not t.query(k.wait_pk(marker["networkId"], marker["waitKey"]), index="GSI1", limit=1)


def _close(r: _Run, marker: dict[str, Any]) -> None:
    """Delete the marker of an empty wait group, unless a task was parked in it since it was read."""
    try:
        t.transact([t.tx_delete(marker["PK"], marker["SK"], "gen = :gen", gen=marker.get("gen", 0))])
        r.stats["groups_closed"] += 1
    except t.TransactionCancelled:
        pass  # parked in meanwhile (or closed by another run)


def _route(task: dict[str, Any], d: Directory, now: int) -> list[str]:
    """Route one task read from GSI1; returns what happened (``expired``, ``offered``, ``parked``,
    ``lost_races``; nothing when there was nothing to do)."""
    before = Before(task)
    net = task["networkId"]
    actions: list[dict[str, Any]] = []
    outcomes: list[str] = []
    expired_from = None
    if task["state"] == "offered":
        if int(task.get("offerExpiresAt", 0)) > now:
            return []
        expired_from = expire_offer(task, now)
        actions.append(instance_update(net, expired_from, task["id"], remove=("active", "held")))
        old = d.instances.get(expired_from)
        if old is not None:
            (old.get("active") or set()).discard(task["id"])
        outcomes.append("expired")
    elif task["state"] != "pending":
        return []
    chosen = routing.choose(task, d, now)
    if chosen is not None:
        if chosen["id"] == expired_from:  # offered again to the same instance: one update of it
            actions.clear()
        actions += offer_actions(task, chosen, now)
        outcomes.append("offered")
    elif before.wait is not None and before.wait == routing.wait_key(task):
        return []  # already parked where it belongs
    else:
        park(task, now)
        outcomes.append("parked")
    try:
        t.transact([*save(task, before, now), *actions])
    except t.TransactionCancelled:
        if chosen is not None:
            (chosen.get("active") or set()).discard(task["id"])
        if expired_from is not None and expired_from in d.instances:
            d.instances[expired_from].setdefault("active", set()).add(task["id"])
        return ["lost_races"]
    return outcomes
