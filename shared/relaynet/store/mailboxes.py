"""The messages repository: threads, thread copies, mailbox entries and send records (the items,
their keys, the GSI3 mailbox view, and the transactions that write and take them).

relaynet.messaging decides who receives what; this module decides how that lands in the table
(docs/architecture.md "The table": thread, thread message, mailbox entry, send record). A message
crosses this boundary as its protocol document (PROTOCOL.md 3: ``{id, threadId, kind, from, to,
...}``, a dict because kinds carry their own fields); a thread's META as :class:`Thread`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable, Iterator

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict, Field

from relaynet import clock, observability
from relaynet.store import keys as k
from relaynet.store import table as t
from relaynet.store import unit_of_work as uow

logger = Logger(child=True)  # relaynet.observability.logger's child: "<service>.mailboxes"


INLINE_MAX_BYTES = 1024  # a mailbox entry up to this size carries the message; a larger one points at the thread
SEND_RECORD_SECONDS = 3600  # as long as an Idempotency-Key is honoured (PROTOCOL.md 2)
CHUNK = t.MAX_TRANSACT_ITEMS - 1  # mailbox entries per further transaction, next to the record's update
CHUNK_ATTEMPTS = 6  # after botocore's own retries; relaynet.store.unit_of_work's backoff between them
_MSG = "MSG#"


# --------------------------------------------------------------------------- entities

class Thread(BaseModel):
    """A thread's META item (``NET#<net>#THR#<thr>`` / ``META``): who takes part and, for reply
    routing (PROTOCOL.md 4.5), the last two distinct posters and the last addressee. ``version``
    is bumped by every write, which is conditional on the version read."""

    model_config = ConfigDict(extra="ignore")

    id: str
    subject: str | None = None
    participants: set[str] = Field(default_factory=set)
    taskId: str | None = None
    resource: str | None = None
    createdAt: str | None = None
    lastPoster: str | None = None
    prevPoster: str | None = None
    lastTo: dict[str, str] | None = None
    version: int = 0


class SendRecord(BaseModel):
    """A send's durable record (``NET#<net>#SEND#<sha256>`` / ``SEND``): the first response, the
    request's hash, how many further chunks the fan-out has, which are ``done``, and the
    addresses (:func:`address_code`) still ``pending`` after the first transaction."""

    model_config = ConfigDict(extra="ignore")

    messageId: str
    threadId: str
    response: dict[str, Any] | None = None
    requestHash: str | None = None
    chunks: int = 0
    done: set[str] = Field(default_factory=set)
    pending: list[str] = Field(default_factory=list)


class AlreadySent(Exception):
    """The send record of this Idempotency-Key exists: an earlier attempt's first transaction committed."""


class ChunkFailed(Exception):
    """A further chunk of a fan-out could not be written after :data:`CHUNK_ATTEMPTS`: the message
    is in its thread and in ``written`` of ``total`` mailboxes."""

    def __init__(self, msg: dict[str, Any], written: int, total: int, cause: Exception):
        super().__init__(f"message {msg['id']}: chunk not written ({cause})")
        self.message, self.written, self.total, self.cause = msg, written, total, cause


# --------------------------------------------------------------------------- items

def message_item(net: str, msg: dict[str, Any]) -> dict[str, Any]:
    """The thread copy of ``msg`` (PK thread, SK message id)."""
    pk, sk = k.thread_message(net, msg["threadId"], msg["id"])
    return {"PK": pk, "SK": sk, **msg}


def _sender_instance(msg: dict[str, Any]) -> str:
    return (msg.get("from") or {}).get("instanceId") or "-"


def mailbox_item(net: str, address: dict[str, str], msg: dict[str, Any]) -> dict[str, Any]:
    """A mailbox entry carrying all of ``msg``, for ``address``: ``{"agent"}``, or
    ``{"instanceId", "agent"}`` (an instance's mailbox; ``agent`` is the instance's agent).

    ``senderInstance`` lets the inbox leave an instance's own messages to its agent's other
    instances; ``GSI3PK``/``GSI3SK`` put the entry in its agent's mailbox view
    (:func:`summary_page`). Use :func:`mailbox_entry` when the thread copy is written in the same
    transaction. Raises ValueError for an instance address without its agent.
    """
    if not address.get("agent"):
        raise ValueError(f"a mailbox address needs the agent (of the instance): {address!r}")
    sk = _MSG + msg["id"]
    return {"PK": k.mailbox_pk(net, address), "SK": sk, **msg, "senderInstance": _sender_instance(msg),
            "GSI3PK": k.mailbox_view(net, address["agent"]), "GSI3SK": sk, **_bridge(address)}


def _bridge(address: dict[str, str]) -> dict[str, str]:
    """``{"bridge": name}`` when the address is an instance the hub runs (``bridge`` on the address:
    "a2a", relaynet.a2a.bridge), so the entry's stream record can start that bridge at the write
    (the A2aBridgeFunction's stream filter); else nothing."""
    return {"bridge": address["bridge"]} if address.get("bridge") else {}


def approx_size(item: dict[str, Any]) -> int:
    """An upper bound of the item's DynamoDB size in bytes (its compact JSON is at least as long)."""
    return len(json.dumps(item, default=sorted, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def mailbox_entry(net: str, address: dict[str, str], msg: dict[str, Any]) -> dict[str, Any]:
    """The mailbox entry for ``address``: the whole message when it fits in one write unit, else a
    pointer to the thread copy (which must be written in the same transaction or before)."""
    item = mailbox_item(net, address, msg)
    if not msg.get("threadId") or approx_size(item) <= INLINE_MAX_BYTES:
        return item
    return {"PK": item["PK"], "SK": item["SK"], "ref": "thread", "threadId": msg["threadId"], "kind": msg["kind"],
            "createdAt": msg["createdAt"], "senderInstance": item["senderInstance"],
            "taskId": msg.get("taskId"), "wakeReason": msg.get("wakeReason"),
            "GSI3PK": item["GSI3PK"], "GSI3SK": item["GSI3SK"], **_bridge(address)}


def thread_meta(net: str, thread_id: str, subject: str, participants: set[str], task_id: str | None = None,
                resource: str | None = None) -> dict[str, Any]:
    """A new thread's META item."""
    pk, sk = k.thread(net, thread_id)
    return {"PK": pk, "SK": sk, "id": thread_id, "subject": subject, "participants": participants,
            "taskId": task_id, "resource": resource, "createdAt": clock.now_iso(), "version": 0}


# --------------------------------------------------------------------------- threads

def get_thread(net: str, thread_id: str) -> Thread | None:
    """The thread's META (one strongly consistent GetItem), or None."""
    item = t.get(*k.thread(net, thread_id))
    return None if item is None else Thread.model_validate(item)


def thread_and_messages(net: str, thread_id: str) -> tuple[Thread | None, list[dict[str, Any]]]:
    """(the thread's META or None, its message documents oldest first): one Query of the thread."""
    items = t.query(k.thread_pk(net, thread_id))
    meta = next((i for i in items if i["SK"] == k.META), None)
    messages = [{key: v for key, v in i.items() if key not in ("PK", "SK")} for i in items if i["SK"].startswith(_MSG)]
    return (None if meta is None else Thread.model_validate(meta)), messages


def thread_messages(net: str, thread_id: str) -> list[dict[str, Any]]:
    """Every message document of a thread, oldest first (the META left out)."""
    return [{key: v for key, v in i.items() if key not in ("PK", "SK")}
            for i in t.query(k.thread_pk(net, thread_id), sk_prefix=_MSG)]


def create_thread(thread: Thread, net: str) -> dict[str, Any]:
    """The transaction action creating ``thread`` (on ``attribute_not_exists``)."""
    item = thread_meta(net, thread.id, thread.subject or "", thread.participants, thread.taskId, thread.resource)
    item.update({"lastPoster": thread.lastPoster, "prevPoster": thread.prevPoster, "lastTo": thread.lastTo})
    return t.tx_put(item, "attribute_not_exists(PK)")


def post_to_thread(net: str, seen: Thread, last_poster: str, prev_poster: str | None, to: dict | None,
                   participants: set[str]) -> dict[str, Any]:
    """The transaction action recording a post in a thread read at ``seen.version``: the posters,
    the addressee (when not None), more participants, ``version + 1``; cancelled when the thread
    moved since it was read."""
    sets = ["lastPoster = :lp", "version = version + :one"]
    vals: dict[str, Any] = {"lp": last_poster, "one": 1, "v": seen.version, "parts": participants}
    if prev_poster:
        sets.append("prevPoster = :pp")
        vals["pp"] = prev_poster
    if to is not None:
        sets.append("lastTo = :lt")
        vals["lt"] = to
    return t.tx_update(*k.thread(net, seen.id), "SET " + ", ".join(sets) + " ADD participants :parts",
                       "version = :v", **vals)


# --------------------------------------------------------------------------- sending

def send_record_key(net: str, scoped_key: str) -> tuple[str, str]:
    """The send record's key for an Idempotency-Key already scoped to its tool and caller."""
    return k.send_record(net, hashlib.sha256(f"{net}#{scoped_key}".encode("utf-8")).hexdigest())


def address_code(address: dict[str, str]) -> str:
    """A mailbox address as the short string a send record keeps in ``pending``."""
    return f"I:{address['instanceId']}:{address['agent']}" if "instanceId" in address else f"A:{address['agent']}"


def address_of(code: str) -> dict[str, str]:
    """The mailbox address of an :func:`address_code`."""
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
            request_hash: str | None = None) -> bool:
    """Write ``msg`` to its thread and to every mailbox, plus ``thread_actions``, atomically.

    The first transaction holds ``thread_actions``, the thread copy, the send record (when
    ``record_key`` is given) and as many mailbox entries as fit; the rest go in chunks of
    :data:`CHUNK` (relaynet.messaging's docstring). Returns True when written, False when the
    first transaction lost a race (nothing was written). Raises :class:`AlreadySent` when
    ``record_key`` already exists, and :class:`ChunkFailed` when a later chunk could not be written.
    """
    entries = [mailbox_entry(net, a, msg) for a in mailboxes]
    actions = [*thread_actions, t.tx_put(message_item(net, msg))]
    room = t.MAX_TRANSACT_ITEMS - len(actions) - (1 if record_key else 0)
    head, rest = entries[:room], entries[room:]
    chunks = [rest[i:i + CHUNK] for i in range(0, len(rest), CHUNK)]
    actions += [t.tx_put(e) for e in head]
    if record_key:
        now_s = clock.now_ms() // 1000
        record = {"PK": record_key[0], "SK": record_key[1], "type": "send", "messageId": msg["id"],
                  "threadId": msg["threadId"], "response": response, "requestHash": request_hash,
                  "chunks": len(chunks), "createdAt": clock.now_iso(), "ttl": now_s + SEND_RECORD_SECONDS}
        if chunks:
            record["pending"] = [address_code(a) for a in mailboxes[room:]]
        actions.append(t.tx_put(record, "attribute_not_exists(PK) OR #ttl < :now", names={"#ttl": "ttl"}, now=now_s))
    try:
        t.transact(actions)
    except t.TransactionCancelled as exc:
        if record_key and len(exc.reasons) == len(actions) and exc.reasons[-1] == "ConditionalCheckFailed":
            raise AlreadySent() from None
        return False
    if chunks:
        observability.count("DeliveryChunks", len(chunks))
    write_chunks(msg, chunks, record_key, done=set(), total=len(entries))
    return True


def write_chunks(msg: dict[str, Any], chunks: list[list[dict[str, Any]]], record_key: tuple[str, str] | None,
                 done: set[str], total: int) -> None:
    """Put the remaining mailbox entries, one transaction per chunk (each marking itself done on
    the send record under a condition); skip chunks marked done. Raises :class:`ChunkFailed`."""
    written = total - sum(len(c) for c in chunks)
    for index, chunk in enumerate(chunks):
        if str(index) in done:
            written += len(chunk)
            continue
        actions = [t.tx_put(e) for e in chunk]
        if record_key:
            actions.append(t.tx_update(*record_key, "ADD done :ds", "attribute_exists(PK) AND NOT contains(done, :d)",
                                       ds={str(index)}, d=str(index)))
        for attempt in uow.attempts(CHUNK_ATTEMPTS):
            try:
                t.transact(actions, token=_chunk_token(msg["id"], index))
                break
            except t.TransactionCancelled as exc:
                if record_key and exc.reasons and exc.reasons[-1] == "ConditionalCheckFailed":
                    break  # another attempt with this key wrote the chunk
                failure: Exception = exc
            except Exception as exc:  # throttled past botocore's retries, a network error
                failure = exc
            if attempt == CHUNK_ATTEMPTS - 1:
                logger.error("message %s: chunk %d of %d not written: %s", msg["id"], index + 1, len(chunks), failure)
                observability.count("DeliveryChunkFailed")
                raise ChunkFailed(msg, written, total, failure) from None
        written += len(chunk)


def get_send_record(record_key: tuple[str, str]) -> SendRecord | None:
    """The send record (strongly consistent), or None when it expired and was deleted."""
    item = t.get(*record_key)
    return None if item is None else SendRecord.model_validate(item)


def resume_chunks(net: str, record_key: tuple[str, str], record: SendRecord) -> None:
    """Write the chunks of ``record``'s fan-out not marked done (the message read from its thread)."""
    if len(record.done) >= record.chunks:
        return
    item = t.get(*k.thread_message(net, record.threadId, record.messageId))
    msg = {key: v for key, v in item.items() if key not in ("PK", "SK")}
    entries = [mailbox_entry(net, address_of(a), msg) for a in record.pending]
    chunks = [entries[i:i + CHUNK] for i in range(0, len(entries), CHUNK)]
    write_chunks(msg, chunks, record_key, set(record.done), total=len(entries))


# --------------------------------------------------------------------------- taking (the inbox)

def undelivered(net: str, mailbox: dict[str, str], limit: int, not_from_instance: str) -> list[dict[str, Any]]:
    """The oldest ``limit`` entries of one mailbox (``{"agent"}`` or ``{"instanceId"}``), strongly
    consistent, leaving out those sent by instance ``not_from_instance``."""
    return t.query(k.mailbox_pk(net, mailbox), sk_prefix=_MSG, limit=limit,
                   filter_expr="senderInstance <> :me", filter_values=t.values(me=not_from_instance))


def channel_copies(net: str, agent: str, limit: int) -> list[dict[str, Any]]:
    """The ``channel`` messages still in the agent's mailbox, oldest first (at most ``limit``,
    strongly consistent): the channel envelopes addressed to it that neither ``network_inbox`` nor
    an AG2 ack has delivered yet. Each carries ``channelId`` and the whole ``envelope``."""
    return t.query(k.mailbox_pk(net, {"agent": agent}), sk_prefix=_MSG, limit=limit,
                   filter_expr="kind = :channel", filter_values=t.values(channel="channel"))


def discard(net: str, mailbox: dict[str, str], msg_id: str) -> bool:
    """Delete one entry of a mailbox (``{"agent"}`` or ``{"instanceId"}``) if it is still there:
    the message was delivered another way (an AG2 client acked it). False when it was not there
    (taken by network_inbox first, or never written)."""
    return t.delete_if(k.mailbox_pk(net, mailbox), _MSG + msg_id, "attribute_exists(PK)")


def sort_key(entry: dict[str, Any]) -> str:
    """What orders mailbox entries (their message ids: oldest first)."""
    return entry["SK"]


def take(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delete ``batch``'s entries in one transaction of conditional deletes; drop those another
    fetcher took first and retry the rest (at most 6 rounds). Returns the entries this call took."""
    pending = list(batch)
    for attempt in range(6):
        if not pending:
            return []
        done = uow.commit([t.tx_delete(e["PK"], e["SK"], "attribute_exists(PK)") for e in pending])
        if done:
            return pending
        gone = {i for i, r in enumerate(done.reasons) if r == "ConditionalCheckFailed"}
        pending = [e for i, e in enumerate(pending) if i not in gone]
        if not gone:  # a conflict with another fetcher's transaction: let it finish
            uow.backoff(attempt)
    return []


def documents(net: str, taken: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The message of each taken entry, in order: the entry itself, or for an entry that points
    (``ref``), its thread copy (one eventually consistent BatchGetItem, the missing ones re-read
    strongly). If the copies cannot be read, the taken entries are put back before the error
    propagates, so a failed fetch loses nothing."""
    refs = {e["SK"]: k.thread_message(net, e["threadId"], e["SK"].removeprefix(_MSG))
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
            restore(taken)
            raise
    return [copies[refs[e["SK"]]] if e["SK"] in refs else e for e in taken]


def restore(entries: Iterable[dict[str, Any]]) -> None:
    """Put taken entries back (best effort: the message stays readable in its thread)."""
    for e in entries:
        try:
            t.put(e)
        except Exception:
            logger.exception("could not put back mailbox entry %s %s", e["PK"], e["SK"])


def message_id(entry: dict[str, Any]) -> str | None:
    """The message id of a mailbox entry item, or None for an item that is not one."""
    sk = str(entry.get("SK", ""))
    return sk.removeprefix(_MSG) if sk.startswith(_MSG) else None


# --------------------------------------------------------------------------- counting

def count_undelivered(net: str, mailbox: dict[str, str], cap: int) -> int:
    """How many entries one mailbox holds, counting at most ``cap`` (one ``Select=COUNT`` Query)."""
    return t.count(k.mailbox_pk(net, mailbox), sk_prefix=_MSG, limit=cap)


def summary_page(net: str, agent: str, instance_id: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """One page of the agent's mailbox view (GSI3) filtered to the instance's two mailboxes and to
    entries it did not send: ``(entries with kind/createdAt/senderInstance, more)``; at most
    ``limit`` entries evaluated."""
    own = k.mailbox_pk(net, {"instanceId": instance_id})
    agents = k.mailbox_pk(net, {"agent": agent})
    return t.query(k.mailbox_view(net, agent), index="GSI3", limit=limit, one_page=True,
                   filter_expr="(PK = :own OR PK = :agents) AND senderInstance <> :me",
                   filter_values=t.values(own=own, agents=agents, me=instance_id))


# --------------------------------------------------------------------------- hub messages in other writes

def message_actions(net: str, msg: dict[str, Any], mailboxes: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The Puts of ``msg``'s thread copy and of its entry in each of ``mailboxes``, for a
    transaction another repository makes (a task's offer or notice, a channel's envelope)."""
    return [t.tx_put(message_item(net, msg)), *(t.tx_put(mailbox_entry(net, a, msg)) for a in mailboxes)]


def add_participants(net: str, thread_id: str, agents: set[str]) -> dict[str, Any]:
    """The Update making ``agents`` participants of a thread (no version bump: participants only grow)."""
    return t.tx_update(*k.thread(net, thread_id), "ADD participants :a", a=agents)


# --------------------------------------------------------------------------- a representative's conversation

def put_conversation_message(rep: str, conversation_id: str, message: dict[str, Any]) -> None:
    """Store ``message`` (``{id, conversationId, from, body, createdAt}``) in the representative's
    conversation with its owner (control_channel_send)."""
    t.put({"PK": k.conversation(rep, conversation_id), "SK": _MSG + message["id"], **message})


def walk_conversation(rep: str, conversation_id: str, before_id: str | None, page_size: int) -> Iterable[dict[str, Any]]:
    """The conversation's messages newest first, lazily, those with ids below ``before_id`` when given."""
    walk = t.iterate(k.conversation(rep, conversation_id), sk_lt=_MSG + before_id if before_id else _MSG + "~",
                     forward=False, page_size=page_size)
    return (i for i in walk if i["SK"].startswith(_MSG))


def mailbox_actions(net: str, msg: dict[str, Any], mailboxes: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The Puts of ``msg`` whole (no thread copy: e.g. a channel's envelope notice) in each of ``mailboxes``."""
    return [t.tx_put(mailbox_item(net, a, msg)) for a in mailboxes]


# --------------------------------------------------------------------------- mail in committed items

_MAILBOX = "#MBOX#"


def mailbox_of(item: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """``(network id, {"agent": name} | {"instanceId": id})`` of the mailbox whose partition
    ``item`` (any item as written: a stream image decoded, a commit's item) is in, else None
    (keys.parse_mailbox_pk). Whether it is a mailbox entry is :func:`message_id`'s to say."""
    return k.parse_mailbox_pk(str(item.get("PK", "")))


def mailbox_key(entry: dict[str, Any]) -> str:
    """The partition key of a mailbox entry (keys.mailbox_pk of its mailbox), as
    relaynet.a2a.bridge.run's ``mailboxes`` takes it. KeyError when ``entry`` has no key."""
    return entry["PK"]


def on_commit(listener: Callable[[list[dict[str, Any]]], None]) -> Callable[[], None]:
    """Call ``listener`` with the raw items (DynamoDB attribute values, undecoded) of every write
    this process commits (relaynet.store.table.on_commit); pass them to :func:`committed_mail`.
    Returns the function that removes it."""
    return t.on_commit(listener)


def committed_mail(images: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The items, decoded, of the raw committed ``images`` that are in a mailbox partition; the
    others are skipped before decoding (a look at their partition key)."""
    for image in images:
        if _MAILBOX in (image.get("PK") or {}).get("S", ""):
            yield t.decode(image)
