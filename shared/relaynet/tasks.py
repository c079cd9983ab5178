"""Tasks: delegation, reads and the state machine (PROTOCOL.md 4.6, 4.7, 4.8).

A task is one item (``NET#<net>#TASK#<id>``/``META``) holding its history and progress; every
transition rewrites it with a conditional put on its ``version``, in the same transaction as the
instance bookkeeping (``active``: tasks offered or assigned to it; ``held``: accepted, working or
blocked) and the notices it sends, so racing updates cannot both win.
"""

from __future__ import annotations

from typing import Any

from relaynet import clock, ids
from relaynet import routing
from relaynet.config import settings
from relaynet.directory import Directory, load
from relaynet.errors import InvalidArgument, InvalidTransition, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.messaging import mailbox_item, message_item, new_message, thread_meta
from relaynet.models.worker import DelegateRequest, TaskGetRequest, TaskUpdateRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.taskstate import HELD, REASON_REQUIRED, TERMINAL, allowed_from, roles_for, rule

ROUTER = {"system": "router"}
SUMMARY_FIELDS = ("id", "title", "state", "creator", "target", "assignee", "resource", "createdAt", "updatedAt")
_MAX_ATTEMPTS = 8


def summary(task: dict[str, Any]) -> dict[str, Any]:
    """The protocol's task summary ``{id, title, state, creator, target, assignee, resource, createdAt, updatedAt}``."""
    return {f: task.get(f) for f in SUMMARY_FIELDS}


def _item(task: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The stored item for ``task``: keys, listing index and, while routable, the routing index."""
    net = task["networkId"]
    pk, sk = k.task(net, task["id"])
    item = {**task, "PK": pk, "SK": sk, "GSI2PK": k.tasks_index(net), "GSI2SK": task["id"]}
    for key in ("GSI1PK", "GSI1SK"):
        item.pop(key, None)
    if task["state"] == "pending":
        item["GSI1PK"], item["GSI1SK"] = k.ROUTE, k.route_sk(task.get("dueAt", now_ms), net, task["id"])
    elif task["state"] == "offered":
        item["GSI1PK"], item["GSI1SK"] = k.ROUTE, k.route_sk(task["offerExpiresAt"], net, task["id"])
    return item


def _save(task: dict[str, Any], expected_version: int | None, now_ms: int) -> dict[str, Any]:
    """A conditional put of ``task``: new (no version) or replacing ``expected_version``."""
    if expected_version is None:
        return t.tx_put(_item(task, now_ms), "attribute_not_exists(PK)")
    return t.tx_put(_item(task, now_ms), "version = :v", v=expected_version)


def _step(task: dict[str, Any], state: str, actor: dict[str, Any], now_ms: int, reason: str | None = None) -> None:
    """Move ``task`` (in memory) to ``state``, appending the history entry."""
    task["state"] = state
    task["updatedAt"] = clock.iso(now_ms)
    entry = {"state": state, "actor": actor, "at": clock.iso(now_ms)}
    if reason:
        entry["reason"] = reason
    task.setdefault("history", []).append(entry)
    task["version"] = int(task.get("version", 0)) + 1


def _notice(task: dict[str, Any], to: dict[str, str], actor: dict[str, Any], body: str) -> list[dict[str, Any]]:
    """A ``task_update`` message in the task's thread and in the mailbox of address ``to``."""
    msg = new_message("task_update", task["threadId"], actor, to, body, task["title"], task["id"], task.get("resource"),
                      state=task["state"])
    net = task["networkId"]
    return [t.tx_put(message_item(net, msg)), t.tx_put(mailbox_item(net, to, msg))]


def offer_actions(task: dict[str, Any], inst: dict[str, Any], now_ms: int) -> list[dict[str, Any]]:
    """Offer ``task`` (in memory, already ``pending``) to ``inst``: the instance update and the
    ``task_offer`` message in the instance's mailbox. Mutates ``task``; the caller saves it."""
    net = task["networkId"]
    _step(task, "offered", ROUTER, now_ms)
    task["assignee"] = inst["id"]
    task["offerExpiresAt"] = now_ms + settings().offer_ttl * 1000
    task["attempts"] = int(task.get("attempts", 0)) + 1
    body = (f"Task offered to you: {task['title']}\n\nObjective: {task['objective']}"
            + "".join(f"\n- {c}" for c in task.get("acceptanceCriteria") or []))
    msg = new_message("task_offer", task["threadId"], ROUTER, {"instanceId": inst["id"]}, body, task["title"],
                      task["id"], task.get("resource"))
    inst.setdefault("active", set()).add(task["id"])
    inst["lastOfferedAt"] = now_ms
    return [
        t.tx_update(*k.instance(net, inst["id"]), "ADD active :tid SET lastOfferedAt = :now",
                    "attribute_exists(PK) AND #st <> :stopped", names={"#st": "status"},
                    tid={task["id"]}, now=now_ms, stopped="stopped"),
        t.tx_put(message_item(net, msg)),
        t.tx_put(mailbox_item(net, {"instanceId": inst["id"]}, msg)),
    ]


def expire_offer_actions(task: dict[str, Any], now_ms: int) -> list[dict[str, Any]]:
    """The hub's ``offered -> pending`` move (PROTOCOL.md 7 step 1). Mutates ``task``."""
    inst_id = task.pop("assignee")
    task.pop("offerExpiresAt", None)
    task.setdefault("declined", []).append(inst_id)
    _step(task, "pending", ROUTER, now_ms, "offer expired")
    return [t.tx_update(*k.instance(task["networkId"], inst_id), "DELETE active :tid", tid={task["id"]})]


def _target(d: Directory, req: DelegateRequest) -> dict[str, str]:
    if req.toInstance:
        if req.toInstance not in d.instances:
            raise NotFound(f"no instance {req.toInstance!r} in this network")
        return {"instanceId": req.toInstance}
    if req.toAgent:
        if req.toAgent in d.agents:
            return {"agent": req.toAgent}
        if req.toAgent in d.groups:
            return {"group": req.toAgent}
        raise NotFound(f"no agent or group named {req.toAgent!r}", {"available": sorted([*d.agents, *d.groups])})
    return {"resource": normalise_resource(req.resource)}


def delegate(creator: Principal, req: DelegateRequest) -> dict[str, Any]:
    """network_delegate (PROTOCOL.md 4.6). Returns ``{taskId, state, assignee?}``.

    Raises InvalidArgument (no target and no resource; bad resource), NotFound (unknown target:
    nothing is written). Offers at once when an eligible instance is live, else leaves it pending.
    """
    if not (req.toInstance or req.toAgent or req.resource):
        raise InvalidArgument.field("resource", "required when neither toAgent nor toInstance is given")
    resource = normalise_resource(req.resource) if req.resource else None
    net = creator.network_id
    d = load(net)
    target = _target(d, req)
    now = clock.now_ms()
    task_id = ids.new_id("task")
    task: dict[str, Any] = {
        "id": task_id, "networkId": net, "title": req.title or req.objective[:80], "objective": req.objective,
        "acceptanceCriteria": req.acceptanceCriteria or [], "state": "pending", "creator": creator.actor,
        "target": target, "resource": resource, "createdAt": clock.iso(now), "updatedAt": clock.iso(now),
        "attempts": 0, "history": [{"state": "pending", "actor": creator.actor, "at": clock.iso(now)}],
        "progress": [], "version": 1, "threadId": ids.new_id("thr"), "dueAt": now,
    }
    participants = {creator.agent} if creator.agent else set()
    thread = thread_meta(net, task["threadId"], task["title"], participants or {"-"}, task_id, resource)
    actions = [t.tx_put(thread, "attribute_not_exists(PK)")]
    chosen = routing.choose(task, d, now)
    if chosen is not None:
        actions += offer_actions(task, chosen, now)
    t.transact([_save(task, None, now), *actions])
    out = {"taskId": task_id, "state": task["state"]}
    if task.get("assignee"):
        out["assignee"] = task["assignee"]
    return out


def view(task: dict[str, Any]) -> dict[str, Any]:
    """The full protocol view of a stored task (without artifacts and claims)."""
    out = {f: task.get(f) for f in ("id", "title", "objective", "acceptanceCriteria", "state", "creator", "target",
                                    "assignee", "resource", "createdAt", "updatedAt", "attempts", "history", "progress")}
    if task.get("offerExpiresAt") and task["state"] == "offered":
        out["offerExpiresAt"] = clock.iso(int(task["offerExpiresAt"]))
    return {key: value for key, value in out.items() if value is not None or key in ("assignee",)}


def load_task(net: str, task_id: str) -> dict[str, Any]:
    """The stored task, or NotFound (ids of other networks are simply absent: 404)."""
    task = t.get(*k.task(net, task_id))
    if task is None:
        raise NotFound(f"no task {task_id!r} in this network")
    return task


def get(principal: Principal, req: TaskGetRequest, claims_of_task) -> dict[str, Any]:
    """network_task_get (PROTOCOL.md 4.7): the task with its artifacts and active claims.

    ``claims_of_task(net, task_id)`` supplies the active claims (relaynet.claims).
    """
    net = principal.network_id
    items = t.query(k.task_pk(net, req.taskId))
    task = next((i for i in items if i["SK"] == k.META), None)
    if task is None:
        raise NotFound(f"no task {req.taskId!r} in this network")
    out = view(task)
    out["artifacts"] = [artifact_view(i) for i in items if i["SK"].startswith("ART#")]
    out["claims"] = claims_of_task(net, req.taskId)
    return {"task": out}


def artifact_view(item: dict[str, Any]) -> dict[str, Any]:
    """``{artifactId, uri, label, type, taskId, ref, publisher, createdAt}`` of a stored artifact."""
    return {f: item.get(f) for f in ("artifactId", "uri", "label", "type", "taskId", "ref", "publisher", "createdAt")}


def recent(net: str, limit: int = 20) -> list[dict[str, Any]]:
    """The newest task summaries of a network (GSI2, newest first)."""
    return [summary(i) for i in t.query(k.tasks_index(net), index="GSI2", forward=False, limit=limit)]


def _roles(principal: Principal, task: dict[str, Any], wanted: str, d_loader, now_ms: int) -> set[str]:
    """The caller's roles towards ``task``, decided before its state (PROTOCOL.md 4.8).

    ``eligible`` (pull-accept) exists only while the task is pending: an offered task belongs to
    the offered instance, so another instance accepting it is 403, not 409.
    """
    if principal.kind == "representative":
        return {"creator"}
    roles = set()
    if task.get("assignee") == principal.instance_id:
        roles |= {"assignee", "offered_instance"}
    if (task.get("creator") or {}).get("agent") == principal.agent:
        roles.add("creator")
    if wanted == "accepted" and task["state"] == "pending" and routing.is_eligible(task, d_loader(), principal.instance_id, now_ms):
        roles.add("eligible")
    return roles


def update(principal: Principal, req: TaskUpdateRequest, on_terminal=None) -> dict[str, Any]:
    """network_task_update (PROTOCOL.md 4.8). Returns ``{task}``.

    Raises InvalidArgument (missing reason), NotFound, PermissionDenied (the caller may not make
    this move at all), InvalidTransition (409 with ``details.allowed``). A conditional put on the
    task's version makes racing updates from one state yield exactly one winner; the loser is
    re-evaluated against the new state and answered 409. ``on_terminal(net, task_id)`` runs after
    a terminal move (releases the task's claims).
    """
    if req.status in REASON_REQUIRED and not (req.reason or "").strip():
        raise InvalidArgument.field("reason", f"required (non-empty) for status {req.status!r}")
    net = principal.network_id
    directory: list[Directory] = []

    def d_loader() -> Directory:
        if not directory:
            directory.append(load(net))
        return directory[0]

    for _ in range(_MAX_ATTEMPTS):
        task = load_task(net, req.taskId)
        now = clock.now_ms()
        roles = _roles(principal, task, req.status, d_loader, now)
        if not roles & roles_for(req.status):
            raise PermissionDenied(f"you may not move this task to {req.status!r}")
        needed = rule(task["state"], req.status)
        if needed is None or needed not in roles:
            raise InvalidTransition(task["state"], req.status, allowed_from(task["state"]))
        before_state, version = task["state"], int(task["version"])
        assignee = task.get("assignee")
        actions: list[dict[str, Any]] = []
        if req.status == "accepted":
            task["assignee"] = principal.instance_id
            task.pop("offerExpiresAt", None)
            actions.append(t.tx_update(*k.instance(net, principal.instance_id), "ADD active :tid, held :tid",
                                       "attribute_exists(PK)", tid={task["id"]}))
        elif req.status in TERMINAL and assignee:
            actions.append(t.tx_update(*k.instance(net, assignee), "DELETE active :tid, held :tid", tid={task["id"]}))
        _step(task, req.status, principal.actor, now, req.reason)
        creator_agent = (task.get("creator") or {}).get("agent")
        body = f"Task {task['title']!r} is now {req.status}" + (f": {req.reason}" if req.reason else ".")
        if creator_agent:
            actions += _notice(task, {"agent": creator_agent}, principal.actor, body)
        if req.status == "cancelled" and assignee and before_state in HELD | {"offered"}:
            actions += _notice(task, {"instanceId": assignee}, principal.actor, body)
        try:
            t.transact([_save(task, version, now), *actions])
        except t.TransactionCancelled:
            continue
        if req.status in TERMINAL and on_terminal is not None:
            on_terminal(net, task["id"])
        return {"task": view(task)}
    raise InvalidTransition(task["state"], req.status, allowed_from(task["state"]))
