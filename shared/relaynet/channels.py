"""Channels and envelopes (PROTOCOL.md 5.1, 5.2, 5.3, 5.6, and the channel part of 7).

A channel is a head item holding the participants, the state, the sequence counter and the
adapter's folded state, plus one item per envelope (relaynet.store.channels owns the items).
A send reads the head, asks the adapter (:mod:`relaynet.adapters`, pure), and writes in one
transaction: the head (``seq = seq + 1`` on condition ``seq = :seen`` and ``state = active``), the
envelope, and a ``channel`` message in each recipient agent's mailbox. A lost race re-reads and
asks the adapter again, so two racing sends can never both pass a turn check. Refused sends
store nothing.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from relaynet import adapters, clock, cursors, events, ids, limits, peers
from relaynet.adapters import AdapterError, Send
from relaynet.config import settings
from relaynet.directory import load
from relaynet.errors import Conflict, InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.store import channels as store
from relaynet.store import mailboxes as mail_store
from relaynet.store import unit_of_work as uow

ENVELOPES_IN_INFO = 20
_MAX_RACES = 20
SYSTEM = "relaynet"


def _adapter(channel: dict[str, Any]):
    return adapters.adapter(channel["type"], settings().reply_within)


def names(channel: dict[str, Any]) -> list[str]:
    """Participant names in order (opener first)."""
    return [p["agent"] for p in sorted(channel["participants"], key=lambda p: p["order"])]


def effective_state(channel: dict[str, Any], now_ms: int) -> str:
    """``active`` | ``closed`` | ``expired``; an active channel past ``expires_at`` is expired at once."""
    if channel["state"] == "active" and int(channel["expires_ms"]) <= now_ms:
        return "expired"
    return channel["state"]


def past_ttl(channel: dict[str, Any], now_ms: int) -> bool:
    """Stored ``active`` but past ``expires_at`` at ``now_ms``: shown ``expired``, not yet written so."""
    return channel["state"] == "active" and int(channel["expires_ms"]) <= now_ms


def expire_past_ttl(channel: dict[str, Any], now_ms: int) -> bool:
    """PROTOCOL.md 7(3) where a participant looks (issue 24): an active channel past its
    ``expires_at`` becomes ``expired`` here, in the one transaction that also writes its
    ``expired`` envelope, each participant's mailbox copy and the event (the sweep's
    :func:`_finish`), so no read shows a channel expired whose ``expired`` envelope is not there.

    Returns False when ``channel`` is not past its TTL (nothing written), True when it was: the
    caller reads it again, since this call or a racing expiry, close or send moved it (a lost race
    re-reads and tries again). Raises Conflict ``in_progress`` after :data:`_MAX_RACES` lost races.
    """
    if not past_ttl(channel, now_ms):
        return False
    head: dict[str, Any] | None = channel
    for _ in uow.attempts(_MAX_RACES):
        if _finish(head, None, "ttl", now_ms, "expired"):
            return True
        head = store.get_head(channel["network_id"], channel["channel_id"])
        if head is None or not past_ttl(head, now_ms):
            return True
    raise Conflict("in_progress", "the channel is busy; retry", headers={"Retry-After": "1"})


def view(channel: dict[str, Any], now_ms: int | None = None) -> dict[str, Any]:
    """The protocol's channel object (PROTOCOL.md 5.1)."""
    now = clock.now_ms() if now_ms is None else now_ms
    return {
        "channel_id": channel["channel_id"], "type": channel["type"], "participants": channel["participants"],
        "state": effective_state(channel, now), "knobs": channel.get("knobs") or {}, "intent": channel.get("intent"),
        "created_at": channel["created_at"], "expires_at": clock.iso(int(channel["expires_ms"])),
        "closed_at": channel.get("closed_at"), "close_reason": channel.get("close_reason"),
    }


def open_view(channel: dict[str, Any]) -> dict[str, Any]:
    """An open channel as the control surface lists it: ``{channel_id, type, participants
    (names, opener first), next_speaker, intent, created_at, expires_at}``; ``next_speaker`` is
    whose turn it is by the channel's adapter (null when anyone may speak, as in a conversation)."""
    return {"channel_id": channel["channel_id"], "type": channel["type"], "participants": names(channel),
            "next_speaker": _adapter(channel).next_speaker(channel["adapter_state"]),
            "intent": channel.get("intent"), "created_at": channel["created_at"],
            "expires_at": clock.iso(int(channel["expires_ms"]))}


def envelope_view(item: dict[str, Any]) -> dict[str, Any]:
    """The protocol's envelope (PROTOCOL.md 5.1)."""
    return {f: item.get(f) for f in ("envelope_id", "seq", "channel_id", "sender", "event_type", "content",
                                     "audience", "causation_id", "created_at")
            if item.get(f) is not None or f in ("content",)}


def load_channel(net: str, channel_id: str) -> dict[str, Any]:
    """The channel head, or NotFound (other networks' channels are absent: 404)."""
    head = store.get_head(net, channel_id)
    if head is None:
        raise NotFound(f"no channel {channel_id!r} in this network")
    return head


def _participant(channel: dict[str, Any], principal: Principal) -> None:
    if principal.agent not in names(channel):
        raise PermissionDenied("your agent is not a participant of this channel")


def _turn_note(channel: dict[str, Any], state: dict[str, Any], recipient: str, closing: str | None) -> str:
    if closing or channel["state"] != "active":
        return "The channel is closed; nothing more can be sent. Plain output reaches no one."
    a = _adapter(channel)
    tools = a.your_tools(state, recipient)
    nxt = a.next_speaker(state)
    cid = channel["channel_id"]
    if tools:
        tool = tools[0]
        return (f"It is your turn in channel {cid}: answer with {tool}(channel_id='{cid}', ...). "
                "Plain output reaches no one; only the tool call does.")
    who = f"{nxt}'s turn" if nxt else "not your turn"
    return f"Channel {cid}: it is {who}; wait for your turn (network_inbox). Plain output reaches no one."


def _envelope_actions(net: str, channel: dict[str, Any], state: dict[str, Any], seq: int, sender: str | None,
                      event_type: str, content: Any, audience: list[str] | None, now_ms: int,
                      causation_id: str | None = None, closing: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The envelope item and its mailbox copies (one per visible recipient other than the sender)."""
    env_id = ids.new_id("env")
    env = {"envelope_id": env_id, "seq": seq, "channel_id": channel["channel_id"], "sender": sender,
           "event_type": event_type, "content": content, "audience": audience, "causation_id": causation_id,
           "created_at": clock.iso(now_ms)}
    actions = [store.envelope_action(net, env)]
    recipients = [n for n in (audience or names(channel)) if n != sender]
    for name in recipients:
        # the copy's id is the envelope's ULID, so an AG2 ack of the envelope finds it (relaynet.ag2.ops.receipt)
        msg = {"id": ids.sibling("msg", env_id), "kind": "channel", "channelId": channel["channel_id"],
               "envelope": {key: v for key, v in env.items() if v is not None},
               "from": {"agent": sender} if sender else {"system": "router"}, "to": {"agent": name},
               "subject": channel.get("intent") or f"{channel['type']} channel",
               "body": content if isinstance(content, str) else None, "createdAt": clock.iso(now_ms),
               "instructions": _turn_note(channel, state, name, closing)}
        actions += mail_store.mailbox_actions(net, msg, [{"agent": name}])
    return env, actions


def _head_update(channel: dict[str, Any], new_state: dict[str, Any], seq: int, now_ms: int,
                 close_reason: str | None, closed_state: str = "closed") -> dict[str, Any]:
    """The head's conditional update for a send or a close (relaynet.store.channels.head_update)."""
    if close_reason:
        return store.head_update(channel, new_state, seq, closed=(closed_state, clock.iso(now_ms), close_reason))
    return store.head_update(channel, new_state, seq, due_ms=_due(channel, new_state))


def _due(channel: dict[str, Any], state: dict[str, Any]) -> int:
    """The next deadline the sweep must look at: the TTL, or an earlier consulting reply window."""
    due = int(channel["expires_ms"])
    if state.get("phase") == "reply" and state.get("reply_due_ms"):
        due = min(due, int(state["reply_due_ms"]))
    return due


def send(principal: Principal, channel_id: str, attempt: Send, content: Any, audience: list[str] | None = None,
         event_type: str = "text", head: dict[str, Any] | None = None,
         causation_id: str | None = None, seeding: bool = False) -> dict[str, Any]:
    """Post an envelope if the adapter allows it. Returns ``{envelope_id, seq, channel_state,
    next_speaker}``. ``head``: the channel head as the caller just wrote or read it (strongly
    consistent), used instead of reading it for the first attempt (a stale one fails the head's
    condition and is read again). ``seeding``: open's seed, whose abuse limits open checked
    already (not checked again).
    ``causation_id``: the envelope this one answers (AG2's wire passes it through; relaynet.ag2.ops).

    Raises NotFound, PermissionDenied (non-participant), InvalidArgument (audience or handoff
    target not a participant), Conflict ``channel_closed`` | ``not_your_turn`` | ``wrong_tool``,
    RateLimited (a recipient's mailbox is full: relaynet.limits; nothing is written).
    """
    net = principal.network_id
    for race in uow.attempts(_MAX_RACES):
        now = clock.now_ms()
        channel = head if head is not None else load_channel(net, channel_id)
        head = None
        _participant(channel, principal)
        members = names(channel)
        bad = [n for n in (audience or []) if n not in members]
        if bad:
            raise InvalidArgument.field("audience", f"not participants of this channel: {', '.join(bad)}")
        if attempt.target is not None and attempt.target not in members:
            raise InvalidArgument.field("target", f"{attempt.target!r} is not a participant of this channel")
        if effective_state(channel, now) != "active":
            expire_past_ttl(channel, now)  # refused as expired: the expired envelope is there first
            raise Conflict("channel_closed", f"channel {channel_id} is {effective_state(channel, now)}")
        a = _adapter(channel)
        decision = a.decide(channel["adapter_state"], attempt, now)
        if not decision.accepted:
            raise Conflict(decision.refusal, decision.message)
        if race == 0 and not seeding:  # abuse limits (relaynet.limits), once, before anything is written
            limits.check_mailboxes(net, [{"agent": n} for n in (audience or members) if n != principal.agent])
        seq = int(channel["seq"]) + 1
        env, actions = _envelope_actions(net, channel, decision.state, seq, principal.agent, event_type, content,
                                         audience, now, causation_id, closing=decision.close_reason)
        last = seq
        if decision.close_reason:
            last = seq + 1
            _, closed = _envelope_actions(net, channel, decision.state, last, principal.agent, "closed",
                                          {"reason": decision.close_reason}, None, now, env["envelope_id"],
                                          closing=decision.close_reason)
            actions += closed
            if decision.close_reason == adapters.consulting.COMPLETE:
                actions += peers.observe_actions(net, principal.agent, consults_answered=1)
            actions.append(events.event_action(net, "channel", principal.actor, f"channel {channel_id} closed: "
                                               f"{decision.close_reason}", channelId=channel_id, state="closed"))
        if not uow.commit([_head_update(channel, decision.state, last, now, decision.close_reason), *actions]):
            continue
        return {"envelope_id": env["envelope_id"], "seq": seq,
                "channel_state": "closed" if decision.close_reason else "active",
                "next_speaker": a.next_speaker(decision.state) if not decision.close_reason else None}
    raise Conflict("in_progress", "the channel is busy; retry", headers={"Retry-After": "1"})


def _allows_inbound(agent: dict[str, Any], opener: str) -> bool:
    return any(fnmatch.fnmatchcase(opener, pat) for pat in agent.get("inbound_from", ["*"]))


def open_channel(principal: Principal, channel_type: str, targets: list[str], knobs: dict[str, Any] | None,
                 intent: str | None, ttl_s: int | None, message: str | None,
                 channel_id: str | None = None) -> dict[str, Any]:
    """channels ``open`` (PROTOCOL.md 5.6). Returns ``{channel_id, type, participants,
    seed_envelope_id?}``. ``channel_id`` is a fresh ``ids.new_id("ch")`` the caller chose, so that
    it can write an item of its own with the channel (AG2's handshake rides its transaction:
    relaynet.ag2.ops.op_create_channel); None chooses one.

    Raises InvalidArgument (own agent as target, duplicates, bad knobs), NotFound (unknown target,
    ``details.available``), PermissionDenied (a target's ``inbound_from`` refuses the opener;
    nothing stored), Conflict ``seed_failed`` (the seed send was refused; the channel is closed).

    A ``message`` (the seed) that the adapter accepts without closing is written in the channel's
    own transaction (head at seq 2, the ``opened`` and seed envelopes, their mailbox copies; issue
    16: one transaction, not two). A seed it refuses or that closes the channel, or one that would
    take the transaction past DynamoDB's 100 actions, goes through :func:`send` after the channel
    is created, as any send does.
    """
    net = principal.network_id
    if principal.agent in targets:
        raise InvalidArgument.field("target", "you cannot open a channel with your own agent")
    if len(set(targets)) != len(targets):
        raise InvalidArgument.field("target", "a participant is named twice")
    d = load(net)
    unknown = [n for n in targets if n not in d.agents]
    if unknown:
        raise NotFound(f"no agent named {', '.join(map(repr, unknown))}", {"available": sorted(d.agents)})
    refusing = [n for n in targets if not _allows_inbound(d.agents[n], principal.agent)]
    if refusing:
        raise PermissionDenied(f"{', '.join(refusing)} does not accept channels from {principal.agent}")
    members = [principal.agent, *targets]
    try:
        state = adapters.adapter(channel_type, settings().reply_within).initial_state(members, knobs or {})
    except AdapterError as exc:
        raise InvalidArgument.field(exc.field, exc.message) from None
    now = clock.now_ms()
    ch_id = channel_id or ids.new_id("ch")
    roles = ["initiator", *(["respondent"] if len(targets) == 1 else ["participant"] * len(targets))]
    expires = now + (ttl_s or settings().channel_ttl) * 1000
    if message is not None:  # a seed refused by the abuse limits opens nothing (relaynet.limits)
        limits.check_mailboxes(net, [{"agent": n} for n in targets])
    a = adapters.adapter(channel_type, settings().reply_within)
    seed_type = "text" if a.tool == "say" else "packet"
    # The seed as send() would decide it on the new head: accepted and not closing, it is written
    # with the channel (one transaction); else the channel is created and send() refuses or closes.
    seed = a.decide(state, Send(sender=principal.agent, tool=a.tool), now) if message is not None else None
    if seed is not None and (not seed.accepted or seed.close_reason):
        seed = None
    fields = {
        "channel_id": ch_id, "network_id": net, "type": channel_type,
        "participants": [{"agent": n, "role": r, "order": i} for i, (n, r) in enumerate(zip(members, roles))],
        "state": "active", "knobs": knobs or {}, "intent": intent, "created_at": clock.iso(now),
        "expires_ms": expires, "seq": 1, "adapter_state": state, "opener": principal.actor}
    head = store.new_head(net, ch_id, fields, expires)
    _, opened = _envelope_actions(net, head, state, 1, principal.agent, "opened",
                                  {"type": channel_type, "intent": intent, "participants": members}, None, now)
    opened_event = events.event_action(net, "channel", principal.actor, f"{channel_type} channel opened by "
                                       f"{principal.agent} with {', '.join(targets)}", channelId=ch_id, state="active")
    out: dict[str, Any] = {"channel_id": ch_id, "type": channel_type, "participants": head["participants"]}
    if seed is not None:
        seeded_head = store.new_head(net, ch_id, {**fields, "seq": 2, "adapter_state": seed.state}, expires,
                                     due_ms=_due(fields, seed.state))
        env, seeded = _envelope_actions(net, seeded_head, seed.state, 2, principal.agent, seed_type, message,
                                        None, now)
        created = store.create_actions(seeded_head, members)
        actions = [created[0], *opened, *created[1:], opened_event, *seeded]
        if uow.fits(actions, spare=1):  # a slot left for a riding Idempotency-Key record
            uow.apply(actions)
            out["seed_envelope_id"] = env["envelope_id"]
            return out
    created = store.create_actions(head, members)
    uow.apply([created[0], *opened, *created[1:], opened_event])
    if message is not None:
        try:
            seeded_out = send(principal, ch_id, Send(sender=principal.agent, tool=a.tool), message,
                              event_type=seed_type, head=store.as_read(head),  # as a read would return it
                              seeding=True)  # open checked the limits before creating the channel
        except Conflict as exc:
            close(principal, ch_id, reason="seed_failed")
            failed = Conflict("seed_failed", f"the channel was opened but its first message was refused "
                                             f"({exc.reason}: {exc.message}); it is closed with seed_failed",
                              channel_id=ch_id)
            failed.committed = True  # the closed channel exists: a keyed retry gets this answer again
            raise failed from None
        out["seed_envelope_id"] = seeded_out["envelope_id"]
    return out


def close(principal: Principal, channel_id: str, reason: str = "closed_by_agent") -> dict[str, Any]:
    """channels ``close`` (PROTOCOL.md 5.6): ``{channel_id, state, close_reason}``. Closing a
    closed channel answers with the first reason and writes no second ``closed`` envelope."""
    net = principal.network_id
    for _ in uow.attempts(_MAX_RACES):
        now = clock.now_ms()
        channel = load_channel(net, channel_id)
        _participant(channel, principal)
        if channel["state"] != "active":
            return {"channel_id": channel_id, "state": channel["state"], "close_reason": channel.get("close_reason")}
        expired = effective_state(channel, now) == "expired"
        final, why = ("expired", "ttl") if expired else ("closed", reason)
        if not _finish(channel, None if expired else principal.agent, why, now, final):
            continue
        return {"channel_id": channel_id, "state": final, "close_reason": why}
    raise Conflict("in_progress", "the channel is busy; retry", headers={"Retry-After": "1"})


def _finish(channel: dict[str, Any], sender: str | None, reason: str, now_ms: int, final_state: str,
            extra: list[dict[str, Any]] | None = None) -> bool:
    """Close or expire an active channel with one envelope (``closed`` or ``expired``). False
    (nothing written) when the head moved since ``channel`` was read."""
    seq = int(channel["seq"]) + 1
    _, actions = _envelope_actions(channel["network_id"], channel, channel["adapter_state"], seq, sender, final_state,
                                   {"reason": reason}, None, now_ms, closing=reason)
    event = events.event_action(channel["network_id"], "channel", {"agent": sender} if sender else {"system": "router"},
                                f"channel {channel['channel_id']} {final_state}: {reason}",
                                channelId=channel["channel_id"], state=final_state)
    return bool(uow.commit([_head_update(channel, channel["adapter_state"], seq, now_ms, reason, final_state),
                            *actions, *(extra or []), event]))


def info(principal: Principal, channel_id: str) -> dict[str, Any]:
    """channels ``info`` (participants only): ``{channel, next_speaker, your_tools, envelopes}``
    with the last 20 envelopes, oldest first."""
    net = principal.network_id
    now = clock.now_ms()
    # one Query: descending, the head (``HEAD`` sorts after ``ENV#``) and then the newest envelopes
    channel, envs = store.head_and_newest(net, channel_id, ENVELOPES_IN_INFO)
    if channel is None:
        raise NotFound(f"no channel {channel_id!r} in this network")
    _participant(channel, principal)
    if expire_past_ttl(channel, now):  # shown expired only with its expired envelope (PROTOCOL.md 7)
        channel, envs = store.head_and_newest(net, channel_id, ENVELOPES_IN_INFO)
    active = effective_state(channel, now) == "active"
    a = _adapter(channel)
    state = channel["adapter_state"]
    visible = [e for e in reversed(envs) if not e.get("audience") or principal.agent in e["audience"]
               or e.get("sender") == principal.agent]
    return {"channel": view(channel, now), "next_speaker": a.next_speaker(state) if active else None,
            "your_tools": a.your_tools(state, principal.agent) if active else [],
            "envelopes": [envelope_view(e) for e in visible]}


def list_channels(principal: Principal, state: str = "active", limit: int = 20,
                  cursor: str | None = None) -> dict[str, Any]:
    """channels ``list``: ``{channels, nextCursor}``, the channels the caller's agent participates
    in, newest first (PROTOCOL.md 5.6, 2 "Lists"); a bad cursor is InvalidArgument."""
    net = principal.network_id
    listing = cursors.Listing("channels.list", principal, state=state)
    after = listing.position(cursor)
    now = clock.now_ms()

    def heads():
        # membership items newest first, their heads read a batch at a time
        refs = store.walk_memberships(net, principal.agent, after)
        batch: list[dict[str, Any]] = []
        for ref in refs:
            batch.append(ref)
            if len(batch) == 100:
                yield from _with_heads(net, batch)
                batch = []
        yield from _with_heads(net, batch)

    def accept(pair: tuple[str, dict[str, Any] | None]) -> bool:
        head = pair[1]
        return head is not None and (state == "all" or effective_state(head, now) == "active")

    page, last = cursors.page_scan(heads(), lambda pair: pair[0], accept, limit)
    return {"channels": [view(head, now) for _, head in page], "nextCursor": listing.next_cursor(last)}


def _with_heads(net: str, refs: list[dict[str, Any]]):
    """(channel id, its head or None) for membership items ``refs``, in their order."""
    if not refs:
        return
    heads = store.heads(net, [r["channel_id"] for r in refs])
    now = clock.now_ms()
    for r in refs:
        head = heads.get(r["channel_id"])
        if head is not None and expire_past_ttl(head, now):  # listed expired only once written so
            head = store.get_head(net, r["channel_id"])
        yield r["channel_id"], head


def _reply_of(envs: list[dict[str, Any]]) -> str | None:
    """The respondent's reply in a consulting channel (its second text envelope), or None."""
    texts = [e for e in envs if e.get("event_type") == "text"]
    return texts[1]["content"] if len(texts) >= 2 else None


def head_and_reply(net: str, channel_id: str) -> tuple[dict[str, Any], str | None]:
    """:func:`load_channel` and the consult's reply in one strongly consistent Query of the
    channel's partition (its head sorts after its envelopes). NotFound as load_channel."""
    head, envs = store.head_and_envelopes(net, channel_id)
    if head is not None and expire_past_ttl(head, clock.now_ms()):
        head, envs = store.head_and_envelopes(net, channel_id)
    if head is None:
        raise NotFound(f"no channel {channel_id!r} in this network")
    return head, _reply_of(envs)


def sweep(now_ms: int | None = None, batch: int = 500) -> dict[str, int]:
    """PROTOCOL.md 7 step 3: channels past ``expires_at`` become ``expired``; consulting channels
    whose respondent was silent past the reply window close with
    ``expectation_violated:reply_within``. Returns ``{"expired", "reply_within"}``."""
    now = clock.now_ms() if now_ms is None else now_ms
    due = store.due(now, batch)
    stats = {"expired": 0, "reply_within": 0}
    for head in due:
        if head.get("state") != "active":
            continue
        # a head another run or a send moved meanwhile is not counted: the next run looks again
        if int(head["expires_ms"]) <= now:
            stats["expired"] += _finish(head, None, "ttl", now, "expired")
        elif head["adapter_state"].get("phase") == "reply" and int(head["adapter_state"]["reply_due_ms"]) <= now:
            respondent = names(head)[1]
            stats["reply_within"] += _finish(head, None, adapters.consulting.REPLY_WITHIN_VIOLATED, now, "closed",
                                             peers.observe_actions(head["network_id"], respondent, consults_expired=1))
    return stats
