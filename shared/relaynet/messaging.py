"""Threads, messages and mailboxes (PROTOCOL.md 3 messages, 4.3 ask, 4.4 inbox, 4.5 reply).

A message is stored once in its thread (never deleted by reading) and once per recipient mailbox
(one item per mailbox and message, keyed by the message's ULID, so a mailbox reads oldest first).
All of it is one transaction: a message is in its thread and in every mailbox, or the call failed.
Delivery deletes the mailbox entry with a condition, so exactly one fetcher gets each message.
"""

from __future__ import annotations

import random
import time
from typing import Any

from relaynet import clock, ids
from relaynet.directory import Directory, load
from relaynet.errors import InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.models.worker import AskRequest, ReplyRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import keys as k
from relaynet.store import table as t

INBOX_LIMIT = 100
_FIRST_CHUNK = 96  # mailbox puts in the first transaction, next to the thread writes


def instructions(message: dict[str, Any]) -> str:
    """How to act on a delivered message with tools (PROTOCOL.md 4.4): plain output reaches no one."""
    kind = message["kind"]
    thr = message.get("threadId")
    if kind == "ask":
        return (f"Answer with network_reply(threadId='{thr}', body=...); your plain text output reaches no one. "
                "If it asks for work, the sender should delegate a task instead.")
    if kind == "reply":
        return (f"This answers your earlier message. Continue with network_reply(threadId='{thr}') if needed; "
                "plain output reaches no one.")
    if kind == "task_offer":
        return (f"You are offered task {message.get('taskId')}. Read it with network_task_get, then accept with "
                "network_task_update(status='accepted') before doing any work, and only then; if you ignore it the "
                "offer expires and goes to someone else.")
    if kind == "task_update":
        return (f"Task {message.get('taskId')} changed state. Read it with network_task_get; "
                "no reply is needed unless you want to act on it.")
    if kind == "channel":
        return message.get("instructions") or "A channel you take part in has a new envelope; check whose turn it is."
    return "For information. Act with tool calls only; plain output reaches no one."


def message_item(net: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The thread copy of ``msg`` (PK thread, SK message id)."""
    pk, sk = k.thread_message(net, msg["threadId"], msg["id"])
    return {"PK": pk, "SK": sk, **msg}


def mailbox_item(net: str, address: dict[str, str], msg: dict[str, Any]) -> dict[str, Any]:
    """The mailbox copy of ``msg`` for ``address`` (``{"agent"}`` or ``{"instanceId"}``)."""
    return {"PK": k.mailbox_pk(net, address), "SK": f"MSG#{msg['id']}", **msg,
            "senderInstance": (msg.get("from") or {}).get("instanceId") or "-"}


def new_message(kind: str, thread_id: str, sender: dict[str, Any], to: dict[str, str] | None, body: str,
                subject: str | None = None, task_id: str | None = None, resource: str | None = None,
                **extra: Any) -> dict[str, Any]:
    """A message document (PROTOCOL.md 3): ``{id, threadId, kind, from, to, subject, body, ...}``."""
    return {"id": ids.new_id("msg"), "threadId": thread_id, "kind": kind, "from": sender, "to": to,
            "subject": subject, "body": body, "taskId": task_id, "resource": resource,
            "createdAt": clock.now_iso(), **extra}


def thread_meta(net: str, thread_id: str, subject: str, participants: set[str], task_id: str | None = None,
                resource: str | None = None) -> dict[str, Any]:
    """A new thread's META item."""
    pk, sk = k.thread(net, thread_id)
    return {"PK": pk, "SK": sk, "id": thread_id, "subject": subject, "participants": participants,
            "taskId": task_id, "resource": resource, "createdAt": clock.now_iso(), "version": 0}


def deliver(net: str, msg: dict[str, Any], mailboxes: list[dict[str, str]], thread_actions: list[dict[str, Any]]) -> None:
    """Write ``msg`` to its thread and to every mailbox, plus ``thread_actions``, atomically.

    Up to ~96 mailboxes go in the one transaction with the thread writes; larger fan-outs put the
    remaining mailbox copies in further transactions whose puts are idempotent (same keys), so a
    retry completes them without duplicates. Raises TransactionCancelled if a condition failed.
    """
    actions = [*thread_actions, t.tx_put(message_item(net, msg))]
    items = [mailbox_item(net, addr, msg) for addr in mailboxes]
    head, rest = items[:_FIRST_CHUNK], items[_FIRST_CHUNK:]
    t.transact(actions + [t.tx_put(i) for i in head])
    for start in range(0, len(rest), t.MAX_TRANSACT_ITEMS):
        t.transact([t.tx_put(i) for i in rest[start:start + t.MAX_TRANSACT_ITEMS]])


def _recipients(d: Directory, principal: Principal, to_agent: str | None, to_instance: str | None) -> tuple[dict | None, list[dict], list[str]]:
    """(``to`` address, mailboxes, participant agents) for an ask. Raises NotFound."""
    if to_instance:
        inst = d.instances.get(to_instance)
        if inst is None:
            raise NotFound(f"no instance {to_instance!r} in this network")
        return {"instanceId": to_instance}, [{"instanceId": to_instance}], [inst["agent"]]
    if to_agent:
        if to_agent in d.agents:
            return {"agent": to_agent}, [{"agent": to_agent}], [to_agent]
        if to_agent in d.groups:
            members = [m for m in d.groups[to_agent].get("members", []) if m != principal.agent]
            return {"group": to_agent}, [{"agent": m} for m in members], members
        raise NotFound(f"no agent or group named {to_agent!r}", {"available": sorted([*d.agents, *d.groups])})
    return None, [], []


def _posters_update(meta: dict[str, Any], poster: str, to: dict | None) -> dict[str, Any]:
    """Thread bookkeeping for reply routing: the last two distinct posters and the last addressee."""
    last, prev = meta.get("lastPoster"), meta.get("prevPoster")
    if poster != last:
        prev, last = last, poster
    out = {"lastPoster": last, "prevPoster": prev}
    if to is not None:
        out["lastTo"] = to
    return out


def _thread_write(net: str, principal: Principal, meta: dict[str, Any] | None, thread_id: str, subject: str,
                  participants: list[str], to: dict | None, task_id: str | None, resource: str | None) -> dict[str, Any]:
    poster = principal.agent
    if meta is None:
        item = thread_meta(net, thread_id, subject, {poster, *participants}, task_id, resource)
        item.update(_posters_update({}, poster, to))
        return t.tx_put(item, "attribute_not_exists(PK)")
    upd = _posters_update(meta, poster, to)
    sets = ["lastPoster = :lp", "version = version + :one"]
    vals: dict[str, Any] = {"lp": upd["lastPoster"], "one": 1, "v": meta["version"], "parts": {poster, *participants}}
    if upd.get("prevPoster"):
        sets.append("prevPoster = :pp")
        vals["pp"] = upd["prevPoster"]
    if to is not None:
        sets.append("lastTo = :lt")
        vals["lt"] = to
    return t.tx_update(*k.thread(net, thread_id), "SET " + ", ".join(sets) + " ADD participants :parts",
                       "version = :v", **vals)


def _with_retry(fn, attempts: int = 6):
    """Run ``fn`` again when its transaction lost a race on the thread (version moved)."""
    for attempt in range(attempts):
        try:
            return fn()
        except t.TransactionCancelled:
            if attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0, 0.02 * (2 ** attempt)))


def ask(principal: Principal, req: AskRequest) -> dict[str, Any]:
    """network_ask (PROTOCOL.md 4.3). Returns ``{messageId, threadId, recipients}``.

    Raises NotFound (unknown recipient, thread or task; nothing stored), PermissionDenied (the
    caller's agent is not a participant of ``threadId``), InvalidArgument (bad resource).
    """
    net = principal.network_id
    resource = normalise_resource(req.resource) if req.resource else None
    d = load(net)
    to, mailboxes, participants = _recipients(d, principal, req.toAgent, None if not req.toInstance else req.toInstance)
    if req.taskId and t.get(*k.task(net, req.taskId)) is None:
        raise NotFound(f"no task {req.taskId!r} in this network")

    def attempt():
        meta = None
        if req.threadId:
            meta = t.get(*k.thread(net, req.threadId))
            if meta is None:
                raise NotFound(f"no thread {req.threadId!r} in this network")
            if principal.agent not in meta.get("participants", set()):
                raise PermissionDenied("your agent is not a participant of this thread")
        thread_id = req.threadId or ids.new_id("thr")
        subject = req.subject or (meta or {}).get("subject") or req.body[:80]
        msg = new_message("ask", thread_id, principal.actor, to, req.body, subject, req.taskId, resource)
        deliver(net, msg, mailboxes, [_thread_write(net, principal, meta, thread_id, subject, participants, to,
                                                    req.taskId, resource)])
        return {"messageId": msg["id"], "threadId": thread_id, "recipients": participants}

    return _with_retry(attempt)


def reply(principal: Principal, req: ReplyRequest) -> dict[str, Any]:
    """network_reply (PROTOCOL.md 4.5): to the thread's most recent other participant.

    The recipient is the agent that last posted other than the caller's agent; if the caller's
    agent posted everything, the last addressee. Raises NotFound, PermissionDenied (403).
    """
    net = principal.network_id

    def attempt():
        meta = t.get(*k.thread(net, req.threadId))
        if meta is None:
            raise NotFound(f"no thread {req.threadId!r} in this network")
        if principal.agent not in meta.get("participants", set()):
            raise PermissionDenied("your agent is not a participant of this thread")
        if meta.get("lastPoster") and meta["lastPoster"] != principal.agent:
            to: dict | None = {"agent": meta["lastPoster"]}
        elif meta.get("prevPoster"):
            to = {"agent": meta["prevPoster"]}
        else:
            to = meta.get("lastTo")
        mailboxes: list[dict] = []
        recipients: list[str] = []
        if to and "group" in to:
            grp = t.get(*k.group(net, to["group"])) or {}
            recipients = [m for m in grp.get("members", []) if m != principal.agent]
            mailboxes = [{"agent": m} for m in recipients]
        elif to and "instanceId" in to:
            inst = t.get(*k.instance(net, to["instanceId"])) or {}
            mailboxes, recipients = [to], [inst.get("agent", "")]
        elif to:
            mailboxes, recipients = [to], [to["agent"]]
        msg = new_message("reply", req.threadId, principal.actor, to, req.body, meta.get("subject"),
                          meta.get("taskId"), meta.get("resource"))
        deliver(net, msg, mailboxes, [_thread_write(net, principal, meta, req.threadId, meta.get("subject", ""),
                                                    [], None, None, None)])
        return {"messageId": msg["id"], "threadId": req.threadId, "recipients": recipients}

    return _with_retry(attempt)


_PUBLIC = ("id", "threadId", "kind", "from", "to", "subject", "body", "taskId", "resource", "channelId",
           "envelope", "createdAt")


def inbox(principal: Principal) -> dict[str, Any]:
    """network_inbox (PROTOCOL.md 4.4): undelivered messages, oldest first, at most 100.

    Reads the instance's and the agent's mailboxes, then deletes the chosen entries in one
    transaction whose every delete is conditional on the entry still existing; entries another
    fetcher took first are dropped and the rest retried, so each message goes to exactly one
    instance. Messages this instance sent are left for the agent's other instances.
    Returns ``{messages: [...with instructions], more}``.
    """
    net = principal.network_id
    boxes = [k.mailbox_pk(net, {"instanceId": principal.instance_id}), k.mailbox_pk(net, {"agent": principal.agent})]
    for _ in range(8):
        entries: list[dict[str, Any]] = []
        for pk in boxes:
            entries += t.query(pk, sk_prefix="MSG#", limit=INBOX_LIMIT + 1,
                               filter_expr="senderInstance <> :me", filter_values=t.values(me=principal.instance_id))
        entries.sort(key=lambda e: e["SK"])
        more = len(entries) > INBOX_LIMIT
        batch = entries[:INBOX_LIMIT]
        if not batch:
            return {"messages": [], "more": False}
        taken = _take(batch)
        if taken or not batch:
            messages = [{**{f: e[f] for f in _PUBLIC if e.get(f) is not None}, "instructions": instructions(e)}
                        for e in taken]
            return {"messages": messages, "more": more or len(taken) < len(batch)}
    return {"messages": [], "more": True}


def _take(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delete ``batch``'s mailbox entries atomically; drop those already gone and retry the rest."""
    pending = list(batch)
    for attempt in range(6):
        if not pending:
            return []
        try:
            t.transact([t.tx_delete(e["PK"], e["SK"], "attribute_exists(PK)") for e in pending])
            return pending
        except t.TransactionCancelled as exc:
            gone = {i for i, r in enumerate(exc.reasons) if r == "ConditionalCheckFailed"}
            pending = [e for i, e in enumerate(pending) if i not in gone]
            if not gone:
                time.sleep(random.uniform(0, 0.01 * (2 ** attempt)))
    return []
