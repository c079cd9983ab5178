"""Threads, messages and mailboxes (PROTOCOL.md 3 messages, 4.3 ask, 4.4 inbox, 4.5 reply): who
receives a message and how a thread routes a reply. relaynet.store.mailboxes writes and takes the
items; the storage it uses is described here because it is part of the contract's guarantees.

Storage. A message is stored once in its thread (``NET#<net>#THR#<thr>`` / ``MSG#<msg>``) and is
never deleted by reading. Each recipient mailbox -- by agent name (``...#MBOX#A#<agent>``) or by
instance (``...#MBOX#I#<inst>``) -- gets one entry keyed ``MSG#<msg id>``, so a mailbox reads oldest
first. An entry carries the whole message when it fits in one write unit (1 KB); a larger one
only points at the thread copy (it costs one write unit per mailbox whatever the body's size,
and :func:`inbox` reads the bodies of such entries with one BatchGetItem).

Atomicity. The thread's META, the thread copy and the mailbox entries are one transaction: a
message is in its thread and in every mailbox, or the call failed. A group fan-out larger than
one transaction allows (100 items) puts the first mailboxes in that transaction and the rest in
further transactions of up to 99 entries ("chunks"). With an ``Idempotency-Key`` the first
transaction also writes a *send record* (``NET#<net>#SEND#<hash of the key>``) holding the
response, the request's hash, the remaining addresses and which chunks are done; each chunk
transaction marks itself done on the record under a condition. So a send that failed midway and
is retried with the same key (or re-run after a Lambda died before powertools completed its
record) completes the missing chunks and answers the first response: never a second message,
never a second copy. Without a key, a failed chunk cannot be resumed by anyone; the call answers
500 saying how many mailboxes got the message (the SDK's callers and the MCP bridge send keys).

Delivery (PROTOCOL.md 4.4). A fetch reads the instance's and the agent's mailboxes (strongly
consistent, the caller's own messages filtered out), takes the oldest 100 and deletes them in one
transaction of conditional deletes (``attribute_exists``): an entry another fetcher deleted first
cancels the transaction with ``ConditionalCheckFailed`` at its index, is dropped, and the rest is
retried, so each message goes to exactly one instance. One transaction rather than one
conditional DeleteItem per message because it is retry-safe: botocore resends a transaction with
the same ClientRequestToken, which DynamoDB answers as done, while a resent conditional delete
whose first attempt succeeded would fail its condition and lose the message.

Order. Message ids are ULIDs from :mod:`relaynet.ids`, strictly increasing within one process
(a burst within one millisecond keeps its order), so a mailbox is ordered per sending process.
Across Lambda containers ids are ordered by each container's millisecond clock: requests that
are *in flight at the same time* on two containers have no defined order (same millisecond:
random; clock skew between hosts is well under a millisecond with Amazon Time Sync), while
sequential sends (the next sent after the previous answered) are ordered. A message whose
transaction commits after a newer one was already fetched is delivered by the next fetch: late,
never lost, since a mailbox keeps no cursor (delivery deletes the entry).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Callable

from relaynet import cache, clock, events, ids, limits
from relaynet.config import settings
from relaynet.errors import Conflict, NotFound, PermissionDenied, RateLimited, RelaynetError
from relaynet.identity import Principal, current_request_key
from relaynet.resources import normalise as normalise_resource
from relaynet.store import directory as dir_store
from relaynet.store import mailboxes as store
from relaynet.store import tasks as task_store
from relaynet.store import unit_of_work as uow
from relaynet.store.mailboxes import Thread, mailbox_item  # mailbox_item: the one writer of mailbox entries (GSI3PK)

if TYPE_CHECKING:  # annotations only: the sweep loads no pydantic models
    from relaynet.models.worker import AskRequest, ReplyRequest

INBOX_LIMIT = 100
MAX_INBOX_BYTES = 3 * 1024 * 1024  # one fetch's messages (a transaction's items total at most 4 MB)
_SEND_ATTEMPTS = 8  # with relaynet.store.unit_of_work's backoff: up to about 0.5 s of pauses
_INBOX_ROUNDS = 8

_PUBLIC = ("id", "threadId", "kind", "from", "to", "subject", "body", "taskId", "resource", "channelId",
           "envelope", "state", "createdAt")


# --------------------------------------------------------------------------- documents

def instructions(message: dict[str, Any]) -> str:
    """How to act on a delivered message with tools (PROTOCOL.md 4.4): plain output reaches no one."""
    kind = message.get("kind")
    thr = message.get("threadId")
    task = message.get("taskId")
    if kind == "ask":
        return (f"Answer with network_reply(threadId='{thr}', body='...'): only tool calls reach other agents, "
                "your plain text output reaches no one. If it asks for substantial work, reply asking the sender "
                "to delegate it as a task (network_delegate).")
    if kind == "reply":
        return (f"This answers a message of your agent. To continue the conversation use "
                f"network_reply(threadId='{thr}', body='...'); plain text output reaches no one.")
    if kind == "task_offer":
        return (f"You are offered task {task}: read it with network_task_get(taskId='{task}'), then accept with "
                f"network_task_update(taskId='{task}', status='accepted') before doing any work, and only then "
                "(unaccepted, the offer expires and goes to another instance). Claims are coordination, not "
                "permission: claim what you will change with network_claim and never work on a scope another "
                "instance holds.")
    if kind == "task_update":
        state = f" is now {message['state']}" if message.get("state") else " changed state"
        return (f"Task {task}{state}. Read it with network_task_get(taskId='{task}') if you need to act; "
                "no reply is needed, and plain text output reaches no one.")
    if kind == "channel":
        return message.get("instructions") or ("A channel you take part in has a new envelope; act only on your "
                                               "turn, with the tool it names. Plain output reaches no one.")
    return "For your information; no reply is expected. Act only with tool calls: plain text output reaches no one."


def new_message(kind: str, thread_id: str, sender: dict[str, Any], to: dict[str, str] | None, body: str,
                subject: str | None = None, task_id: str | None = None, resource: str | None = None,
                **extra: Any) -> dict[str, Any]:
    """A message document (PROTOCOL.md 3): ``{id, threadId, kind, from, to, subject, body, ...}``."""
    return {"id": ids.new_id("msg"), "threadId": thread_id, "kind": kind, "from": sender, "to": to,
            "subject": subject, "body": body, "taskId": task_id, "resource": resource,
            "createdAt": clock.now_iso(), **extra}


def instance_address(net: str, instance_id: str) -> dict[str, str]:
    """``{"instanceId", "agent"}`` of an instance's mailbox (one GetItem); NotFound if unknown."""
    inst = dir_store.instance(net, instance_id, settled=False)
    if inst is None:
        raise NotFound(f"no instance {instance_id!r} in this network")
    return {"instanceId": instance_id, "agent": inst["agent"]}


# --------------------------------------------------------------------------- sending

def _send_key(net: str) -> tuple[str, str] | None:
    """The send record's key for the Idempotency-Key being served, or None (no key sent)."""
    scoped = current_request_key()
    return store.send_record_key(net, scoped) if scoped else None


def _request_hash(request: Any) -> str:
    body = request.model_dump(mode="json") if hasattr(request, "model_dump") else request
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _chunk_error(exc: store.ChunkFailed, keyed: bool) -> RelaynetError:
    """What the caller gets when a further chunk of a fan-out could not be written."""
    note = (f"message {exc.message['id']} is stored in thread {exc.message['threadId']} and in {exc.written} of "
            f"{exc.total} mailboxes")
    if keyed:
        return RateLimited(note + "; retry with the same Idempotency-Key to deliver the rest",
                           headers={"Retry-After": "1"})
    return RelaynetError(note + "; without an Idempotency-Key the rest cannot be delivered")


def deliver(net: str, msg: dict[str, Any], mailboxes: list[dict[str, str]], thread_actions: list[dict[str, Any]],
            response: dict[str, Any] | None = None, record_key: tuple[str, str] | None = None,
            request_hash: str | None = None) -> bool:
    """Write ``msg`` to its thread and to every mailbox, plus ``thread_actions``, atomically
    (relaynet.store.mailboxes.deliver). Returns False when the first transaction lost a race
    (nothing was written; read the thread again). Raises AlreadySent when ``record_key`` already
    exists, and RateLimited (with a key) / RelaynetError (without) when a later chunk could not
    be written (the message is in its thread)."""
    try:
        return store.deliver(net, msg, mailboxes, thread_actions, response, record_key, request_hash)
    except store.ChunkFailed as exc:
        raise _chunk_error(exc, record_key is not None) from None


def _resume(net: str, record_key: tuple[str, str], request_hash: str) -> dict[str, Any] | None:
    """Finish a send whose first transaction committed in an earlier attempt; its first response,
    or None when its record expired and went in between (run the send afresh). Conflict
    ``already_exists`` when the key was used with another body."""
    rec = store.get_send_record(record_key)
    if rec is None:
        return None
    if rec.requestHash != request_hash:
        raise Conflict("already_exists", "this Idempotency-Key was used with a different body")
    try:
        store.resume_chunks(net, record_key, rec)
    except store.ChunkFailed as exc:
        raise _chunk_error(exc, True) from None
    return rec.response


def _send(attempt: Callable[..., dict[str, Any] | None], net: str, request: Any) -> dict[str, Any]:
    """Run ``attempt`` (which reads the thread and calls :func:`deliver`; None when that lost a
    race) until its first transaction commits; resume instead when this Idempotency-Key's send
    record exists."""
    record_key = _send_key(net)
    request_hash = _request_hash(request)
    for _ in uow.attempts(_SEND_ATTEMPTS):  # after a lost race the thread moved under us: read it again
        try:
            sent = attempt(record_key, request_hash)
        except store.AlreadySent:
            sent = _resume(net, record_key, request_hash)
        if sent is not None:
            return sent
    raise RateLimited("the thread is busy; retry", headers={"Retry-After": "1"})


# --------------------------------------------------------------------------- recipients and threads

def _unknown_name(net: str, name: str) -> NotFound:
    """The 404 of an unknown address name, listing what exists (reads the whole directory)."""
    return NotFound(f"no agent or group named {name!r}", {"available": dir_store.address_names(net)})


def _group_members(group: dict[str, Any], sender_agent: str) -> list[str]:
    return [m for m in dict.fromkeys(group.get("members") or []) if m != sender_agent]


def _recipients(net: str, principal: Principal, to_agent: str | None,
                to_instance: str | None) -> tuple[dict | None, list[dict], list[str]]:
    """(``to`` address, mailboxes, recipient agents) of an ask (PROTOCOL.md 4.3). Raises NotFound.

    Reads only what is addressed: the instance, or the agent and group items of the name.
    """
    if to_instance:
        inst = dir_store.instance(net, to_instance, settled=False)
        if inst is None:
            raise NotFound(f"no instance {to_instance!r} in this network")
        # an instance never receives its own message: addressed to itself, it is only stored in the thread
        boxes = [] if to_instance == principal.instance_id else [{"instanceId": to_instance, "agent": inst["agent"]}]
        return {"instanceId": to_instance}, boxes, [inst["agent"]]
    if to_agent:
        # an agent or group definition, kept for the cache bound (relaynet.cache.definitions,
        # RELAYNET_CACHE_SECONDS): a redefined group is seen at most that late; absent is never kept
        found = cache.definitions.get((settings().table_name, net, to_agent),
                                      lambda: dir_store.agent_or_group(net, to_agent))
        if found is None:
            raise _unknown_name(net, to_agent)
        kind, item = found
        if kind == "agent":
            return {"agent": to_agent}, [{"agent": to_agent}], [to_agent]
        members = _group_members(item, principal.agent)
        return {"group": to_agent}, [{"agent": m} for m in members], members
    return None, [], []


def addresses(mailboxes: list[dict[str, str]]) -> list[dict[str, str]]:
    """The ``recipients`` of an ask or reply (PROTOCOL.md 2, 4.3): the address of every mailbox
    the message was put in, ``{"agent": name}`` (a group's members each as an agent) or
    ``{"instanceId": id}``; empty when it is only stored in the thread (no recipient, the
    sender's own instance, or a representative, who reads threads with control_get_thread)."""
    return [{"instanceId": box["instanceId"]} if "instanceId" in box else {"agent": box["agent"]}
            for box in mailboxes]


def posters_after(thread: Thread | None, poster: str) -> tuple[str, str | None]:
    """``(lastPoster, prevPoster)`` of a thread after ``poster`` posts in it: the last two
    distinct posters, which route a reply (PROTOCOL.md 4.5)."""
    last, prev = (thread.lastPoster, thread.prevPoster) if thread else (None, None)
    if poster != last:
        prev, last = last, poster
    return last, prev


def _thread_write(net: str, principal: Principal, meta: Thread | None, thread_id: str, subject: str,
                  participants: list[str], to: dict | None, task_id: str | None, resource: str | None) -> dict[str, Any]:
    """Create the thread, or update it under its ``version`` (posters, addressee, participants)."""
    poster = principal.speaker
    last, prev = posters_after(meta, poster)
    if meta is None:
        return store.create_thread(Thread(id=thread_id, subject=subject, participants={poster, *participants},
                                          taskId=task_id, resource=resource, lastPoster=last, prevPoster=prev,
                                          lastTo=to), net)
    return store.post_to_thread(net, meta, last, prev, to, {poster, *participants})


def _thread_for(net: str, principal: Principal, thread_id: str) -> Thread:
    """The thread's META; NotFound, or PermissionDenied when the caller's agent is not a participant."""
    meta = store.get_thread(net, thread_id)
    if meta is None:
        raise NotFound(f"no thread {thread_id!r} in this network")
    if principal.kind == "instance" and principal.agent not in meta.participants:
        raise PermissionDenied("your agent is not a participant of this thread")
    return meta  # a representative may write in any thread of a network it can communicate with


# --------------------------------------------------------------------------- the tools

def ask(principal: Principal, req: AskRequest) -> dict[str, Any]:
    """network_ask (PROTOCOL.md 4.3). Returns ``{messageId, threadId, recipients}``, recipients
    as addresses (:func:`addresses`).

    Raises InvalidArgument (bad resource), NotFound (unknown recipient, thread or task; nothing is
    stored), PermissionDenied (the caller's agent is not a participant of ``threadId``), Conflict
    ``already_exists`` (a resumed Idempotency-Key with another body).
    """
    net = principal.network_id
    resource = normalise_resource(req.resource) if req.resource else None
    to, mailboxes, recipients = _recipients(net, principal, req.toAgent, req.toInstance)
    if req.taskId and not task_store.exists(net, req.taskId):
        raise NotFound(f"no task {req.taskId!r} in this network")
    # the thread's 404/403 before the abuse limits' 429 (PROTOCOL.md 2); a lost race reads it again
    first = [_thread_for(net, principal, req.threadId)] if req.threadId else []
    limits.check_mailboxes(net, mailboxes)

    def attempt(record_key, request_hash):
        meta = (first.pop() if first else _thread_for(net, principal, req.threadId)) if req.threadId else None
        thread_id = req.threadId or ids.new_id("thr")
        subject = req.subject or (meta.subject if meta else None) or req.body[:80]
        msg = new_message("ask", thread_id, principal.actor, to, req.body, subject, req.taskId, resource)
        response = {"messageId": msg["id"], "threadId": thread_id, "recipients": addresses(mailboxes)}
        thread = _thread_write(net, principal, meta, thread_id, subject, recipients, to, req.taskId, resource)
        delivered = deliver(net, msg, mailboxes, [thread, _event(net, principal, msg, recipients)], response,
                            record_key, request_hash)
        return response if delivered else None

    return _send(attempt, net, req)


def _event(net: str, principal: Principal, msg: dict[str, Any], recipients: list[str]) -> dict[str, Any]:
    """The event-stream entry of a message (PROTOCOL.md 6 history), in the message's transaction."""
    to = msg.get("to") or {}
    to_name = (f"agent:{to['agent']}" if "agent" in to else f"group:{to['group']}" if "group" in to
               else f"instance:{to['instanceId']}" if "instanceId" in to else None)
    return events.event_action(net, "message", principal.actor, f"{msg['kind']} from {principal.speaker}: "
                               f"{msg['body'][:120]}", messageId=msg["id"], threadId=msg["threadId"],
                               fromAgent=principal.speaker, toName=to_name, recipients=recipients[:200] or None)


def wake_notice(principal: Principal, box: dict[str, str], body: str, reason: str) -> dict[str, Any]:
    """A wake-up ``notice`` in mailbox ``box`` (``{"agent"}`` or ``{"instanceId", "agent"}``), in a
    new thread: ``{messageId, threadId, to}`` (control_wake_agent). The message carries
    ``wakeReason``, which makes the webhook notifier send a ``wake`` event (relaynet.push)."""
    net = principal.network_id
    thread_id = ids.new_id("thr")
    to = {"instanceId": box["instanceId"]} if "instanceId" in box else {"agent": box["agent"]}
    msg = new_message("notice", thread_id, principal.actor, to, body, f"wake: {reason}", wakeReason=reason)
    participants = [to["agent"]] if "agent" in to else []
    thread = store.create_thread(Thread(id=thread_id, subject=msg["subject"],
                                        participants={principal.speaker, *participants}), net)
    if not deliver(net, msg, [box], [thread, _event(net, principal, msg, participants)]):  # its thread is new
        raise RateLimited("the mailbox is busy; retry", headers={"Retry-After": "1"})
    return {"messageId": msg["id"], "threadId": thread_id, "to": to}


def reply_target(thread: Thread, speaker: str) -> dict[str, str] | None:
    """Whom a reply in ``thread`` by ``speaker`` (an agent name, or ``rep:<name>``) goes to
    (PROTOCOL.md 4.5): the last poster other than the speaker; if the speaker posted last, the
    one before; if the speaker posted everything, the thread's last addressee (``{"agent"}``,
    ``{"group"}`` or ``{"instanceId"}``); None when there is nobody."""
    if thread.lastPoster and thread.lastPoster != speaker:
        return {"agent": thread.lastPoster}
    if thread.prevPoster:
        return {"agent": thread.prevPoster}
    return thread.lastTo or None


def _reply_route(net: str, principal: Principal, meta: Thread) -> tuple[dict | None, list[dict], list[str]]:
    """(``to``, mailboxes, recipient agents) of a reply (:func:`reply_target`, then its mailboxes)."""
    to = reply_target(meta, principal.speaker)
    if not to:
        return None, [], []
    if to.get("agent", "").startswith("rep:"):  # a representative reads threads with control_get_thread
        return {"representative": to["agent"][4:]}, [], [to["agent"]]
    if "group" in to:
        members = _group_members(dir_store.group(net, to["group"]) or {}, principal.agent)
        return to, [{"agent": m} for m in members], members
    if "instanceId" in to:
        inst = dir_store.instance(net, to["instanceId"]) or {}
        boxes = [] if to["instanceId"] == principal.instance_id else [to]
        return to, boxes, [inst["agent"]] if inst.get("agent") else []
    return to, [to], [to["agent"]]


def reply(principal: Principal, req: ReplyRequest) -> dict[str, Any]:
    """network_reply (PROTOCOL.md 4.5): to the thread's most recent other participant.

    Raises NotFound (unknown thread), PermissionDenied (403: the caller's agent is not a
    participant), Conflict ``already_exists`` (a resumed Idempotency-Key with another body).
    """
    net = principal.network_id

    def attempt(record_key, request_hash):
        meta = _thread_for(net, principal, req.threadId)
        to, mailboxes, recipients = _reply_route(net, principal, meta)
        limits.check_mailboxes(net, mailboxes)
        msg = new_message("reply", req.threadId, principal.actor, to, req.body, meta.subject,
                          meta.taskId, meta.resource)
        response = {"messageId": msg["id"], "threadId": req.threadId, "recipients": addresses(mailboxes)}
        thread = _thread_write(net, principal, meta, req.threadId, meta.subject or "", recipients, None, None, None)
        delivered = deliver(net, msg, mailboxes, [thread, _event(net, principal, msg, recipients)], response,
                            record_key, request_hash)
        return response if delivered else None

    return _send(attempt, net, req)


# --------------------------------------------------------------------------- the inbox

def inbox(principal: Principal) -> dict[str, Any]:
    """network_inbox (PROTOCOL.md 4.4): undelivered messages, oldest first, at most 100.

    Reads the instance's and the agent's mailboxes (never this instance's own messages), takes
    the oldest entries and deletes them conditionally (module docstring), so each message goes
    to exactly one instance; entries another fetcher took first are dropped, and if it took them
    all the mailboxes are read again. Returns ``{messages: [...with instructions], more}``;
    ``more`` is true when undelivered messages remain.
    """
    net = principal.network_id
    me = principal.instance_id
    boxes = [{"instanceId": me}, {"agent": principal.agent}]
    for _ in range(_INBOX_ROUNDS):
        entries: list[dict[str, Any]] = []
        for box in boxes:
            entries += store.undelivered(net, box, INBOX_LIMIT + 1, not_from_instance=me)
        if not entries:
            return {"messages": [], "more": False}
        entries.sort(key=store.sort_key)
        batch = _batch(entries)
        taken = store.take(batch)
        if taken:
            return {"messages": [_public(m) for m in store.documents(net, taken)], "more": len(entries) > len(batch)}
    return {"messages": [], "more": True}


def _batch(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The oldest entries one fetch hands out: at most 100, and at most MAX_INBOX_BYTES of them."""
    out, size = [], 0
    for e in entries[:INBOX_LIMIT]:
        size += store.approx_size(e)
        if out and size > MAX_INBOX_BYTES:
            break
        out.append(e)
    return out


def _public(msg: dict[str, Any]) -> dict[str, Any]:
    out = {f: msg[f] for f in _PUBLIC if msg.get(f) is not None}
    out["instructions"] = instructions(msg)
    return out
