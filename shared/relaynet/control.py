"""The control surface: representatives watching and operating networks (PROTOCOL.md 6).

A representative is a principal of the whole deployment (``REP#<name>``) with grants per
network: ``observe`` < ``communicate`` < ``delegate`` < ``operate``, each including the ones
before it. Every tool acts in one network: ``networkId`` if given, else the active network
(``control_use_network``; the first granted network by default). No grant at all on a network is
404 (it does not exist for this caller); too low a grant is 403.

The claims, tasks, routing and messaging modules are imported inside the tools that use them
(their handler files import them at init), so the other tools' Lambdas never load them.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any, Callable

from relaynet import cache, clock, events, ids
from relaynet.directory import agent_view, candidates, instance_view, load
from relaynet.errors import InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal, availability
from relaynet.resources import normalise as normalise_resource
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.taskstate import STATES

LEVELS = ("observe", "communicate", "delegate", "operate")
CONFIRMATION_TTL_S = 300


def representative(principal: Principal, fresh: bool = True) -> dict[str, Any]:
    """The representative's item (``grants``, ``grantOrder``, ``activeNetwork``); NotFound when it
    no longer exists (never for a valid token).

    ``fresh=False`` may answer a copy read by this container at most ``RELAYNET_CACHE_SECONDS``
    ago (relaynet.cache; no request): for the grants of a call that names its network. A call that
    acts in the active network reads it fresh, since ``control_use_network`` runs in another
    function's container and its effect must be seen by the very next call.
    """
    key = (t.table_name(), principal.rep)
    if fresh:
        rep = t.get(*k.representative(principal.rep))
        if rep is not None:
            cache.representatives.put(key, rep)
    else:
        rep = cache.representatives.get(key, lambda: t.get(*k.representative(principal.rep)))
    if rep is None:
        raise NotFound(f"representative {principal.rep!r} no longer exists")
    return rep


def _order(rep: dict[str, Any]) -> list[str]:
    grants = rep.get("grants") or {}
    order = [n for n in rep.get("grantOrder") or [] if n in grants]
    return order + sorted(n for n in grants if n not in order)


def scope(principal: Principal, network_id: str | None, needed: str | None,
          exists: Callable[[str], Any] | None = None) -> tuple[dict[str, Any], Principal]:
    """(the representative item, a principal bound to the network the call acts in).

    Checks in the protocol's order (PROTOCOL.md 2: existence before permission): the network
    (NotFound: no grant at all on it, or none on any), then ``exists(network id)`` when given (it
    raises NotFound for a named object that is not in the network), then the grant (PermissionDenied
    below ``needed``; PROTOCOL.md 6).
    """
    rep = representative(principal, fresh=network_id is None)
    grants = rep.get("grants") or {}
    net = network_id or rep.get("activeNetwork") or next(iter(_order(rep)), None)
    if net is None or net not in grants:
        raise NotFound(f"no network {network_id!r} for this representative" if network_id else "no granted network")
    if exists is not None:
        exists(net)
    if needed and LEVELS.index(grants[net]) < LEVELS.index(needed):
        raise PermissionDenied(f"this needs the {needed!r} grant on {net}; you have {grants[net]!r}")
    return rep, Principal("representative", network_id=net, rep=principal.rep)


def objects(task_id: str | None = None, thread_id: str | None = None, instance_id: str | None = None,
            name: str | None = None, agent: str | None = None, claim_id: str | None = None) -> Callable[[str], None]:
    """An ``exists`` check for :func:`scope`: NotFound for the first named object missing from the
    network (``name``: an agent or group; ``agent``: an agent definition; a claim live or ended)."""
    def check(net: str) -> None:
        if instance_id and t.get(*k.instance(net, instance_id)) is None:
            raise NotFound(f"no instance {instance_id!r} in this network")
        if name and t.get(*k.agent(net, name)) is None and t.get(*k.group(net, name)) is None:
            raise NotFound(f"no agent or group named {name!r}")
        if agent and t.get(*k.agent(net, agent)) is None:
            raise NotFound(f"no agent named {agent!r} in this network")
        if thread_id and t.get(*k.thread(net, thread_id)) is None:
            raise NotFound(f"no thread {thread_id!r} in this network")
        if task_id and t.get(*k.task(net, task_id)) is None:
            raise NotFound(f"no task {task_id!r} in this network")
        if claim_id and t.get(*k.claim(net, claim_id)) is None and t.get(*k.ended_claim(net, claim_id)) is None:
            raise NotFound(f"no claim {claim_id!r} in this network")
    return check


def _networks(rep: dict[str, Any], metas: dict[tuple[str, str], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    order = _order(rep)
    metas = dict(metas or {})
    missing = [k.network(n) for n in order if k.network(n) not in metas]
    if missing:
        metas.update(t.batch_get(missing))
    return [{"networkId": n, "name": (metas.get(k.network(n)) or {}).get("name"), "grant": rep["grants"][n]}
            for n in order]


def whoami(principal: Principal) -> dict[str, Any]:
    """control_whoami: ``{representative: {id, name}, grants, activeNetwork}``.

    One BatchGetItem when this container read the representative within the cache bound: the
    representative (fresh, for ``activeNetwork``) with the network names of its cached grants;
    a grant added since costs one more request for the new names.
    """
    known = cache.representatives.peek((t.table_name(), principal.rep))
    if known is None:
        rep = representative(principal)
        nets = _networks(rep)
    else:
        rep_key = k.representative(principal.rep)
        got = t.batch_get([rep_key, *(k.network(n) for n in _order(known))])
        rep = got.get(rep_key)
        if rep is None:
            raise NotFound(f"representative {principal.rep!r} no longer exists")
        cache.representatives.put((t.table_name(), principal.rep), rep)
        nets = _networks(rep, {key: item for key, item in got.items() if key != rep_key})
    active = rep.get("activeNetwork") or (nets[0]["networkId"] if nets else None)
    return {"representative": {"id": rep["id"], "name": rep["name"]}, "grants": nets, "activeNetwork": active}


def list_networks(principal: Principal, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    """control_list_networks: ``{networks: [{networkId, name, grant}], nextCursor}``, the networks
    the representative holds a grant on, by network id (creation order), paged by id
    (PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    from relaynet import cursors

    listing = cursors.Listing("control_list_networks", principal)
    after = listing.position(cursor)
    rep = representative(principal, fresh=False)  # grants only (relaynet.cache bound)
    chunk, last = cursors.page_sorted(sorted(rep.get("grants") or {}), lambda net: net, after, limit)
    metas = t.batch_get([k.network(n) for n in chunk]) if chunk else {}
    nets = [{"networkId": n, "name": (metas.get(k.network(n)) or {}).get("name"), "grant": rep["grants"][n]}
            for n in chunk]
    return {"networks": nets, "nextCursor": listing.next_cursor(last)}


def use_network(principal: Principal, network_id: str) -> dict[str, Any]:
    """control_use_network: sets and returns ``activeNetwork``."""
    rep, bound = scope(principal, network_id, "observe")
    t.update(*k.representative(rep["name"]), "SET activeNetwork = :n", n=bound.network_id)
    cache.representatives.drop(lambda key: key[1] == rep["name"])
    return {"activeNetwork": bound.network_id}


def _all_tasks(net: str) -> list[dict[str, Any]]:
    return t.query(k.tasks_index(net), index="GSI2", forward=False)


def network_status(principal: Principal, network_id: str | None) -> dict[str, Any]:
    """control_network_status: counts of agents, instances by availability, tasks by state,
    active claims and open channels, and the live claims and open channels themselves.

    ``claims`` lists every active claim (``relaynet.claims.view``: claimId, scope, holder,
    expiresAt, ...; oldest first) and ``channels`` every open channel as ``{channel_id, type,
    participants (names, opener first), next_speaker (null: anyone may speak), intent,
    expires_at}``. Both come from the reads the counts already need (the claims partition and
    the channels index), so an operator console needs no extra call to show them (issue 15;
    docs/protocol.md 6).
    """
    from relaynet import channels, claims

    _, p = scope(principal, network_id, "observe")
    d = load(p.network_id)
    now = clock.now_ms()
    by_avail = Counter(availability(i, now) for i in d.instances.values())
    by_state = Counter(task["state"] for task in _all_tasks(p.network_id))
    heads = [ch for ch in t.query(k.channels_index(p.network_id), index="GSI2")
             if channels.effective_state(ch, now) == "active"]
    active_claims = claims.active_for_network(p.network_id)
    return {"networkId": p.network_id, "agents": len(d.agents),
            "instances": {a: by_avail.get(a, 0) for a in ("available", "working", "offline", "stopped")},
            "tasks": {s: by_state.get(s, 0) for s in STATES},
            "activeClaims": len(active_claims), "openChannels": len(heads),
            "claims": active_claims, "channels": [channels.open_view(ch) for ch in heads]}


def list_agents(principal: Principal, network_id: str | None, limit: int = 50,
                cursor: str | None = None) -> dict[str, Any]:
    """control_list_agents: ``{agents, nextCursor}``, definitions with their instances, by name
    (PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    from relaynet import cursors

    _, p = scope(principal, network_id, "observe")
    listing = cursors.Listing("control_list_agents", p)
    after = listing.position(cursor)
    d = load(p.network_id)
    now = clock.now_ms()
    page, last = cursors.page_sorted(sorted(d.agents), lambda name: name, after, limit)
    return {"agents": [{**agent_view(d.agents[name]), "instances": [instance_view(i, now, d.agents[name]) for i in d.instances_of(name)]}
                       for name in page], "nextCursor": listing.next_cursor(last)}


def find_agents(principal: Principal, network_id: str | None, resource_key: str | None,
                action: str | None) -> dict[str, Any]:
    """control_find_agents: ``{candidates}`` as network_discover ranks them."""
    _, p = scope(principal, network_id, "observe")
    key = normalise_resource(resource_key, "resourceKey") if resource_key else None
    return {"candidates": candidates(load(p.network_id), key, action, clock.now_ms())}


def list_tasks(principal: Principal, network_id: str | None, status: str | None, limit: int,
               cursor: str | None) -> dict[str, Any]:
    """control_list_tasks: ``{tasks, nextCursor}``, task summaries newest first, optionally of
    one ``status`` (PROTOCOL.md 2 "Lists"; a page reads at most 1,000 tasks of the listing index;
    a bad cursor is InvalidArgument)."""
    from relaynet import cursors, tasks

    _, p = scope(principal, network_id, "observe")
    listing = cursors.Listing("control_list_tasks", p, status=status)
    after = listing.position(cursor)
    walk = t.iterate(k.tasks_index(p.network_id), index="GSI2", forward=False, sk_lt=after, page_size=100)
    page, last = cursors.page_scan(walk, lambda task: task["id"], lambda task: status is None or task["state"] == status,
                                   limit)
    return {"tasks": [tasks.summary(i) for i in page], "nextCursor": listing.next_cursor(last)}


def task_status(principal: Principal, network_id: str | None, task_id: str) -> dict[str, Any]:
    """control_task_status: one task as network_task_get shows it."""
    from relaynet import claims, tasks

    _, p = scope(principal, network_id, "observe")
    from relaynet.models.worker import TaskGetRequest

    return tasks.get(p, TaskGetRequest(taskId=task_id), claims.active_for_task)


def list_blocked(principal: Principal, network_id: str | None) -> dict[str, Any]:
    """control_list_blocked: ``{tasks, instances}``: blocked tasks, pending tasks nobody is
    eligible for, offline instances holding tasks."""
    from relaynet import routing, tasks

    _, p = scope(principal, network_id, "observe")
    d = load(p.network_id)
    now = clock.now_ms()
    stuck = []
    for task in _all_tasks(p.network_id):
        if task["state"] == "blocked":
            stuck.append({**tasks.summary(task), "why": "blocked",
                          "reason": next((h.get("reason") for h in reversed(task.get("history", []))
                                          if h["state"] == "blocked"), None)})
        elif task["state"] == "pending" and not routing.eligible(task, d, now):
            stuck.append({**tasks.summary(task), "why": "no_eligible_instance"})
    holding = [{"instanceId": i["id"], "agent": i["agent"], "lastSeenAt": clock.iso(int(i["lastSeenAt"])),
                "tasks": sorted(i.get("active") or [])}
               for i in d.instances.values() if availability(i, now) == "offline" and i.get("active")]
    return {"tasks": stuck, "instances": holding}


def history(principal: Principal, network_id: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
    """control_get_history: ``{events, nextCursor}``, newest first (PROTOCOL.md 2 "Lists"; a bad
    cursor is InvalidArgument)."""
    from relaynet import cursors

    _, p = scope(principal, network_id, "observe")
    listing = cursors.Listing("control_get_history", p)
    page = events.recent(p.network_id, limit, listing.position(cursor))
    return {"events": page["events"], "nextCursor": listing.next_cursor(page["after"])}


def get_thread(principal: Principal, network_id: str | None, thread_id: str) -> dict[str, Any]:
    """control_get_thread: ``{thread: {id, subject, participants, taskId, resource, createdAt}, messages}``."""
    _, p = scope(principal, network_id, "observe")
    items = t.query(k.thread_pk(p.network_id, thread_id))
    meta = next((i for i in items if i["SK"] == k.META), None)
    if meta is None:
        raise NotFound(f"no thread {thread_id!r} in this network")
    thread = {f: meta.get(f) for f in ("id", "subject", "taskId", "resource", "createdAt")}
    thread["participants"] = sorted(meta.get("participants", set()))
    fields = ("id", "threadId", "kind", "from", "to", "subject", "body", "taskId", "resource", "createdAt")
    messages = [{f: m[f] for f in fields if m.get(f) is not None} for m in items if m["SK"].startswith("MSG#")]
    return {"thread": thread, "messages": messages}


def graph(principal: Principal, network_id: str | None) -> dict[str, Any]:
    """control_get_graph: ``{nodes: [{id, kind, label}], edges: [{from, to, kind, label?}]}``.

    Nodes: agents, instances, groups, resources (and representatives that delegated or asked). Edges: ``serves`` (instance -> agent),
    ``member`` (agent -> group), ``responsible`` (agent -> resource), ``delegated`` (creator agent ->
    target, one per pair with a count), ``claims`` (instance -> resource or ``scope``), ``asked``
    (sender -> recipient, from the event stream's recent messages).
    """
    from relaynet import claims

    _, p = scope(principal, network_id, "observe")
    d = load(p.network_id)
    now = clock.now_ms()
    nodes = [{"id": f"agent:{n}", "kind": "agent", "label": n} for n in sorted(d.agents)]
    nodes += [{"id": f"instance:{i['id']}", "kind": "instance", "label": f"{i['agent']} {i['id'][-6:]}",
               "availability": availability(i, now)} for i in d.instances.values()]
    nodes += [{"id": f"group:{s}", "kind": "group", "label": s} for s in sorted(d.groups)]
    nodes += [{"id": f"resource:{r}", "kind": "resource", "label": r} for r in sorted(d.resources)]
    edges = [{"from": f"instance:{i['id']}", "to": f"agent:{i['agent']}", "kind": "serves"} for i in d.instances.values()]
    edges += [{"from": f"agent:{m}", "to": f"group:{s}", "kind": "member"}
              for s, g in sorted(d.groups.items()) for m in g.get("members", [])]
    edges += [{"from": f"agent:{n}", "to": f"resource:{r['resource']}", "kind": "responsible",
               "label": ",".join(r.get("actions", []))}
              for n, a in sorted(d.agents.items()) for r in a.get("responsibilities", []) if r.get("resource")]
    delegations: Counter = Counter()
    for task in _all_tasks(p.network_id):
        creator = task.get("creator") or {}
        source = f"agent:{creator['agent']}" if creator.get("agent") else f"representative:{creator.get('representative')}"
        target = task["target"]
        dest = (f"agent:{target['agent']}" if "agent" in target else f"group:{target['group']}" if "group" in target
                else f"instance:{target['instanceId']}" if "instanceId" in target else f"resource:{target['resource']}")
        delegations[(source, dest)] += 1
    edges += [{"from": s, "to": dst, "kind": "delegated", "label": str(n)} for (s, dst), n in sorted(delegations.items())]
    for c in claims.active_for_network(p.network_id):
        edges.append({"from": f"instance:{c['holder']['instanceId']}",
                      "to": f"resource:{c['resourceId']}" if c.get("resourceId") else f"scope:{c['scope']}",
                      "kind": "claims", "label": c["scope"]})
    asks: Counter = Counter()
    for evt in events.recent(p.network_id, 100)["events"]:
        sender = evt.get("fromAgent") or ""
        if evt.get("kind") == "message" and sender and evt.get("toName"):
            source = f"representative:{sender[4:]}" if sender.startswith("rep:") else f"agent:{sender}"
            asks[(source, evt["toName"])] += 1
    edges += [{"from": s, "to": dst, "kind": "asked", "label": str(n)} for (s, dst), n in sorted(asks.items())]
    reps = sorted({end for e in edges for end in (e["from"], e["to"]) if end.startswith("representative:")})
    nodes += [{"id": r, "kind": "representative", "label": r.split(":", 1)[1]} for r in reps]
    return {"nodes": nodes, "edges": edges}


def mermaid(g: dict[str, Any]) -> str:
    """``{nodes, edges}`` as a Mermaid ``flowchart LR`` (for a README or a terminal)."""
    def nid(raw: str) -> str:
        return "n_" + "".join(c if c.isalnum() else "_" for c in raw)

    shapes = {"agent": ("[", "]"), "instance": ("(", ")"), "group": ("{{", "}}"), "resource": ("[(", ")]"),
              "representative": ("[/", "/]")}
    lines = ["flowchart LR"]
    known = set()
    for n in g["nodes"]:
        left, right = shapes.get(n["kind"], ("[", "]"))
        label = n["label"].replace('"', "'")
        lines.append(f'  {nid(n["id"])}{left}"{label}"{right}')
        known.add(n["id"])
    for e in g["edges"]:
        for end in (e["from"], e["to"]):
            if end not in known:
                lines.append(f'  {nid(end)}["{end.split(":", 1)[1]}"]')
                known.add(end)
        label = e["kind"] + (f": {e['label']}" if e.get("label") else "")
        arrow = "-.->" if e["kind"] in ("serves", "member") else "-->"
        lines.append(f'  {nid(e["from"])} {arrow}|"{label}"| {nid(e["to"])}')
    return "\n".join(lines) + "\n"


def _confirm(rep: dict[str, Any], action: str, net: str, instance_id: str) -> dict[str, Any]:
    conf_id = "conf_" + secrets.token_urlsafe(16)
    expires = clock.now_ms() + CONFIRMATION_TTL_S * 1000
    pk, sk = k.confirmation(rep["name"], conf_id)
    t.put({"PK": pk, "SK": sk, "action": action, "networkId": net, "instanceId": instance_id,
           "expiresAt": expires, "ttl": expires // 1000 + 3600})
    return {"confirmationId": conf_id, "expiresAt": clock.iso(expires), "action": action, "instanceId": instance_id}


def _consume(rep: dict[str, Any], action: str, net: str, instance_id: str, confirmation_id: str) -> None:
    """Use a confirmation once; 400 when unknown, expired or for another action or instance."""
    pk, sk = k.confirmation(rep["name"], confirmation_id)
    ok = t.delete_if(pk, sk, "#a = :a AND networkId = :n AND instanceId = :i AND expiresAt > :now",
                     names={"#a": "action"}, a=action, n=net, i=instance_id, now=clock.now_ms())
    if not ok:
        raise InvalidArgument.field("confirmationId", "unknown, expired, already used, or for another operation")


def _instance(net: str, instance_id: str) -> dict[str, Any]:
    inst = t.get(*k.instance(net, instance_id))
    if inst is None:
        raise NotFound(f"no instance {instance_id!r} in this network")
    return inst


def stop_agent(principal: Principal, network_id: str | None, instance_id: str,
               confirmation_id: str | None) -> dict[str, Any]:
    """control_stop_agent, two steps. Step two revokes the token, marks the instance stopped,
    releases its claims and returns every non-terminal task offered or assigned to it to pending."""
    from relaynet import claims, tasks

    rep, p = scope(principal, network_id, "operate", objects(instance_id=instance_id))
    net = p.network_id
    inst = _instance(net, instance_id)
    if confirmation_id is None:
        return _confirm(rep, "stop", net, instance_id)
    _consume(rep, "stop", net, instance_id, confirmation_id)
    pk, sk = k.instance(net, instance_id)
    t.transact([
        t.tx_update(pk, sk, "SET #st = :stopped, stoppedAt = :now", names={"#st": "status"},
                    stopped="stopped", now=clock.now_ms()),
        t.tx_update(*k.token(inst["tokenHash"]), "SET revoked = :yes", yes=True),
        events.event_action(net, "instance", p.actor, f"instance {instance_id} of {inst['agent']} stopped",
                            instanceId=instance_id, state="stopped"),
    ])
    released = claims.release_for_holder(net, instance_id)
    requeued = tasks.requeue_for_instance(net, instance_id)
    return {"instanceId": instance_id, "status": "stopped", "releasedClaims": released, "requeuedTasks": requeued}


def restart_agent(principal: Principal, network_id: str | None, instance_id: str,
                  confirmation_id: str | None) -> dict[str, Any]:
    """control_restart_agent, two steps. Step two rotates the token (the old one is 401 at once),
    clears ``stopped`` and the instance's declared capabilities; returns ``{instanceId, token}``."""
    from relaynet.identity import INSTANCE_PREFIX, hash_token, mint_token, token_item

    rep, p = scope(principal, network_id, "operate", objects(instance_id=instance_id))
    net = p.network_id
    inst = _instance(net, instance_id)
    if confirmation_id is None:
        return _confirm(rep, "restart", net, instance_id)
    _consume(rep, "restart", net, instance_id, confirmation_id)
    token = mint_token(INSTANCE_PREFIX)
    now = clock.now_ms()
    t.transact([
        t.tx_update(*k.instance(net, instance_id),
                    "SET #st = :available, tokenHash = :h, lastSeenAt = :now, capabilities = :none REMOVE stoppedAt",
                    "tokenHash = :old", names={"#st": "status"}, available="available", h=hash_token(token), now=now,
                    none=[], old=inst["tokenHash"]),
        t.tx_update(*k.token(inst["tokenHash"]), "SET revoked = :yes", yes=True),
        t.tx_put(token_item(token, Principal("instance", net, instance_id, inst["agent"])), "attribute_not_exists(PK)"),
        events.event_action(net, "instance", p.actor, f"instance {instance_id} of {inst['agent']} restarted",
                            instanceId=instance_id, state="available"),
    ])
    return {"instanceId": instance_id, "token": token}


def launch_agent(principal: Principal, network_id: str | None, agent: str) -> dict[str, Any]:
    """control_launch_agent: a new instance; ``{instanceId, token}`` (the token is shown once)."""
    from relaynet.identity import launch_instance

    _, p = scope(principal, network_id, "operate", objects(agent=agent))
    return launch_instance(p.network_id, agent)


def release_claim(principal: Principal, network_id: str | None, claim_id: str) -> dict[str, Any]:
    """control_release_claim: any claim of the network; the result as network_release."""
    from relaynet import claims
    from relaynet.models.worker import ReleaseRequest

    _, p = scope(principal, network_id, "operate", objects(claim_id=claim_id))
    return claims.release(p, ReleaseRequest(claimId=claim_id), any_holder=True)


def cancel_task(principal: Principal, network_id: str | None, task_id: str, reason: str | None) -> dict[str, Any]:
    """control_cancel_task: ``{task}`` after cancelling a non-terminal task (409 when terminal)."""
    from relaynet import claims, tasks
    from relaynet.models.worker import TaskUpdateRequest

    _, p = scope(principal, network_id, "delegate", objects(task_id=task_id))
    return tasks.update(p, TaskUpdateRequest(taskId=task_id, status="cancelled", reason=reason),
                        on_terminal=claims.release_for_task)


def channel_send(principal: Principal, body: str, conversation_id: str | None) -> dict[str, Any]:
    """control_channel_send: a message in the representative's conversation with its owner."""
    conv = conversation_id or "default"
    msg_id = ids.new_id("msg")
    t.put({"PK": k.conversation(principal.rep, conv), "SK": f"MSG#{msg_id}", "id": msg_id, "conversationId": conv,
           "from": {"representative": principal.rep}, "body": body, "createdAt": clock.now_iso()})
    return {"messageId": msg_id, "conversationId": conv}


def channel_history(principal: Principal, conversation_id: str | None, limit: int,
                    cursor: str | None = None) -> dict[str, Any]:
    """control_channel_history: ``{messages, nextCursor}``: the newest ``limit`` messages of that
    conversation, oldest first within the page; ``nextCursor`` pages back to older ones
    (PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    from relaynet import cursors

    conv = conversation_id or "default"
    listing = cursors.Listing("control_channel_history", principal, conversationId=conv)
    after = listing.position(cursor)
    walk = t.iterate(k.conversation(principal.rep, conv), sk_lt=f"MSG#{after}" if after else "MSG#~",
                     forward=False, page_size=limit + 1)
    page, last = cursors.page_scan(walk, lambda i: i["id"], lambda i: i["SK"].startswith("MSG#"), limit)
    return {"messages": [{f: i[f] for f in ("id", "conversationId", "from", "body", "createdAt")} for i in reversed(page)],
            "nextCursor": listing.next_cursor(last)}


def _worker(model, req, **extra):
    """The worker-surface request a control request stands for (same argument names)."""
    fields = req.model_dump(exclude={"networkId"}, exclude_none=True)
    return model.model_validate({**fields, **extra})


def ask(principal: Principal, req) -> dict[str, Any]:
    """control_ask: as network_ask, sent by the representative (needs communicate)."""
    from relaynet import messaging
    from relaynet.models.worker import AskRequest

    to = {} if req.toInstance else {"name": req.toAgent}
    _, p = scope(principal, req.networkId, "communicate",
                 objects(instance_id=req.toInstance, thread_id=req.threadId, task_id=req.taskId, **to))
    return messaging.ask(p, _worker(AskRequest, req))


def reply(principal: Principal, req) -> dict[str, Any]:
    """control_reply: a reply in a thread, as the representative (needs communicate). A
    representative may write in any thread of a network it can communicate with."""
    from relaynet import messaging
    from relaynet.models.worker import ReplyRequest

    _, p = scope(principal, req.networkId, "communicate", objects(thread_id=req.threadId))
    return messaging.reply(p, _worker(ReplyRequest, req))


def delegate(principal: Principal, req) -> dict[str, Any]:
    """control_delegate: as network_delegate, created by the representative (needs delegate)."""
    from relaynet import tasks
    from relaynet.models.worker import DelegateRequest

    to = {} if req.toInstance else {"name": req.toAgent}
    _, p = scope(principal, req.networkId, "delegate", objects(instance_id=req.toInstance, **to))
    return tasks.delegate(p, _worker(DelegateRequest, req))


def wake(principal: Principal, req) -> dict[str, Any]:
    """control_wake_agent: a ``notice`` (reason default ``explicit``) in the agent's or instance's
    mailbox; ``toInstance`` wins over ``toAgent``, one of them is required. Returns
    ``{messageId, threadId, to}``. The notice's mailbox entry also fires the instance's (or, for
    an agent, every instance's) push endpoint with a ``wake`` event (relaynet.push)."""
    from relaynet import messaging

    to = {} if req.toInstance else {"agent": req.toAgent}
    _, p = scope(principal, req.networkId, "operate", objects(instance_id=req.toInstance, **to))
    net = p.network_id
    if req.toInstance:
        to = {"instanceId": req.toInstance, "agent": _instance(net, req.toInstance)["agent"]}
    elif req.toAgent:
        if t.get(*k.agent(net, req.toAgent)) is None:
            raise NotFound(f"no agent named {req.toAgent!r}")
        to = {"agent": req.toAgent}
    else:
        raise InvalidArgument("toAgent or toInstance is required", [{"field": "toAgent", "message": "required"},
                                                                   {"field": "toInstance", "message": "required"}])
    reason = req.reason or "explicit"
    return messaging.wake_notice(p, to, f"Wake up ({reason}): check network_inbox and your tasks.", reason)
