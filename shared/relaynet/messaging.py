"""Threads, messages and mailboxes (PROTOCOL.md 3 messages, 4.3 ask, 4.4 inbox, 4.5 reply).

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
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Callable

from relaynet import cache, clock, events, ids, limits
from relaynet.errors import Conflict, NotFound, PermissionDenied, RateLimited, RelaynetError
from relaynet.identity import Principal, current_request_key
from relaynet.resources import normalise as normalise_resource
from relaynet.store import keys as k
from relaynet.store import table as t

if TYPE_CHECKING:  # annotations only: the sweep loads no pydantic models
    from relaynet.models.worker import AskRequest, ReplyRequest

logger = logging.getLogger("relaynet.messaging")

INBOX_LIMIT = 100
INLINE_MAX_BYTES = 1024  # a mailbox entry up to this size carries the message; a larger one points at the thread
MAX_INBOX_BYTES = 3 * 1024 * 1024  # one fetch's messages (a transaction's items total at most 4 MB)
SEND_RECORD_SECONDS = 3600  # as long as an Idempotency-Key is honoured (PROTOCOL.md 2)
_CHUNK = t.MAX_TRANSACT_ITEMS - 1  # mailbox entries per further transaction, next to the record's update
_SEND_ATTEMPTS = 6
_CHUNK_ATTEMPTS = 4
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


def message_item(net: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The thread copy of ``msg`` (PK thread, SK message id)."""
    pk, sk = k.thread_message(net, msg["threadId"], msg["id"])
    return {"PK": pk, "SK": sk, **msg}


def _sender_instance(msg: dict[str, Any]) -> str:
    return (msg.get("from") or {}).get("instanceId") or "-"


def mailbox_item(net: str, address: dict[str, str], msg: dict[str, Any]) -> dict[str, Any]:
    """A mailbox entry carrying all of ``msg``, for ``address``: ``{"agent"}``, or
    ``{"instanceId", "agent"}`` (an instance's mailbox; ``agent`` is the instance's agent).

    ``senderInstance`` lets :func:`inbox` leave an instance's own messages to its agent's other
    instances; ``GSI3PK``/``GSI3SK`` put the entry in its agent's mailbox view
    (:func:`relaynet.mailbox.summary`). Use :func:`mailbox_entry` when the thread copy is written
    in the same transaction. Raises ValueError for an instance address without its agent.
    """
    if not address.get("agent"):
        raise ValueError(f"a mailbox address needs the agent (of the instance): {address!r}")
    sk = f"MSG#{msg['id']}"
    return {"PK": k.mailbox_pk(net, address), "SK": sk, **msg, "senderInstance": _sender_instance(msg),
            "GSI3PK": k.mailbox_view(net, address["agent"]), "GSI3SK": sk}


def instance_address(net: str, instance_id: str) -> dict[str, str]:
    """``{"instanceId", "agent"}`` of an instance's mailbox (one GetItem); NotFound if unknown."""
    inst = _get(*k.instance(net, instance_id))
    if inst is None:
        raise NotFound(f"no instance {instance_id!r} in this network")
    return {"instanceId": instance_id, "agent": inst["agent"]}


def _approx_size(item: dict[str, Any]) -> int:
    """An upper bound of the item's DynamoDB size (its compact JSON is at least as long)."""
    return len(json.dumps(item, default=sorted, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def mailbox_entry(net: str, address: dict[str, str], msg: dict[str, Any]) -> dict[str, Any]:
    """The mailbox entry for ``address``: the whole message when it fits in one write unit, else a
    pointer to the thread copy (which must be written in the same transaction or before)."""
    item = mailbox_item(net, address, msg)
    if not msg.get("threadId") or _approx_size(item) <= INLINE_MAX_BYTES:
        return item
    return {"PK": item["PK"], "SK": item["SK"], "ref": "thread", "threadId": msg["threadId"], "kind": msg["kind"],
            "createdAt": msg["createdAt"], "senderInstance": item["senderInstance"],
            "taskId": msg.get("taskId"), "wakeReason": msg.get("wakeReason"),
            "GSI3PK": item["GSI3PK"], "GSI3SK": item["GSI3SK"]}


def thread_meta(net: str, thread_id: str, subject: str, participants: set[str], task_id: str | None = None,
                resource: str | None = None) -> dict[str, Any]:
    """A new thread's META item."""
    pk, sk = k.thread(net, thread_id)
    return {"PK": pk, "SK": sk, "id": thread_id, "subject": subject, "participants": participants,
            "taskId": task_id, "resource": resource, "createdAt": clock.now_iso(), "version": 0}


# --------------------------------------------------------------------------- sending

class _AlreadySent(Exception):
    """The send record of this Idempotency-Key exists: an earlier attempt's first transaction committed."""


def _send_key(net: str) -> tuple[str, str] | None:
    """The send record's key for the Idempotency-Key being served, or None (no key sent)."""
    scoped = current_request_key()
    if not scoped:
        return None
    return k.send_record(net, hashlib.sha256(f"{net}#{scoped}".encode("utf-8")).hexdigest())


def _request_hash(request: Any) -> str:
    body = request.model_dump(mode="json") if hasattr(request, "model_dump") else request
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _address_code(address: dict[str, str]) -> str:
    return f"I:{address['instanceId']}:{address['agent']}" if "instanceId" in address else f"A:{address['agent']}"


def _address(code: str) -> dict[str, str]:
    kind, _, value = code.partition(":")
    if kind == "I":
        inst, _, agent = value.partition(":")
        return {"instanceId": inst, "agent": agent}
    return {"agent": value}


def _chunk_token(msg_id: str, index: int) -> str:
    """A deterministic ClientRequestToken (at most 36 chars) for chunk ``index`` of ``msg_id``."""
    return hashlib.sha256(f"{msg_id}#{index}".encode("utf-8")).hexdigest()[:36]


def deliver(net: str, msg: dict[str, Any], mailboxes: list[dict[str, str]], thread_actions: list[dict[str, Any]],
            response: dict[str, Any] | None = None, record_key: tuple[str, str] | None = None,
            request_hash: str | None = None) -> None:
    """Write ``msg`` to its thread and to every mailbox, plus ``thread_actions``, atomically.

    The first transaction holds ``thread_actions``, the thread copy, the send record (when
    ``record_key`` is given) and as many mailbox entries as fit; the rest go in chunks (module
    docstring). Raises TransactionCancelled when the first transaction lost a race (nothing was
    written), :class:`_AlreadySent` when ``record_key`` already exists, and RateLimited /
    RelaynetError when a later chunk could not be written (the message is in its thread).
    """
    entries = [mailbox_entry(net, a, msg) for a in mailboxes]
    actions = [*thread_actions, t.tx_put(message_item(net, msg))]
    room = t.MAX_TRANSACT_ITEMS - len(actions) - (1 if record_key else 0)
    head, rest = entries[:room], entries[room:]
    chunks = [rest[i:i + _CHUNK] for i in range(0, len(rest), _CHUNK)]
    actions += [t.tx_put(e) for e in head]
    if record_key:
        now_s = clock.now_ms() // 1000
        record = {"PK": record_key[0], "SK": record_key[1], "type": "send", "messageId": msg["id"],
                  "threadId": msg["threadId"], "response": response, "requestHash": request_hash,
                  "chunks": len(chunks), "createdAt": clock.now_iso(), "ttl": now_s + SEND_RECORD_SECONDS}
        if chunks:
            record["pending"] = [_address_code(a) for a in mailboxes[room:]]
        actions.append(t.tx_put(record, "attribute_not_exists(PK) OR #ttl < :now", names={"#ttl": "ttl"}, now=now_s))
    try:
        t.transact(actions)
    except t.TransactionCancelled as exc:
        if record_key and len(exc.reasons) == len(actions) and exc.reasons[-1] == "ConditionalCheckFailed":
            raise _AlreadySent() from None
        raise
    _write_chunks(msg, chunks, record_key, done=set(), total=len(entries))


def _write_chunks(msg: dict[str, Any], chunks: list[list[dict[str, Any]]], record_key: tuple[str, str] | None,
                  done: set[str], total: int) -> None:
    """Put the remaining mailbox entries, one transaction per chunk; skip chunks marked done."""
    written = total - sum(len(c) for c in chunks)
    for index, chunk in enumerate(chunks):
        if str(index) in done:
            written += len(chunk)
            continue
        actions = [t.tx_put(e) for e in chunk]
        if record_key:
            actions.append(t.tx_update(*record_key, "ADD done :ds", "attribute_exists(PK) AND NOT contains(done, :d)",
                                       ds={str(index)}, d=str(index)))
        for attempt in range(_CHUNK_ATTEMPTS):
            try:
                t.transact(actions, token=_chunk_token(msg["id"], index))
                break
            except t.TransactionCancelled as exc:
                if record_key and exc.reasons and exc.reasons[-1] == "ConditionalCheckFailed":
                    break  # another attempt with this key wrote the chunk
                failure: Exception = exc
            except Exception as exc:  # throttled past botocore's retries, a network error
                failure = exc
            if attempt == _CHUNK_ATTEMPTS - 1:
                logger.error("message %s: chunk %d of %d not written: %s", msg["id"], index + 1, len(chunks), failure)
                note = f"message {msg['id']} is stored in thread {msg['threadId']} and in {written} of {total} mailboxes"
                if record_key:
                    raise RateLimited(note + "; retry with the same Idempotency-Key to deliver the rest",
                                      headers={"Retry-After": "1"}) from None
                raise RelaynetError(note + "; without an Idempotency-Key the rest cannot be delivered") from None
            time.sleep(random.uniform(0, 0.05 * (2 ** attempt)))
        written += len(chunk)


def _resume(net: str, record_key: tuple[str, str], request_hash: str) -> dict[str, Any]:
    """Finish a send whose first transaction committed in an earlier attempt; its first response."""
    rec = t.get(*record_key)
    if rec is None:
        raise t.TransactionCancelled([])  # expired and deleted in between: run the send afresh
    if rec.get("requestHash") != request_hash:
        raise Conflict("already_exists", "this Idempotency-Key was used with a different body")
    done = set(rec.get("done") or ())
    if len(done) < int(rec.get("chunks", 0)):
        item = t.get(*k.thread_message(net, rec["threadId"], rec["messageId"]))
        msg = {key: v for key, v in item.items() if key not in ("PK", "SK")}
        entries = [mailbox_entry(net, _address(a), msg) for a in rec.get("pending", [])]
        chunks = [entries[i:i + _CHUNK] for i in range(0, len(entries), _CHUNK)]
        _write_chunks(msg, chunks, record_key, done, total=len(entries))
    return rec["response"]


def _send(attempt: Callable[[], dict[str, Any]], net: str, request: Any) -> dict[str, Any]:
    """Run ``attempt`` (which reads the thread and calls :func:`deliver`) until its first
    transaction commits; resume instead when this Idempotency-Key's send record exists."""
    record_key = _send_key(net)
    request_hash = _request_hash(request)
    for n in range(_SEND_ATTEMPTS):
        try:
            return attempt(record_key, request_hash)
        except _AlreadySent:
            try:
                return _resume(net, record_key, request_hash)
            except t.TransactionCancelled:
                pass
        except t.TransactionCancelled:
            pass
        if n < _SEND_ATTEMPTS - 1:
            time.sleep(random.uniform(0, 0.02 * (2 ** n)))  # the thread moved under us: read it again
    raise RateLimited("the thread is busy; retry", headers={"Retry-After": "1"})


# --------------------------------------------------------------------------- recipients and threads

def _get(pk: str, sk: str) -> dict[str, Any] | None:
    """An item that rarely changes: eventually consistent, confirmed strongly before saying "absent"."""
    return t.get(pk, sk, consistent=False) or t.get(pk, sk)


def _unknown_name(net: str, name: str) -> NotFound:
    from relaynet.directory import load  # the whole directory, only to list what exists

    d = load(net)
    return NotFound(f"no agent or group named {name!r}", {"available": sorted([*d.agents, *d.groups])})


def _group_members(group: dict[str, Any], sender_agent: str) -> list[str]:
    return [m for m in dict.fromkeys(group.get("members") or []) if m != sender_agent]


def _recipients(net: str, principal: Principal, to_agent: str | None,
                to_instance: str | None) -> tuple[dict | None, list[dict], list[str]]:
    """(``to`` address, mailboxes, recipient agents) of an ask (PROTOCOL.md 4.3). Raises NotFound.

    Reads only what is addressed: the instance, or the agent and group items of the name.
    """
    if to_instance:
        inst = _get(*k.instance(net, to_instance))
        if inst is None:
            raise NotFound(f"no instance {to_instance!r} in this network")
        # an instance never receives its own message: addressed to itself, it is only stored in the thread
        boxes = [] if to_instance == principal.instance_id else [{"instanceId": to_instance, "agent": inst["agent"]}]
        return {"instanceId": to_instance}, boxes, [inst["agent"]]
    if to_agent:
        found = cache.definitions.get((t.table_name(), net, to_agent), lambda: _definition(net, to_agent))
        if found is None:
            raise _unknown_name(net, to_agent)
        if "agent" in found:
            return {"agent": to_agent}, [{"agent": to_agent}], [to_agent]
        members = _group_members(found["group"], principal.agent)
        return {"group": to_agent}, [{"agent": m} for m in members], members
    return None, [], []


def _definition(net: str, name: str) -> dict[str, Any] | None:
    """``{"agent": item}`` or ``{"group": item}`` for an address name, or None: one BatchGetItem
    (eventually consistent; confirmed strongly before saying "absent"). Callers keep it for the
    cache bound (relaynet.cache.definitions): a redefined group is seen at most that late."""
    keys = [k.agent(net, name), k.group(net, name)]
    got = t.batch_get(keys, consistent=False) or t.batch_get(keys)
    if keys[0] in got:
        return {"agent": got[keys[0]]}
    if keys[1] in got:
        return {"group": got[keys[1]]}
    return None


def addresses(mailboxes: list[dict[str, str]]) -> list[dict[str, str]]:
    """The ``recipients`` of an ask or reply (PROTOCOL.md 2, 4.3): the address of every mailbox
    the message was put in, ``{"agent": name}`` (a group's members each as an agent) or
    ``{"instanceId": id}``; empty when it is only stored in the thread (no recipient, the
    sender's own instance, or a representative, who reads threads with control_get_thread)."""
    return [k.public_address(box) for box in mailboxes]


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
    """Create the thread, or update it under its ``version`` (posters, addressee, participants)."""
    poster = principal.speaker
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


def _thread_for(net: str, principal: Principal, thread_id: str) -> dict[str, Any]:
    """The thread's META; NotFound, or PermissionDenied when the caller's agent is not a participant."""
    meta = t.get(*k.thread(net, thread_id))
    if meta is None:
        raise NotFound(f"no thread {thread_id!r} in this network")
    if principal.kind == "instance" and principal.agent not in (meta.get("participants") or set()):
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
    if req.taskId and _get(*k.task(net, req.taskId)) is None:
        raise NotFound(f"no task {req.taskId!r} in this network")
    limits.check_mailboxes(net, mailboxes)

    def attempt(record_key, request_hash):
        meta = _thread_for(net, principal, req.threadId) if req.threadId else None
        thread_id = req.threadId or ids.new_id("thr")
        subject = req.subject or (meta or {}).get("subject") or req.body[:80]
        msg = new_message("ask", thread_id, principal.actor, to, req.body, subject, req.taskId, resource)
        response = {"messageId": msg["id"], "threadId": thread_id, "recipients": addresses(mailboxes)}
        thread = _thread_write(net, principal, meta, thread_id, subject, recipients, to, req.taskId, resource)
        deliver(net, msg, mailboxes, [thread, _event(net, principal, msg, recipients)], response, record_key,
                request_hash)
        return response

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
    thread = thread_meta(net, thread_id, msg["subject"], {principal.speaker, *participants})
    deliver(net, msg, [box], [t.tx_put(thread, "attribute_not_exists(PK)"), _event(net, principal, msg, participants)])
    return {"messageId": msg["id"], "threadId": thread_id, "to": to}


def _reply_route(net: str, principal: Principal, meta: dict[str, Any]) -> tuple[dict | None, list[dict], list[str]]:
    """(``to``, mailboxes, recipient agents) of a reply: the agent that last posted other than the
    caller's; if the caller's agent posted everything, the thread's last addressee."""
    if meta.get("lastPoster") and meta["lastPoster"] != principal.speaker:
        to: dict | None = {"agent": meta["lastPoster"]}
    elif meta.get("prevPoster"):
        to = {"agent": meta["prevPoster"]}
    else:
        to = meta.get("lastTo")
    if not to:
        return None, [], []
    if to.get("agent", "").startswith("rep:"):  # a representative reads threads with control_get_thread
        return {"representative": to["agent"][4:]}, [], [to["agent"]]
    if "group" in to:
        members = _group_members(t.get(*k.group(net, to["group"])) or {}, principal.agent)
        return to, [{"agent": m} for m in members], members
    if "instanceId" in to:
        inst = t.get(*k.instance(net, to["instanceId"])) or {}
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
        msg = new_message("reply", req.threadId, principal.actor, to, req.body, meta.get("subject"),
                          meta.get("taskId"), meta.get("resource"))
        response = {"messageId": msg["id"], "threadId": req.threadId, "recipients": addresses(mailboxes)}
        thread = _thread_write(net, principal, meta, req.threadId, meta.get("subject", ""), recipients, None, None, None)
        deliver(net, msg, mailboxes, [thread, _event(net, principal, msg, recipients)], response, record_key,
                request_hash)
        return response

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
    boxes = [k.mailbox_pk(net, {"instanceId": me}), k.mailbox_pk(net, {"agent": principal.agent})]
    for _ in range(_INBOX_ROUNDS):
        entries: list[dict[str, Any]] = []
        for pk in boxes:
            entries += t.query(pk, sk_prefix="MSG#", limit=INBOX_LIMIT + 1,
                               filter_expr="senderInstance <> :me", filter_values=t.values(me=me))
        if not entries:
            return {"messages": [], "more": False}
        entries.sort(key=lambda e: e["SK"])
        batch = _batch(entries)
        taken = _take(batch)
        if taken:
            return {"messages": _materialise(net, taken), "more": len(entries) > len(batch)}
    return {"messages": [], "more": True}


def _batch(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The oldest entries one fetch hands out: at most 100, and at most MAX_INBOX_BYTES of them."""
    out, size = [], 0
    for e in entries[:INBOX_LIMIT]:
        size += _approx_size(e)
        if out and size > MAX_INBOX_BYTES:
            break
        out.append(e)
    return out


def _take(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delete ``batch``'s entries in one transaction; drop those already gone and retry the rest."""
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
            if not gone:  # a conflict with another fetcher's transaction: let it finish
                time.sleep(random.uniform(0, 0.01 * (2 ** attempt)))
    return []


def _public(msg: dict[str, Any]) -> dict[str, Any]:
    out = {f: msg[f] for f in _PUBLIC if msg.get(f) is not None}
    out["instructions"] = instructions(msg)
    return out


def _materialise(net: str, taken: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The public messages of the entries this fetch took; pointing entries read their thread copy.

    If the thread copies cannot be read, the taken entries are put back before the error
    propagates, so a failed fetch loses nothing.
    """
    refs = {e["SK"]: k.thread_message(net, e["threadId"], e["SK"].removeprefix("MSG#"))
            for e in taken if e.get("ref") == "thread"}
    copies: dict[tuple[str, str], dict[str, Any]] = {}
    if refs:
        try:
            copies = t.batch_get(refs.values(), consistent=False)
            missing = [key for key in refs.values() if key not in copies]
            if missing:
                copies.update(t.batch_get(missing))
            if any(key not in copies for key in refs.values()):
                raise RuntimeError("a mailbox entry points at a thread message that does not exist")
        except Exception:
            _restore(taken)
            raise
    return [_public(copies[refs[e["SK"]]] if e["SK"] in refs else e) for e in taken]


def _restore(entries: list[dict[str, Any]]) -> None:
    for e in entries:
        try:
            t.put(e)
        except Exception:  # best effort: the message stays readable in its thread
            logger.exception("could not put back mailbox entry %s %s", e["PK"], e["SK"])
