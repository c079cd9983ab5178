"""The routing sweep (PROTOCOL.md 7): expired offers go back to pending and on to another eligible
instance when there is one; pending tasks are offered; pending tasks nobody is eligible for are
parked, and offered as soon as someone is.

A run has two phases, each bounded by ``batch`` tasks (``RELAYNET_SWEEP_BATCH``, default 500)
and both by a time budget, all read through the sparse routing index (relaynet.store.tasks),
never a scan:

1. *Due*: Query every routing shard (store.tasks.routing_partitions: the shards and the
   pre-shard partition) for the tasks due by now, oldest first, in parallel, each for its share
   of the batch; what a shard with fewer due tasks leaves over goes to the shards that have more
   (:func:`_due`). These are offers whose ``offerExpiresAt`` passed and pending tasks not yet
   routed. Each is offered (an expired offer to an instance that has not let it expire, while
   one exists) or, when nobody is eligible, parked in its wait group; either way it leaves the
   due range, so stuck tasks never come back to the front of it.
2. *Wake*: Query the wait-marker shards (store.tasks.marker_partitions; one marker per wait
   group: tasks with the same target and creator exclusions, hence eligible for exactly the
   same instances) in parallel, check each group against its network's directory (loaded once
   per run), and Query only the groups someone is eligible for now, sharing the budget fairly
   between them, so a network with 10,000 waiting tasks never starves another's single task. A
   task whose target gains a live instance is offered by the first run that starts after that
   (the second, if it was parked during a run). Stuck groups cost one marker read per run, never
   a read or write of their tasks. Empty groups' markers are deleted (conditionally: nobody
   parked meanwhile); a group nobody is eligible for is checked for emptiness at most every 10
   minutes (one Query of one item).

The writes run in parallel too (:func:`_route_all`): the tasks of one network in order in one
job (they share its directory, whose load counts decide who gets the next offer), the networks'
jobs on a pool of :data:`WORKERS` threads. Every move is a conditional put on the task's version
(relaynet.tasks), so two overlapping runs never offer one task twice: the loser of each race
skips that task (``lost_races``).
"""

from __future__ import annotations

import contextvars
import random
import time
from collections import Counter
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Iterable, TypeVar

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from relaynet import clock, routing
from relaynet.config import settings
from relaynet.directory import Directory, load
from relaynet.store import tasks as store
from relaynet.store import unit_of_work as uow
from relaynet.tasks import Before, expire_offer, instance_update, offer_actions, park, save

log = Logger(child=True)  # relaynet.observability.logger's child: "<service>.sweep"

TIME_BUDGET_S = 40.0  # the function's Timeout is 60 s; what is left waits for the next run
MARKER_GRACE_MS = 60_000  # an empty group's marker is deleted only when nobody parked in it lately
EMPTY_CHECK_MS = 600_000  # how often a group nobody is eligible for is checked for being empty
#: Threads of one run: shard Queries, directory loads and the networks' write jobs. Bounded so a
#: run holds at most this many DynamoDB requests in flight (the client's pool holds 50).
WORKERS = 8
DUE_ROUNDS = 4  # rounds of redistributing the due phase's budget to shards that have more

_T = TypeVar("_T")
_R = TypeVar("_R")


class _Run:
    def __init__(self, now: int, deadline: float, pool: Executor):
        self.now = now
        self.deadline = deadline
        self.pool = pool
        self.directories: dict[str, Directory] = {}
        self.stats = {"seen": 0, "offered": 0, "expired": 0, "parked": 0, "lost_races": 0, "errors": 0,
                      "groups": 0, "groups_ready": 0, "groups_closed": 0}

    def map(self, fn: Callable[[_T], _R], args: Iterable[_T]) -> list[_R]:
        """``fn`` over ``args`` on the run's pool, results in order. Each call runs in a copy of
        the caller's context, so the entry point's declared DynamoDB actions hold in it."""
        futures = [self.pool.submit(contextvars.copy_context().run, fn, arg) for arg in args]
        return [f.result() for f in futures]

    def directory(self, net: str) -> Directory:
        if net not in self.directories:
            self.directories[net] = load(net)
        return self.directories[net]

    def load_directories(self, nets: Iterable[str]) -> None:
        """Load the directories of ``nets`` not loaded yet, in parallel."""
        missing = sorted(set(nets) - set(self.directories))
        for net, d in zip(missing, self.map(load, missing)):
            self.directories[net] = d

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline


def run(now_ms: int | None = None, batch: int | None = None, time_budget_s: float | None = None) -> dict[str, int]:
    """One sweep: at most ``batch`` due tasks, then at most ``batch`` parked tasks of ready groups.

    Returns counts: ``seen`` (tasks looked at), ``offered``, ``expired`` (offers that went back to
    pending), ``parked``, ``lost_races`` (another writer moved the task first), ``errors``,
    ``groups`` / ``groups_ready`` / ``groups_closed`` (wait groups read / with someone eligible /
    whose marker was deleted).
    """
    now = clock.now_ms() if now_ms is None else now_ms
    limit = max(1, batch or settings().sweep_batch)
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="sweep") as pool:
        r = _Run(now, time.monotonic() + (TIME_BUDGET_S if time_budget_s is None else time_budget_s), pool)
        _route_all(r, _due(r, limit))
        _wake(r, limit)
    return r.stats


def _due(r: _Run, limit: int) -> list[dict[str, Any]]:
    """Phase 1's tasks: at most ``limit`` due items over every routing shard, oldest first in
    each. Each shard is asked for an equal share (one Query each, in parallel); the budget a
    shard did not use goes, in up to :data:`DUE_ROUNDS` rounds, to the shards that had more."""
    low = {pk: "0" for pk in store.routing_partitions()}  # where each shard's next Query starts
    out: list[dict[str, Any]] = []
    for _ in range(DUE_ROUNDS):
        budget = limit - len(out)
        if budget <= 0 or not low or r.out_of_time():
            break
        share = -(-budget // len(low))
        shards = list(low)

        def page(pk: str) -> tuple[list[dict[str, Any]], bool]:
            return store.due_page(pk, low[pk], r.now, share)

        for pk, (items, more) in zip(shards, r.map(page, shards)):
            out += items
            if more and items:
                low[pk] = store.routing_position(items[-1]) + " "  # just past the last one read (ids use no space)
            else:
                del low[pk]
    return sorted(out, key=store.routing_position)[:limit]  # oldest first across the shards


def _route_all(r: _Run, tasks: list[dict[str, Any]]) -> None:
    """Route ``tasks``: one job per network (its tasks in the order given, against its directory),
    the jobs in parallel on the run's pool; adds the outcomes to the run's stats."""
    by_net: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_net.setdefault(task["networkId"], []).append(task)

    def job(net: str) -> Counter[str]:
        counts: Counter[str] = Counter()
        for task in by_net[net]:
            if r.out_of_time():
                break
            counts["seen"] += 1
            try:
                counts.update(_route(task, r.directory(net), r.now))
            except ClientError:  # one bad task (e.g. an oversized item) never stops the run
                log.exception("sweep could not route task %s", task.get("id"))
                counts["errors"] += 1
        return counts

    for counts in r.map(job, list(by_net)):
        for key, n in counts.items():
            r.stats[key] += n


def _wake(r: _Run, limit: int) -> None:
    """Phase 2: offer parked tasks of the wait groups someone is now eligible for."""
    markers = [m for shard in r.map(store.markers, store.marker_partitions()) for m in shard]
    r.load_directories(m["networkId"] for m in markers)
    ready = []
    for marker in markers:
        r.stats["groups"] += 1
        if routing.any_eligible(marker["probe"], r.directory(marker["networkId"]), r.now):
            ready.append(marker)
        elif _quiet(r, marker) and int(marker.get("lastCheckedAt", 0)) <= r.now - EMPTY_CHECK_MS:
            if store.group_empty(marker):
                _close(r, marker)
            else:  # still waiting for someone: look again in a while
                store.mark_checked(marker, r.now)
    r.stats["groups_ready"] = len(ready)
    random.shuffle(ready)  # no group is always last in line when the budget runs out
    found = _parked(r, ready, limit)
    for marker, tasks in zip(ready, found):
        if tasks is not None and not tasks and _quiet(r, marker):
            _close(r, marker)
    _route_all(r, [task for tasks in found if tasks for task in tasks])


def _parked(r: _Run, ready: list[dict[str, Any]], limit: int) -> list[list[dict[str, Any]] | None]:
    """The parked tasks to route of each ready group (None for a group never queried), oldest
    first in each group: the budget shared fairly between the groups (:func:`_shares`), one
    Query per group in parallel; what a group with fewer tasks left over goes, in up to
    :data:`DUE_ROUNDS` rounds, to the groups not yet served and then to those that had more."""
    found: list[list[dict[str, Any]] | None] = [None] * len(ready)
    after: dict[int, str] = {}  # group -> routing position of the last task read from it
    todo = list(range(len(ready)))  # groups that may have more, those never queried first
    budget = limit
    for _ in range(DUE_ROUNDS):
        shares = _shares(len(todo), budget)
        if not shares or r.out_of_time():
            break
        served = todo[:len(shares)]

        def page(i: int) -> list[dict[str, Any]]:
            n = served[i]
            return store.parked_page(ready[n], shares[i], after.get(n))

        full = []
        for i, tasks in enumerate(r.map(page, range(len(served)))):
            n = served[i]
            found[n] = (found[n] or []) + tasks
            budget -= len(tasks)
            if len(tasks) == shares[i]:
                after[n] = store.routing_position(tasks[-1])
                full.append(n)
        todo = [n for n in todo[len(shares):]] + full
    return found


def _shares(groups: int, budget: int) -> list[int]:
    """The fair split of ``budget`` tasks between ``groups`` ready groups (in their shuffled
    order): equal shares, the first ``budget % groups`` one larger; at most ``budget`` groups get
    a share (one task each) when there are more groups than budget."""
    if groups <= 0 or budget <= 0:
        return []
    groups = min(groups, budget)
    base, extra = divmod(budget, groups)
    return [base + (1 if n < extra else 0) for n in range(groups)]


def _quiet(r: _Run, marker: dict[str, Any]) -> bool:
    """Nobody parked in the group within the grace (so an empty index really means empty)."""
    return int(marker.get("lastParkedAt", 0)) <= r.now - MARKER_GRACE_MS


def _close(r: _Run, marker: dict[str, Any]) -> None:
    """Delete the marker of an empty wait group, unless a task was parked in it since it was read."""
    if store.close_marker(marker):
        r.stats["groups_closed"] += 1


def _route(task: dict[str, Any], d: Directory, now: int) -> list[str]:
    """Route one task read from the routing index; returns what happened (``expired``, ``offered``, ``parked``,
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
    if not uow.commit([*save(task, before, now), *actions]):
        if chosen is not None:
            (chosen.get("active") or set()).discard(task["id"])
        if expired_from is not None and expired_from in d.instances:
            d.instances[expired_from].setdefault("active", set()).add(task["id"])
        return ["lost_races"]
    return outcomes
