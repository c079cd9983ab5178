"""The tasks repository: the task item (``NET#<net>#TASK#<id>`` / ``META``) with its artifacts, its
place in the routing index (GSI1: its routing shard ``ROUTE#<n>`` or its wait group) and the listing index (GSI2), wait
group markers, and the instance bookkeeping (``active``/``held`` sets) a task write carries.

relaynet.tasks and relaynet.sweep decide a task's next state in memory (the task is its protocol
document, PROTOCOL.md 4.7, plus ``version``, ``wait``, ``parkedAt``, ``dueAt``, ``declined``);
this module turns that document into its item and its conditional writes (docs/architecture.md
"The table"). Every write of a task is conditional on the version it was read at.
"""

from __future__ import annotations

from typing import Any, Iterator

from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.store import unit_of_work as uow


_ART = "ART#"


class Before:
    """What a task looked like when it was read: its ``version`` (None: a new task), the wait group
    it was parked in, its ``state`` and ``assignee`` (to tell a lost race from a conflict)."""

    __slots__ = ("version", "wait", "state", "assignee")

    def __init__(self, task: dict[str, Any] | None):
        task = task or {}
        self.version = int(task["version"]) if task.get("version") is not None else None
        self.wait = task.get("wait") if task.get("state") == "pending" else None
        self.state = task.get("state")
        self.assignee = task.get("assignee")


def item(task: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The stored item for ``task``: keys, listing index and, while routable, the routing index
    (``offered``: due at ``offerExpiresAt``; ``pending``: due at ``dueAt``, or parked under its
    wait group when ``wait`` is set)."""
    net = task["networkId"]
    pk, sk = k.task(net, task["id"])
    out = {key: value for key, value in task.items() if key not in ("GSI1PK", "GSI1SK")}
    out.update(PK=pk, SK=sk, GSI2PK=k.tasks_index(net), GSI2SK=task["id"])
    if task["state"] == "pending" and task.get("wait"):
        out["GSI1PK"], out["GSI1SK"] = k.wait_pk(net, task["wait"]), k.wait_sk(int(task["parkedAt"]), task["id"])
    elif task["state"] == "pending":
        out["GSI1PK"], out["GSI1SK"] = k.route_pk(net, task["id"]), k.route_sk(int(task.get("dueAt", now_ms)), net, task["id"])
    elif task["state"] == "offered":
        out["GSI1PK"], out["GSI1SK"] = k.route_pk(net, task["id"]), k.route_sk(int(task["offerExpiresAt"]), net, task["id"])
    return out


def _document(stored: dict[str, Any]) -> dict[str, Any]:
    """The task document of a stored item (keys and index attributes left out)."""
    return {key: v for key, v in stored.items() if key not in ("PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK")}


# --------------------------------------------------------------------------- reads

def get(net: str, task_id: str) -> dict[str, Any] | None:
    """The stored task (strongly consistent GetItem), or None."""
    return t.get(*k.task(net, task_id))


def exists(net: str, task_id: str) -> bool:
    """Whether the task exists: eventually consistent, confirmed strongly before answering no."""
    pk, sk = k.task(net, task_id)
    return (t.get(pk, sk, consistent=False) or t.get(pk, sk)) is not None


def many(net: str, task_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{task id: stored task}`` of those that exist (one strongly consistent BatchGetItem per 100)."""
    got = t.batch_get([k.task(net, i) for i in task_ids]) if task_ids else {}
    return {i: got[k.task(net, i)] for i in task_ids if k.task(net, i) in got}


def with_artifacts(net: str, task_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the stored task or None, its artifact items oldest first): one Query of the task's partition."""
    items = t.query(k.task_pk(net, task_id))
    task = next((i for i in items if i["SK"] == k.META), None)
    return task, [i for i in items if i["SK"].startswith(_ART)]


def all_of_network(net: str) -> list[dict[str, Any]]:
    """Every task of the network, newest first (the listing index GSI2, paged)."""
    return t.query(k.tasks_index(net), index="GSI2", forward=False)


def newest(net: str, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` newest tasks of the network (GSI2)."""
    return t.query(k.tasks_index(net), index="GSI2", forward=False, limit=limit)


def walk_newest(net: str, before_id: str | None, page_size: int) -> Iterator[dict[str, Any]]:
    """The network's tasks newest first, lazily, those with ids below ``before_id`` when given (a
    list cursor's position), ``page_size`` per Query."""
    return t.iterate(k.tasks_index(net), index="GSI2", forward=False, sk_lt=before_id, page_size=page_size)


def walk_recent(net: str, at_or_before: str | None, page_size: int) -> Iterator[dict[str, Any]]:
    """The network's tasks newest *update* first, lazily (GSI4: the listing partition by
    ``updatedAt``), those updated at or before ``at_or_before`` (an ``updatedAt``) when given,
    ``page_size`` per Query. ``updatedAt`` is fixed-width (relaynet.clock.iso), so ``< at + "~"``
    is ``<= at``. Tasks updated in the same millisecond come in no defined order."""
    return t.iterate(k.tasks_index(net), index="GSI4", forward=False,
                     sk_lt=at_or_before + "~" if at_or_before else None, page_size=page_size)


def parked(net: str, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` parked pending tasks of the network, group by group (its wait markers, then
    GSI1 of each group, oldest first within a group)."""
    out: list[dict[str, Any]] = []
    for marker in t.query(k.wait_marker(net, "")[0]):
        if len(out) >= limit:
            break
        out += t.query(k.wait_pk(net, marker["SK"]), index="GSI1", limit=limit - len(out))
    return out


# --------------------------------------------------------------------------- writes

def touch_marker(task: dict[str, Any], probe: dict[str, Any], now_ms: int) -> None:
    """Create or refresh the marker of the wait group ``task`` is about to be parked in (a plain
    UpdateItem outside the task's transaction: ``probe`` is what the sweep checks eligibility
    with, ``gen`` bumped, ``lastParkedAt`` now).

    Written before the task, so a parked task always has a marker: the sweep deletes a marker
    only when its group is empty and ``lastParkedAt`` is older than its grace (60 s, longer than
    any API call may run), and only if ``gen`` did not move since it looked.
    """
    net, wait = task["networkId"], task["wait"]
    t.update(*k.wait_marker(net, wait),
             "SET probe = :probe, networkId = :net, waitKey = :wk, GSI1PK = :gpk, GSI1SK = :gsk, "
             "lastParkedAt = :now ADD gen :one",
             probe=probe, net=net, wk=wait, gpk=k.waiting_pk(net, wait), gsk=k.waiting_sk(net, wait), now=now_ms, one=1)


def put(task: dict[str, Any], before: Before, now_ms: int) -> dict[str, Any]:
    """The conditional put of ``task`` (new: ``attribute_not_exists``; else on ``before.version``),
    setting its ``version`` to the next one."""
    if before.version is None:
        task["version"] = 1
        return t.tx_put(item(task, now_ms), "attribute_not_exists(PK)")
    task["version"] = before.version + 1
    return t.tx_put(item(task, now_ms), "version = :v", v=before.version)


def instance_sets(net: str, inst_id: str, task_id: str, add: tuple[str, ...] = (),
                  remove: tuple[str, ...] = ()) -> dict[str, Any]:
    """One update of an instance's ``active``/``held`` sets (an instance appears once per
    transaction); an update that adds is conditional on the instance existing."""
    parts = []
    removes = [s for s in remove if s not in add]
    if add:
        parts.append("ADD " + ", ".join(f"{s} :tid" for s in add))
    if removes:
        parts.append("DELETE " + ", ".join(f"{s} :tid" for s in removes))
    cond = "attribute_exists(PK)" if add else None
    return t.tx_update(*k.instance(net, inst_id), " ".join(parts), cond, tid={task_id})


def forget_on_instance(net: str, inst_id: str, task_id: str) -> None:
    """Take ``task_id`` out of the instance's ``active`` and ``held`` sets (a plain UpdateItem)."""
    t.update(*k.instance(net, inst_id), "DELETE active :tid, held :tid", tid={task_id})


def offer_to_instance(net: str, inst_id: str, task_id: str, now_ms: int) -> dict[str, Any]:
    """The instance's side of an offer: ``task_id`` into ``active``, ``lastOfferedAt`` now;
    conditional on the instance existing and not being stopped."""
    return t.tx_update(*k.instance(net, inst_id), "ADD active :tid SET lastOfferedAt = :now",
                       "attribute_exists(PK) AND #st <> :stopped", names={"#st": "status"},
                       tid={task_id}, now=now_ms, stopped="stopped")


# --------------------------------------------------------------------------- the routing index (the sweep's reads)

def routing_partitions() -> list[str]:
    """Every GSI1 partition holding due tasks: the :data:`keys.ROUTE_SHARDS` routing shards, then
    the pre-shard ``ROUTE`` an older hub wrote (swept until empty, never migrated)."""
    return [*k.route_pks(), k.ROUTE]


def marker_partitions() -> list[str]:
    """Every GSI1 partition holding wait-group markers: the shards, then the pre-shard ``WAITING``."""
    return [*k.waiting_pks(), k.WAITING]


def due_page(pk: str, low: str, now_ms: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """(at most ``limit`` task items of routing partition ``pk`` due by ``now_ms`` with GSI1SK
    from ``low`` on, oldest first; whether the partition may hold more): one Query."""
    return t.query(pk, index="GSI1", sk_between=(low, f"{now_ms:013d}~"), limit=limit, one_page=True)


def markers(pk: str) -> list[dict[str, Any]]:
    """The wait-group markers of marker partition ``pk`` (all pages)."""
    return t.query(pk, index="GSI1")


def parked_page(marker: dict[str, Any], limit: int, after: str | None = None) -> list[dict[str, Any]]:
    """At most ``limit`` tasks parked in ``marker``'s wait group, oldest first, after GSI1SK
    ``after`` when given."""
    pk = k.wait_pk(marker["networkId"], marker["waitKey"])
    if after is not None:
        return t.query(pk, index="GSI1", sk_gt=after, limit=limit)
    return t.query(pk, index="GSI1", limit=limit)


def group_empty(marker: dict[str, Any]) -> bool:
    """Whether no task is parked in ``marker``'s wait group (one Query of one item)."""
    return not t.query(k.wait_pk(marker["networkId"], marker["waitKey"]), index="GSI1", limit=1)


def mark_checked(marker: dict[str, Any], now_ms: int) -> None:
    """Record that the sweep found ``marker``'s group still waiting (``lastCheckedAt``), if the marker exists."""
    t.update(marker["PK"], marker["SK"], "SET lastCheckedAt = :now", condition="attribute_exists(PK)", now=now_ms)


def close_marker(marker: dict[str, Any]) -> bool:
    """Delete ``marker`` unless a task was parked in its group since it was read (``gen`` moved);
    False when it was not deleted (parked in meanwhile, or closed by another run)."""
    try:
        t.transact([t.tx_delete(marker["PK"], marker["SK"], "gen = :gen", gen=marker.get("gen", 0))])
    except t.TransactionCancelled:
        return False
    return True



def artifacts_of_network(net: str) -> list[dict[str, Any]]:
    """Every artifact item of the network, newest first (GSI2 ``NET#<net>#ARTS``, paged)."""
    return t.query(k.artifacts_index(net), index="GSI2", forward=False)


def publish_artifact(net: str, artifact: dict[str, Any]) -> bool:
    """Put an artifact document (``{artifactId, uri, label, type, taskId, ref, publisher,
    createdAt}``) under its task (or the network's artifacts when ``taskId`` is None), listed in
    GSI2 ``NET#<net>#ARTS``; with a ``taskId``, in one transaction with a check that the task
    exists. False (nothing written) when it does not."""
    pk, sk = k.artifact(net, artifact["artifactId"], artifact.get("taskId"))
    actions = [t.tx_put({"PK": pk, "SK": sk, **artifact, "GSI2PK": k.artifacts_index(net),
                         "GSI2SK": artifact["artifactId"]}, "attribute_not_exists(PK)")]
    if artifact.get("taskId"):
        actions.append(t.tx_check(*k.task(net, artifact["taskId"]), "attribute_exists(PK)"))
    return bool(uow.commit(actions))


def routing_position(item: dict[str, Any]) -> str:
    """Where a task item read from the routing index sits in its partition (its ``GSI1SK``: due
    or parked time first, so positions sort oldest first): what :func:`due_page`'s ``low`` and
    :func:`parked_page`'s ``after`` take to go on past it. KeyError for an item not in it."""
    return item["GSI1SK"]
