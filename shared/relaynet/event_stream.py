"""An instance's live events (docs/protocol.md 10.6, issue 26 part 3): what a subscriber to
``GET /v1/events`` is told, and which events a committed item makes.

- **Events** come from mailbox entries, as webhooks do (relaynet.push): an entry put in an
  instance's mailbox is an event for that instance; one put in an agent's mailbox is an event for
  each instance of the agent but its sender. An event is ``{event, id, networkId, instanceId,
  messageId, kind, threadId?, taskId?, createdAt}``, never the message body (``network_inbox``
  fetches it, marked as from a peer). ``event`` is ``wake`` (a control_wake_agent notice),
  ``task_offer``, ``task_update`` or ``message`` (asks, replies, notices). Besides mail,
  ``claim_released`` tells every instance of the network but the releaser that a claim ended
  (released by its holder, a representative or the hub): ``{claimId, scope}``, live only. ``id`` is the message
  id: the SSE event id, what a client deduplicates on.
- **Resuming**: events are not stored; the mail is. A subscriber that reconnects after a drop
  (``Last-Event-ID``) is first sent an event for every entry still waiting in its mailboxes
  (:func:`waiting`, oldest first, at most :data:`REPLAY_LIMIT`), then the live ones: nothing the
  drop hid is lost, and what it saw already may come again (deduplicate by ``id``). Mail taken by
  ``network_inbox`` is not replayed: it has been read.

- **A representative's stream** (docs/protocol.md 10.6) is what the operator page shows: an
  ``activity`` event per entry of the network's history (relaynet.events: a message sent, a task
  transition, a claim taken or released, a channel or instance event) of every network its
  grants cover, ``{event: "activity", id, networkId, kind, actor, at}`` plus the entry's ids and
  state (:data:`ACTIVITY_REFS`), never its ``summary`` (which quotes message bodies). ``id`` is
  the history entry's id; a resume with a non-empty ``Last-Event-ID`` replays the entries after
  it (:func:`activity_since`), at most :data:`REPLAY_LIMIT` per network.

The transport (Server-Sent Events locally, relaynet_local.event_stream) lives outside the
domain; this module only decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relaynet.identity import Principal
from relaynet.store import events as event_store
from relaynet.store import mailboxes as mail_store

__all__ = ["ACTIVITY_REFS", "Addressed", "EVENT_NAMES", "REPLAY_LIMIT", "activity", "activity_since", "addressed",
           "event_name", "for_principal", "granted_networks", "waiting"]

EVENT_NAMES = ("message", "task_offer", "task_update", "wake", "claim_released", "activity")
MAIL_EVENTS = EVENT_NAMES[:4]  #: the events of mail (what network_inbox hands out)
#: The history entry's fields an ``activity`` event carries besides ``kind``, ``actor`` and ``at``:
#: ids and states, never text (the entry's ``summary`` quotes message bodies).
ACTIVITY_REFS = ("state", "taskId", "threadId", "messageId", "claimId", "channelId", "instanceId", "scope",
                 "fromAgent", "toName")
REPLAY_LIMIT = 100  # waiting entries replayed per mailbox on a resume (a mailbox's first page)


@dataclass(frozen=True)
class Addressed:
    """One committed mailbox entry as an event and who it is for: the instance ``instance_id``
    (an instance mailbox) or every instance of ``agent`` but ``sender_instance`` (an agent
    mailbox, ``instance_id`` None)."""

    network_id: str
    agent: str
    instance_id: str | None
    sender_instance: str | None
    event: dict[str, Any]
    everyone: bool = False  #: every instance of the network (a claim released), not a mailbox's

    def reaches(self, principal: Principal) -> bool:
        """Whether ``principal`` (an instance) is told of this event."""
        if principal.kind != "instance" or principal.network_id != self.network_id:
            return False
        if principal.instance_id == self.sender_instance:
            return False  # never its own sends, as network_inbox (PROTOCOL.md 4.4), nor its own releases
        if self.everyone:
            return True
        if self.instance_id is not None:
            return principal.instance_id == self.instance_id
        return principal.agent == self.agent


def event_name(entry: dict[str, Any]) -> str:
    """``wake`` | ``task_offer`` | ``task_update`` | ``message`` for a mailbox entry."""
    if entry.get("wakeReason"):
        return "wake"
    kind = entry.get("kind")
    return kind if kind in ("task_offer", "task_update") else "message"


def _event(net: str, entry: dict[str, Any], message_id: str, instance_id: str | None) -> dict[str, Any]:
    event = {"event": event_name(entry), "id": message_id, "networkId": net, "instanceId": instance_id,
             "messageId": message_id, "kind": entry["kind"], "createdAt": entry.get("createdAt")}
    for name in ("threadId", "taskId"):
        if entry.get(name):
            event[name] = entry[name]
    return event


def addressed(item: dict[str, Any]) -> Addressed | None:
    """The event a committed item makes, or None when it is not a mailbox entry. ``item`` is the
    item as written (python values: a stream image decoded). For an agent
    mailbox the event's ``instanceId`` is None until :meth:`Addressed.reaches` picks the
    instance; :func:`for_principal` fills it."""
    released = _claim_released(item)
    if released is not None:
        return released
    parsed = mail_store.mailbox_of(item)
    message_id = mail_store.message_id(item)
    if parsed is None or message_id is None or "kind" not in item:
        return None
    net, box = parsed
    return Addressed(network_id=net, agent=box.get("agent") or "", instance_id=box.get("instanceId"),
                     sender_instance=item.get("senderInstance"),
                     event=_event(net, item, message_id, box.get("instanceId")))


def _claim_released(item: dict[str, Any]) -> Addressed | None:
    """The ``claim_released`` event of a claim's release, from the operator event its
    transaction writes (relaynet.claims: ``kind`` claim, ``state`` released): for every instance
    of the network but the one that released it. ``{event, id (the operator event's), networkId,
    instanceId, claimId, scope, createdAt}``. Live only: it is no mail, so a resume replays none."""
    net = event_store.network_of(item)
    if net is None or item.get("kind") != "claim" or item.get("state") != "released":
        return None
    actor = item.get("actor") or {}
    event = {"event": "claim_released", "id": item["id"], "networkId": net, "instanceId": None,
             "claimId": item.get("claimId"), "scope": item.get("scope"), "createdAt": item.get("at")}
    return Addressed(network_id=net, agent="", instance_id=None, sender_instance=actor.get("instanceId"),
                     event=event, everyone=True)


def for_principal(event: Addressed, principal: Principal) -> dict[str, Any]:
    """The event as ``principal`` is sent it (its own ``instanceId``)."""
    return {**event.event, "instanceId": principal.instance_id}


def waiting(principal: Principal) -> list[dict[str, Any]]:
    """The events of the mail still waiting for ``principal`` (an instance): its instance
    mailbox's and its agent's (not its own sends), oldest first by message id, at most
    :data:`REPLAY_LIMIT` of each. Two strongly consistent Queries. Raises ValueError for a
    representative (docs/protocol.md 10.6: instances only)."""
    if principal.kind != "instance":
        raise ValueError("only an instance has mailboxes")
    net = principal.network_id
    entries = [*mail_store.undelivered(net, {"instanceId": principal.instance_id, "agent": principal.agent},
                                       REPLAY_LIMIT, principal.instance_id),
               *mail_store.undelivered(net, {"agent": principal.agent}, REPLAY_LIMIT, principal.instance_id)]
    events = []
    for entry in entries:
        message_id = mail_store.message_id(entry)
        if message_id is not None and "kind" in entry:
            events.append(_event(net, entry, message_id, principal.instance_id))
    return sorted(events, key=lambda e: e["id"])


def activity(item: dict[str, Any]) -> dict[str, Any] | None:
    """The ``activity`` event of a committed history entry (an event of the network's stream,
    relaynet.events and relaynet.store.events), or None for any other item: ``{event, id,
    networkId, kind, actor, at}`` and the :data:`ACTIVITY_REFS` it has. For representatives whose grants cover the network."""
    net = event_store.network_of(item)
    if net is None or not event_store.is_event(item) or "id" not in item:
        return None
    event = {"event": "activity", "id": item["id"], "networkId": net,
             "kind": item.get("kind"), "actor": item.get("actor"), "at": item.get("at")}
    for name in ACTIVITY_REFS:
        if item.get(name) is not None:
            event[name] = item[name]
    return event


def granted_networks(principal: Principal) -> frozenset[str]:
    """The networks a representative's grants cover (every grant level includes observe,
    PROTOCOL.md 6): one fresh GetItem of its item. Raises NotFound for a deleted representative."""
    from relaynet.control.grants import granted_order, representative

    return frozenset(granted_order(representative(principal)))


def activity_since(networks: frozenset[str], last_id: str) -> list[dict[str, Any]]:
    """The ``activity`` events of the history entries after ``last_id`` (an ``evt_`` id, the
    SSE ``Last-Event-ID``) in each of ``networks``, oldest first, at most :data:`REPLAY_LIMIT`
    per network (one Query each); entries past their ttl are left out."""
    from relaynet import clock

    now_s = clock.now_ms() // 1000
    out: list[dict[str, Any]] = []
    for net in sorted(networks):
        taken = 0
        for item in event_store.oldest_after(net, last_id, REPLAY_LIMIT):
            if taken >= REPLAY_LIMIT:
                break
            found = activity(item) if int(item.get("ttl") or now_s + 1) > now_s else None
            if found is not None:
                out.append(found)
                taken += 1
    return sorted(out, key=lambda e: e["id"])
