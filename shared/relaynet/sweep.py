"""The routing sweep (PROTOCOL.md 7): expired offers go back to pending (and on to another
eligible instance when there is one), pending tasks are offered.

Due tasks are read from the sparse GSI1 (``ROUTE``, sorted by due time): a pending task is due
from its creation, an offered one at ``offerExpiresAt``. A pending task that finds nobody eligible
is pushed to the back of the queue (due = now), so a run never restarts from the same stuck tasks.
Every move is a conditional put on the task's version: two overlapping runs never offer one task
twice; the loser skips it.
"""

from __future__ import annotations

from typing import Any

from relaynet import clock, routing
from relaynet.config import settings
from relaynet.directory import Directory, load
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.tasks import _save, expire_offer_actions, offer_actions


def run(now_ms: int | None = None, batch: int | None = None) -> dict[str, int]:
    """One sweep over at most ``batch`` due tasks. Returns counts:
    ``{"seen", "offered", "expired", "requeued", "lost_races"}``."""
    now = clock.now_ms() if now_ms is None else now_ms
    limit = batch or settings().sweep_batch
    due = t.query(k.ROUTE, index="GSI1", sk_between=("0", f"{now:013d}~"), limit=limit)
    directories: dict[str, Directory] = {}
    stats = {"seen": 0, "offered": 0, "expired": 0, "requeued": 0, "lost_races": 0}
    for task in due:
        stats["seen"] += 1
        net = task["networkId"]
        if net not in directories:
            directories[net] = load(net)
        for outcome in _route(task, directories[net], now):
            stats[outcome] += 1
    return stats


def _route(task: dict[str, Any], d: Directory, now: int) -> list[str]:
    """Route one due task; returns what happened (``expired``, ``offered``, ``requeued``, ``lost_races``)."""
    version = int(task["version"])
    actions: list[dict[str, Any]] = []
    outcomes: list[str] = []
    if task["state"] == "offered":
        if int(task.get("offerExpiresAt", 0)) > now:
            return []
        actions += expire_offer_actions(task, now)
        inst = d.instances.get(task["declined"][-1])
        if inst is not None and inst.get("active"):
            inst["active"].discard(task["id"])
        outcomes.append("expired")
    elif task["state"] != "pending":
        return []
    chosen = routing.choose(task, d, now)
    if chosen is not None:
        actions += offer_actions(task, chosen, now)
        outcomes.append("offered")
    elif not outcomes:
        # Nobody eligible: move to the back of the queue; a lost race here changes nothing.
        t.update(*k.task(task["networkId"], task["id"]), "SET dueAt = :now, GSI1SK = :sk",
                 condition="version = :v AND #s = :pending", names={"#s": "state"},
                 now=now, sk=k.route_sk(now, task["networkId"], task["id"]), v=version, pending="pending")
        return ["requeued"]
    else:
        task["dueAt"] = now
    try:
        t.transact([_save(task, version, now), *actions])
    except t.TransactionCancelled:
        if chosen is not None:
            chosen.get("active", set()).discard(task["id"])
        return ["lost_races"]
    return outcomes
