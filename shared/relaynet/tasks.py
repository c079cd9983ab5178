"""Tasks: delegation, reads and the state machine (PROTOCOL.md 4.6, 4.7, 4.8).

A task is one item (relaynet.store.tasks owns it) holding its history and progress. Every
write of it is a conditional put on its ``version`` (and bumps it), in one transaction with the
instance bookkeeping (``active``: tasks offered or assigned to the instance; ``held``: accepted,
working or blocked) and the messages it sends; so racing writers cannot both win, and a reader
holding version *v* holds the whole item.

Where a task sits in GSI1 follows from the task itself (relaynet.store.tasks.item): ``offered`` tasks
are due at ``offerExpiresAt`` under their routing shard (``ROUTE#<n>``, keys.route_pk); ``pending``
tasks are due at ``dueAt`` under it, or,
when nobody is eligible for them, *parked* under their wait group (``wait`` = routing.wait_key).
Parking first refreshes the group's marker (:func:`touch_marker`, a plain UpdateItem outside the
task's transaction, so a burst of tasks parked in one group never conflicts on it); the sweep
checks one marker per group instead of every parked task (relaynet.sweep).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from relaynet import clock, cursors, events, ids, peers
from relaynet import routing
from relaynet.config import settings
from relaynet.directory import Directory, load
from relaynet.errors import Conflict, InvalidArgument, InvalidTransition, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.messaging import instance_address, new_message
from relaynet.models.worker import TaskUpdateRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import directory as dir_store
from relaynet.store import mailboxes as mail_store
from relaynet.store import tasks as store
from relaynet.store.mailboxes import Thread
from relaynet.store.tasks import Before
from relaynet.store import unit_of_work as uow
from relaynet.taskstate import HELD, REASON_REQUIRED, TERMINAL, allowed_from, cap_history, decide

if TYPE_CHECKING:
    from relaynet.models.worker import DelegateRequest, TaskGetRequest

ROUTER = {"system": "router"}
SUMMARY_FIELDS = ("id", "title", "state", "creator", "target", "assignee", "resource", "createdAt", "updatedAt")
_MAX_ATTEMPTS = 8


def summary(task: dict[str, Any]) -> dict[str, Any]:
    """The protocol's task summary ``{id, title, state, creator, target, assignee, resource, createdAt, updatedAt}``."""
    return {f: task.get(f) for f in SUMMARY_FIELDS}


def touch_marker(task: dict[str, Any], now_ms: int) -> None:
    """Create or refresh the marker of the wait group ``task`` is about to be parked in
    (relaynet.store.tasks.touch_marker, with the group's routing probe)."""
    store.touch_marker(task, routing.probe(task), now_ms)


def save(task: dict[str, Any], before: Before, now_ms: int) -> list[dict[str, Any]]:
    """The conditional put of ``task`` (new, or replacing ``before.version``), bumping its version.
    A task newly parked gets its wait group's marker refreshed first (:func:`touch_marker`)."""
    if task["state"] != "pending":
        task.pop("wait", None)
        task.pop("parkedAt", None)
    if task["state"] == "pending" and task.get("wait") and task["wait"] != before.wait:
        touch_marker(task, now_ms)
    return [store.put(task, before, now_ms)]


def park(task: dict[str, Any], now_ms: int) -> None:
    """Park a pending task nobody is eligible for under its wait group (in memory; save it)."""
    task["wait"] = routing.wait_key(task)
    task["parkedAt"] = now_ms
    task.pop("dueAt", None)


def _step(task: dict[str, Any], state: str, actor: dict[str, Any], now_ms: int, reason: str | None = None) -> None:
    """Move ``task`` (in memory) to ``state``, appending the history entry (capped: taskstate.cap_history)."""
    task["state"] = state
    task["updatedAt"] = clock.iso(now_ms)
    entry = {"state": state, "actor": actor, "at": clock.iso(now_ms)}
    if reason:
        entry["reason"] = reason
    task.setdefault("history", []).append(entry)
    cap_history(task)
    if state != "pending":
        task.pop("wait", None)
        task.pop("parkedAt", None)
        task.pop("dueAt", None)


def _notice(task: dict[str, Any], to: dict[str, str], actor: dict[str, Any], body: str) -> list[dict[str, Any]]:
    """A ``task_update`` message in the task's thread and in mailbox ``to`` (``{"agent"}`` or
    ``{"instanceId", "agent"}``)."""
    public = {"instanceId": to["instanceId"]} if "instanceId" in to else {"agent": to["agent"]}
    msg = new_message("task_update", task["threadId"], actor, public, body, task["title"], task["id"],
                      task.get("resource"), state=task["state"])
    return mail_store.message_actions(task["networkId"], msg, [to])


def _join_thread(task: dict[str, Any], agent: str | None) -> list[dict[str, Any]]:
    """Make ``agent`` a participant of the task's thread (it was addressed by the task)."""
    if not agent:
        return []
    return [mail_store.add_participants(task["networkId"], task["threadId"], {agent})]


def offer_actions(task: dict[str, Any], inst: dict[str, Any], now_ms: int, join_thread: bool = True
                  ) -> list[dict[str, Any]]:
    """Offer ``task`` (in memory, ``pending``) to ``inst``: the hub's history entry, the instance's
    ``active`` set (conditional on the instance not being stopped), the ``task_offer`` message in
    the instance's mailbox, and (``join_thread``) the instance's agent joining the task's thread.
    Mutates ``task`` and ``inst`` (load for the rest of a sweep); the caller saves the task."""
    net = task["networkId"]
    _step(task, "offered", ROUTER, now_ms, f"offered to {inst['id']}")
    task["assignee"], task["assigneeAgent"] = inst["id"], inst["agent"]
    task["offerExpiresAt"] = now_ms + settings().offer_ttl * 1000
    task["attempts"] = int(task.get("attempts", 0)) + 1
    body = (f"Task offered to you: {task['title']}\n\nObjective: {task['objective']}"
            + "".join(f"\n- {c}" for c in task.get("acceptanceCriteria") or [])
            + f"\n\nThe offer expires at {clock.iso(task['offerExpiresAt'])}.")
    msg = new_message("task_offer", task["threadId"], ROUTER, {"instanceId": inst["id"]}, body, task["title"],
                      task["id"], task.get("resource"), offerExpiresAt=clock.iso(task["offerExpiresAt"]))
    inst.setdefault("active", set()).add(task["id"])
    inst["lastOfferedAt"] = now_ms
    return [
        store.offer_to_instance(net, inst["id"], task["id"], now_ms),
        *mail_store.message_actions(net, msg, [{"instanceId": inst["id"], "agent": inst["agent"],
                                                **({"bridge": inst["bridge"]} if inst.get("bridge") else {})}]),
        *(_join_thread(task, inst.get("agent")) if join_thread else []),
        events.event_action(net, "task", ROUTER, f"task {task['title']!r} offered to {inst.get('agent')}/{inst['id']}",
                            taskId=task["id"], state="offered", instanceId=inst["id"],
                            a2aPush=task.get("a2aPush") or None),  # A2A push configs (relaynet.a2a.push)
    ]


def expire_offer(task: dict[str, Any], now_ms: int) -> str:
    """The hub's ``offered -> pending`` move when the offer expired (PROTOCOL.md 7 step 1), in
    memory. Returns the instance the offer was made to; the caller takes the task out of its
    ``active`` set (:func:`instance_update`). The instance goes to the end of ``declined``."""
    inst_id = task.pop("assignee")
    task.pop("assigneeAgent", None)
    task.pop("offerExpiresAt", None)
    declined = [i for i in task.get("declined") or () if i != inst_id]
    task["declined"] = [*declined, inst_id]
    _step(task, "pending", ROUTER, now_ms, "offer expired")
    task["dueAt"] = now_ms
    return inst_id


def instance_update(net: str, inst_id: str, task_id: str, add: tuple[str, ...] = (),
                     remove: tuple[str, ...] = ()) -> dict[str, Any]:
    """One update of an instance's ``active``/``held`` sets (relaynet.store.tasks.instance_sets)."""
    return store.instance_sets(net, inst_id, task_id, add, remove)


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


def delegate_arguments(req: DelegateRequest) -> str | None:
    """What network_delegate checks of its arguments alone, first (PROTOCOL.md 2: arguments
    before existence and permission; control_delegate runs it before the grant check). Returns
    the normalised ``resource`` (or None). Raises InvalidArgument: neither a target nor a
    resource, or a bad resource."""
    if not (req.toInstance or req.toAgent or req.resource):
        raise InvalidArgument.field("resource", "required when neither toAgent nor toInstance is given")
    return normalise_resource(req.resource) if req.resource else None


def delegate(creator: Principal, req: DelegateRequest, network_id: str | None = None) -> dict[str, Any]:
    """network_delegate (PROTOCOL.md 4.6). Returns ``{taskId, state, assignee?}``.

    Raises InvalidArgument (no target and no resource; bad resource), NotFound (unknown target:
    nothing is written). Offers at once when an eligible instance is live; otherwise the task is
    ``pending``, parked in its wait group, and the sweep offers it once someone is eligible.
    ``network_id`` is for representatives (control_delegate), whose principal has no network.
    """
    resource = delegate_arguments(req)
    net = network_id or creator.network_id
    d = load(net)
    target = _target(d, req)
    now = clock.now_ms()
    task_id = ids.new_id("task")
    task: dict[str, Any] = {
        "id": task_id, "networkId": net, "title": req.title or req.objective[:80], "objective": req.objective,
        "acceptanceCriteria": req.acceptanceCriteria or [], "state": "pending", "creator": creator.actor,
        "target": target, "resource": resource, "createdAt": clock.iso(now), "updatedAt": clock.iso(now),
        "attempts": 0, "history": [{"state": "pending", "actor": creator.actor, "at": clock.iso(now)}],
        "progress": [], "threadId": ids.new_id("thr"), "dueAt": now,
    }
    base = {**task, "history": [dict(h) for h in task["history"]]}
    participants = {creator.agent} if creator.agent else {"-"}
    for attempt in uow.attempts(_MAX_ATTEMPTS):
        if attempt:  # another transaction held the chosen instance, or it was stopped meanwhile: again,
            d, now = load(net), clock.now_ms()  # from a fresh directory
            task = {**base, "history": [dict(h) for h in base["history"]]}
        # replies in the task's thread go to the creator (its lastPoster)
        thread = Thread(id=task["threadId"], subject=task["title"], participants=participants, taskId=task_id,
                        resource=resource, lastPoster=creator.agent or None)
        chosen = routing.choose(task, d, now)
        actions = []
        if chosen is not None:
            actions += offer_actions(task, chosen, now, join_thread=False)
            thread.participants = {*participants, chosen["agent"]} - {"-"}
        else:
            park(task, now)
        actions.append(mail_store.create_thread(thread, net))
        actions.append(events.event_action(net, "task", creator.actor, f"task {task['title']!r} delegated to "
                                           f"{next(iter(target.values()))}", taskId=task_id, state="pending"))
        if uow.commit([*save(task, Before(None), now), *actions]):
            break
    else:
        raise Conflict("in_progress", "the directory is busy; retry", headers={"Retry-After": "1"})
    out = {"taskId": task_id, "state": task["state"]}
    if task.get("assignee"):
        out["assignee"] = task["assignee"]
    return out


def view(task: dict[str, Any]) -> dict[str, Any]:
    """The full protocol view of a stored task (without artifacts and claims)."""
    out = {f: task.get(f) for f in ("id", "title", "objective", "acceptanceCriteria", "state", "creator", "target",
                                    "assignee", "resource", "createdAt", "updatedAt", "attempts", "history", "progress",
                                    "threadId")}
    if task.get("offerExpiresAt") and task["state"] == "offered":
        out["offerExpiresAt"] = clock.iso(int(task["offerExpiresAt"]))
    out["attempts"] = int(out.get("attempts") or 0)
    if task.get("historyDropped"):
        out["historyDropped"] = int(task["historyDropped"])
    return {key: value for key, value in out.items() if value is not None or key in ("assignee",)}


def load_task(net: str, task_id: str) -> dict[str, Any]:
    """The stored task, or NotFound (ids of other networks are simply absent: 404)."""
    task = store.get(net, task_id)
    if task is None:
        raise NotFound(f"no task {task_id!r} in this network")
    return task


def get(principal: Principal, req: TaskGetRequest, claims_of_task, network_id: str | None = None) -> dict[str, Any]:
    """network_task_get (PROTOCOL.md 4.7): the task with its artifacts and active claims.

    ``claims_of_task(net, task_id)`` supplies the active claims (relaynet.claims).
    """
    net = network_id or principal.network_id
    task, artifacts = store.with_artifacts(net, req.taskId)
    if task is None:
        raise NotFound(f"no task {req.taskId!r} in this network")
    out = view(task)
    out["artifacts"] = [artifact_view(i) for i in artifacts]
    out["claims"] = claims_of_task(net, req.taskId)
    return {"task": out}


def artifact_view(item: dict[str, Any]) -> dict[str, Any]:
    """``{artifactId, uri, label, type, taskId, ref, publisher, createdAt}`` of a stored artifact."""
    return {f: item.get(f) for f in ("artifactId", "uri", "label", "type", "taskId", "ref", "publisher", "createdAt")}


def recent(net: str, limit: int = 20) -> list[dict[str, Any]]:
    """The newest task summaries of a network (GSI2, newest first)."""
    return [summary(i) for i in store.newest(net, limit)]


def unroutable(net: str, limit: int = 100) -> list[dict[str, Any]]:
    """Summaries of this network's pending tasks nobody is eligible for (parked), oldest first
    within each wait group (for control_list_blocked)."""
    return [summary(i) for i in store.parked(net, limit)]


def _roles(principal: Principal, task: dict[str, Any], wanted: str, d_loader: Callable[[], Directory],
           now_ms: int) -> set[str]:
    """The caller's roles towards ``task`` (relaynet.taskstate), decided before its state.

    ``eligible`` (pull-accept) is the caller's standing whatever the state, except while the task
    is offered: an offered task belongs to the offered instance, so another instance accepting it
    is 403. So an eligible instance that asks to accept a task another instance has just pulled
    gets 409 against the new state whether it read the task before or after the winner wrote it
    (a race's losers never get 403). It is worked out only for ``accepted``, the one move it
    grants (the directory read it needs is not paid on other updates). While the task is pending,
    ``eligible`` comes with ``assignee``: "working before accepting" is a state error (409).
    """
    if principal.kind == "representative":
        return {"creator"}
    roles: set[str] = set()
    if task.get("assignee") == principal.instance_id:
        roles |= {"assignee", "offered_instance"}
    if (task.get("creator") or {}).get("agent") == principal.agent:
        roles.add("creator")
    if task["state"] == "pending" and wanted != "cancelled":
        if routing.is_eligible(task, d_loader(), principal.instance_id, now_ms):
            roles |= {"eligible", "assignee"}
    elif (wanted == "accepted" and task["state"] != "offered" and "assignee" not in roles
          and routing.is_eligible(task, d_loader(), principal.instance_id, now_ms)):
        roles.add("eligible")
    return roles


class TerminalRelease(Protocol):
    """What a task's terminal move does to the task's claims (PROTOCOL.md 4.8; the one in use is
    relaynet.claims.release_for_task): ``actions(net, task_id, now_ms)`` reads them (one Query)
    and returns the actions releasing them, written in the move's own transaction; calling it,
    ``(net, task_id)``, releases them after a move that committed without those actions."""

    def actions(self, net: str, task_id: str, now_ms: int) -> list[dict[str, Any]]: ...

    def __call__(self, net: str, task_id: str) -> int: ...


#: Attempts of a terminal move that carry the claims' release in the task's transaction; a claim
#: taken, renewed or released in the network meanwhile cancels it, and the later attempts release
#: them after the move.
_RELEASE_IN_MOVE_ATTEMPTS = 2


def update(principal: Principal, req: TaskUpdateRequest, on_terminal: TerminalRelease | None = None,
           network_id: str | None = None) -> dict[str, Any]:
    """network_task_update (PROTOCOL.md 4.8); also control_cancel_task (a representative
    principal with ``network_id``). Returns ``{task}``.

    Raises InvalidArgument (missing reason), NotFound, PermissionDenied (the caller may not make
    this move at all), InvalidTransition (409 with ``details.allowed``). The write is a conditional
    put on the task's version. If it fails because another update moved the task first, the
    caller lost a race from the same state: 409 against the new state. If the task's state did
    not change (a transaction conflict, or the sweep re-parking it), it is tried again.
    An offer already past ``offerExpiresAt`` is expired first (the hub's move, in the same write).
    ``on_terminal`` releases the task's claims on a terminal move: in the move's transaction when
    they fit in it (one Query of the claims partition; issue 16), else right after it commits.
    """
    if req.status in REASON_REQUIRED and not (req.reason or "").strip():
        raise InvalidArgument.field("reason", f"required (non-empty) for status {req.status!r}")
    net = network_id or principal.network_id
    directory: list[Directory] = []

    def d_loader() -> Directory:
        if not directory:
            directory.append(load(net))
        return directory[0]

    first: Before | None = None
    for attempt in uow.attempts(_MAX_ATTEMPTS):
        task = load_task(net, req.taskId)
        before = Before(task)
        if first is None:
            first = before
        elif (before.state, before.assignee) != (first.state, first.assignee):
            raise InvalidTransition(task["state"], req.status, allowed_from(task["state"]))
        now = clock.now_ms()
        moved = _move(principal, task, req, d_loader, now)  # mutates task: saved after it
        actions = [*save(task, before, now), *moved]
        release = req.status in TERMINAL and on_terminal is not None
        if release and attempt < _RELEASE_IN_MOVE_ATTEMPTS:
            releases = on_terminal.actions(net, task["id"], now)
            if uow.fits(actions, releases):
                actions, release = [*actions, *releases], False
        if not uow.commit(actions):
            directory.clear()
            continue
        if release:
            on_terminal(net, task["id"])
        return {"task": view(task)}
    raise InvalidTransition(task["state"], req.status, allowed_from(task["state"]))


def _observe(net: str, principal: Principal, status: str) -> list[dict[str, Any]]:
    """The assignee agent's observed counters (PROTOCOL.md 5.5 ``resume.observed``): a task counts
    as assigned when accepted, and as completed or failed when the assignee finishes it."""
    counter = {"accepted": "tasks_total", "completed": "tasks_completed", "failed": "tasks_failed"}.get(status)
    if counter is None or principal.kind != "instance":
        return []
    return peers.observe_actions(net, principal.agent, **{counter: 1})


def _move(principal: Principal, task: dict[str, Any], req: TaskUpdateRequest, d_loader, now: int
          ) -> list[dict[str, Any]]:
    """Check and apply (in memory) one caller's move; returns the other actions of its write."""
    net = task["networkId"]
    instance_ops: dict[str, tuple[set[str], set[str]]] = {}  # instance id -> (add, remove)

    def op(inst_id: str, add: tuple[str, ...] = (), remove: tuple[str, ...] = ()) -> None:
        adds, removes = instance_ops.setdefault(inst_id, (set(), set()))
        adds.update(add)
        removes.update(remove)
        removes.difference_update(adds)

    if task["state"] == "offered" and int(task.get("offerExpiresAt", 0)) <= now:
        op(expire_offer(task, now), remove=("active", "held"))
    state = task["state"]
    verdict = decide(state, req.status, _roles(principal, task, req.status, d_loader, now))
    if verdict == "forbidden":
        raise PermissionDenied(f"you may not move this task to {req.status!r}")
    if verdict == "invalid":
        raise InvalidTransition(state, req.status, allowed_from(state))
    assignee = task.get("assignee")
    actions: list[dict[str, Any]] = []
    if req.status == "accepted":
        task["assignee"], task["assigneeAgent"] = principal.instance_id, principal.agent
        task.pop("offerExpiresAt", None)
        op(principal.instance_id, add=("active", "held"))
        if state == "pending":
            actions += _join_thread(task, principal.agent)
    elif req.status in TERMINAL and assignee:
        op(assignee, remove=("active", "held"))
    _step(task, req.status, principal.actor, now, req.reason)
    for inst_id, (adds, removes) in instance_ops.items():
        actions.append(instance_update(net, inst_id, task["id"], tuple(sorted(adds)), tuple(sorted(removes))))
    actions += _observe(net, principal, req.status)
    actions.append(events.event_action(net, "task", principal.actor, f"task {task['title']!r} {req.status}"
                                       + (f": {req.reason[:200]}" if req.reason else ""),
                                       taskId=task["id"], state=req.status,
                                       a2aPush=task.get("a2aPush") or None))  # A2A push configs (relaynet.a2a.push)
    creator_agent = (task.get("creator") or {}).get("agent")
    body = f"Task {task['title']!r} is now {req.status}" + (f": {req.reason}" if req.reason else ".")
    if creator_agent:
        actions += _notice(task, {"agent": creator_agent}, principal.actor, body)
    if req.status == "cancelled" and assignee and state in HELD | {"offered"}:
        # the assignee's agent is kept with it (since issue 16); a task stored before, by a GetItem
        to = {"instanceId": assignee, "agent": task["assigneeAgent"]} if task.get("assigneeAgent") \
            else instance_address(net, assignee)
        actions += _notice(task, to, principal.actor, body)
    return actions


def cancel(principal: Principal, network_id: str, task_id: str, reason: str | None = None,
           on_terminal: TerminalRelease | None = None) -> dict[str, Any]:
    """control_cancel_task (PROTOCOL.md 6): a representative (whose grant the caller checked)
    cancels a non-terminal task of ``network_id``. Returns ``{task}``; errors as :func:`update`."""
    return update(principal, TaskUpdateRequest(taskId=task_id, status="cancelled", reason=reason),
                  on_terminal=on_terminal, network_id=network_id)


PROGRESS_KEPT = 50  # progress entries kept inline (the newest); the item stays far below 400 KB


def progress(principal: Principal, task_id: str, payload: Any) -> dict[str, Any]:
    """The plugin surface's ``tasks progress`` (PROTOCOL.md 5.7): the assignee appends
    ``{payload, at}`` to ``progress``; an ``accepted`` task becomes ``working`` (a transition, with
    its history entry and notice). Anyone else is 403; a task the assignee does not hold
    (offered, terminal) is 409 with ``allowed``. Returns ``{task}``."""
    net = principal.network_id
    for _ in uow.attempts(_MAX_ATTEMPTS):
        task = load_task(net, task_id)
        before, now = Before(task), clock.now_ms()
        if task.get("assignee") != principal.instance_id:
            raise PermissionDenied("only the task's assignee reports progress")
        if task["state"] not in HELD:
            raise InvalidTransition(task["state"], "working", allowed_from(task["state"]))
        task["progress"] = [*(task.get("progress") or []), {"payload": payload, "at": clock.iso(now)}][-PROGRESS_KEPT:]
        actions: list[dict[str, Any]] = []
        if task["state"] == "accepted":
            _step(task, "working", principal.actor, now)
            creator_agent = (task.get("creator") or {}).get("agent")
            if creator_agent:
                actions += _notice(task, {"agent": creator_agent}, principal.actor,
                                   f"Task {task['title']!r} is now working.")
        else:
            task["updatedAt"] = clock.iso(now)
        if not uow.commit([*save(task, before, now), *actions]):
            continue
        return {"task": view(task)}
    raise InvalidTransition(task["state"], "working", allowed_from(task["state"]))


def list_for(principal: Principal, scope: str = "own", state: str = "active", limit: int = 20,
             cursor: str | None = None, max_read: int = 1000) -> dict[str, Any]:
    """The plugin surface's ``tasks list`` (PROTOCOL.md 5.7): summaries, newest first. ``scope``
    ``own``: created by or assigned to (an instance of) the caller's agent; ``all``: the network's.
    ``state`` ``active``: not terminal; ``all``. Returns ``{tasks, nextCursor}`` (PROTOCOL.md 2
    "Lists"); one page reads at most ``max_read`` tasks of the listing index (a sparse filter may
    give a short page that still has a cursor). A bad cursor is InvalidArgument."""
    net = principal.network_id
    listing = cursors.Listing("tasks.list", principal, scope=scope, state=state)
    after = listing.position(cursor)
    mine: set[str] = set()
    if scope == "own":
        mine = {i["id"] for i in load(net).instances.values() if i["agent"] == principal.agent}

    def accept(task: dict[str, Any]) -> bool:
        if state == "active" and task["state"] in TERMINAL:
            return False
        return scope != "own" or (task.get("creator") or {}).get("agent") == principal.agent \
            or task.get("assignee") in mine

    walk = store.walk_newest(net, after, min(max_read, 100))
    page, last = cursors.page_scan(walk, lambda task: task["id"], accept, limit, max_read)
    return {"tasks": [summary(task) for task in page], "nextCursor": listing.next_cursor(last)}


def _requeue(task: dict[str, Any], instance_id: str, reason: str, now: int) -> list[dict[str, Any]]:
    """Move ``task`` (in memory, offered or held by ``instance_id``) back to ``pending`` with the
    hub as actor, the instance at the end of ``declined``; returns the creator's notice actions
    (the caller saves the task and updates the instance's sets)."""
    task.pop("assignee", None)
    task.pop("assigneeAgent", None)
    task.pop("offerExpiresAt", None)
    task["declined"] = [*(i for i in task.get("declined") or () if i != instance_id), instance_id]
    _step(task, "pending", ROUTER, now, reason)
    task["dueAt"] = now
    creator_agent = (task.get("creator") or {}).get("agent")
    if creator_agent:
        return _notice(task, {"agent": creator_agent}, ROUTER, f"Task {task['title']!r} is pending again: {reason}.")
    return []


def _requeueable(task: dict[str, Any] | None, instance_id: str) -> bool:
    return task is not None and task["state"] not in TERMINAL and task["state"] != "pending" \
        and task.get("assignee") == instance_id


def requeue_actions(net: str, instance_id: str, task_ids: list[str], reason: str, now: int
                    ) -> tuple[list[str], list[dict[str, Any]]]:
    """(the ids moved, the actions moving them) for every task of ``task_ids`` (the instance's
    ``active`` set) still offered to or held by ``instance_id``: one BatchGetItem, then per task
    its conditional put and its creator's notice (control_stop_agent's one transaction; the
    caller takes all of ``task_ids`` out of the instance's sets in the same transaction)."""
    stored = store.many(net, task_ids)
    moved, actions = [], []
    for task_id in task_ids:
        task = stored.get(task_id)
        if not _requeueable(task, instance_id):
            continue
        before = Before(task)
        notices = _requeue(task, instance_id, reason, now)
        actions += [*save(task, before, now), *notices]
        moved.append(task_id)
    return moved, actions


def return_to_pending(net: str, instance_id: str, reason: str = "instance stopped") -> list[str]:
    """Every non-terminal task offered or assigned to ``instance_id`` goes back to ``pending``
    (control_stop_agent, PROTOCOL.md 6), with the hub as actor; the sweep offers them again.
    One transaction per task (the path for an instance holding more than one transaction's
    worth). Returns the ids of the tasks moved."""
    inst = dir_store.instance(net, instance_id) or {}
    moved = []
    for task_id in sorted(inst.get("active") or ()):
        for _ in uow.attempts(_MAX_ATTEMPTS):
            task = store.get(net, task_id)
            if not _requeueable(task, instance_id):
                store.forget_on_instance(net, instance_id, task_id)
                break
            before, now = Before(task), clock.now_ms()
            actions = [instance_update(net, instance_id, task_id, remove=("active", "held")),
                       *_requeue(task, instance_id, reason, now)]
            if not uow.commit([*save(task, before, now), *actions]):
                continue
            moved.append(task_id)
            break
    return moved


requeue_for_instance = return_to_pending  # control_stop_agent's name for it
