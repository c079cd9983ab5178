"""AG2's request ops over Relaynet's identities and channels (docs/protocol.md 12).

An AG2 ``agent_id`` is the Relaynet agent name: agents here outlive connections and instances,
so the stable name is the identity. An AG2 channel is a Relaynet channel (relaynet.channels):
``ag2.msg.text`` envelopes are Relaynet ``text`` envelopes, so an agent on the HTTP/MCP plugin
surface and an AG2 agent share one channel. Every AG2 send is checked by the Relaynet adapter of
the channel's type, read as AG2's adapters read a send (relaynet.ag2.turns), against the
channel's folded state, and decided again by the same adapter in the send's transaction.

The records, frames and errors are Relaynet's models of AG2 1.2.1's (relaynet.ag2.protocol):
nothing here imports the ``ag2`` package.

Each op takes the :class:`Session` of the calling connection and the request's ``params`` and
returns the JSON result, or :data:`DEFERRED` when the answer comes later by postToConnection
(``create_channel`` waits for the invitees' acks that way, never inside one Lambda invocation).
Errors are AG2's (relaynet.ag2.protocol.errors), which :mod:`relaynet.ag2.wire` maps to AG2's codes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from aws_lambda_powertools import Logger

from relaynet.ag2 import frames as f
from relaynet.ag2 import post, turns
from relaynet.ag2.protocol.channel import (CHANNEL_TYPES, ChannelMetadata, ChannelState, Participant, ParticipantRole,
                                           manifest)
from relaynet.ag2.protocol.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_CONTEXT_SET,
    EV_PACKET,
    EV_TEXT,
    Envelope,
)
from relaynet.ag2.protocol.errors import AccessDeniedError, AuthError, NotFoundError, ProtocolError
from relaynet.ag2.protocol.frames import NotifyFrame, PingFrame, ResponseFrame, WelcomeFrame
from relaynet.ag2.protocol.identity import AuthBlock, CostProfile, ObservedStat, Passport, Resume
from relaynet.ag2.protocol.rule import Rule, parse_duration
from relaynet.ag2.protocol.task import TERMINAL_TASK_STATES, TaskMetadata, TaskState
from relaynet import cache, channels, clock, ids
from relaynet import identity as rn_identity
from relaynet.directory import load as load_directory
from relaynet.config import settings
from relaynet.errors import Conflict, InvalidArgument, NotFound, PermissionDenied, RelaynetError
from relaynet.identity import Principal
from relaynet.store import ag2 as store
from relaynet.store import channels as channel_store
from relaynet.store import mailboxes as mail_store

log = Logger(child=True)  # observability.logger's child ("<service>.relaynet.ag2.ops")

DEFERRED = object()  #: an op's answer that a later invocation sends
AUTH_SCHEME = "api_key"


#: Relaynet envelope event types and their AG2 names (both ways).
_TO_AG2 = {"text": EV_TEXT, "packet": EV_PACKET, "opened": EV_CHANNEL_OPENED, "closed": EV_CHANNEL_CLOSED,
           "expired": EV_CHANNEL_EXPIRED, "context_set": EV_CONTEXT_SET}
_PROTOCOL = {"opened", "closed", "expired"}


@dataclass
class Session:
    """The calling connection: its id, its item (``network_id``, ``bindings``), and the frames to
    send, as ``(connection id, frame)`` pairs in order (:mod:`relaynet.ag2.wire` posts them)."""

    connection_id: str
    connection: dict[str, Any]
    outbox: list[tuple[str, Any]] = field(default_factory=list)
    request_id: str | None = None  #: the request being answered (a deferred answer names it)
    #: ``(network id, channel id) -> (head, handshake)`` read with the connection (:func:`load_session`),
    #: used once by the frame's first read of that channel
    prefetched: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)

    @property
    def network_id(self) -> str | None:
        return self.connection.get("network_id")

    @property
    def bound(self) -> dict[str, str]:
        """``{agent name: instance id}`` of the agents bound to this connection."""
        return dict(self.connection.get("bindings") or {})

    def principal(self, agent: str) -> Principal:
        """The Relaynet principal acting for ``agent`` on this connection. AccessDeniedError when
        the agent is not bound here (AG2: a connection acts only as the agents bound to it);
        AuthError when the token it attached with has been revoked since (control_stop_agent,
        control_restart_agent), seen within ``RELAYNET_CACHE_SECONDS``: the agent is then unbound
        from the connection, as an HTTP call with that token is refused (docs/protocol.md 12)."""
        inst = self.bound.get(agent)
        if inst is None:
            raise AccessDeniedError(f"agent {agent!r} is not bound to this connection")
        if not token_live((self.connection.get("tokens") or {}).get(agent), inst):
            store.unbind(self.connection_id, self.network_id, agent)
            self.connection = {**self.connection, "bindings": {a: i for a, i in self.bound.items() if a != agent}}
            raise AuthError(f"the token agent {agent!r} registered or attached with on this connection was revoked "
                            f"(its instance was stopped or restarted): attach again with a current token")
        return Principal(kind="instance", network_id=self.network_id, instance_id=inst, agent=agent)

    def any_principal(self) -> Principal:
        """A principal of this connection (the first bound agent); AccessDeniedError when none."""
        if not self.bound:
            raise AccessDeniedError("no agent is bound to this connection: register or attach first")
        return self.principal(sorted(self.bound)[0])


# -- identity ------------------------------------------------------------------------------------

def load_session(connection_id: str, message: str | bytes) -> "Session":
    """The Session of one frame on ``connection_id``: its connection item (a gone connection is
    bound to nobody). A ``post_envelope`` on a connection whose network this container has seen
    within the cache bound (relaynet.cache.connection_networks: a connection's network never
    changes) reads the channel's head and handshake in the same BatchGetItem, one request fewer
    on every post; any other frame reads the connection alone (one GetItem)."""
    net = cache.connection_networks.peek(connection_id)
    channel_id = _posted_channel(message) if net else None
    prefetched: dict[tuple[str, str], tuple[Any, Any]] = {}
    if channel_id:
        conn, head, hs = store.connection_and_channel(connection_id, net, channel_id)
        if conn is not None and conn.get("network_id") == net:
            prefetched[(net, channel_id)] = (head, hs)
    else:
        conn = store.get_connection(connection_id)
    conn = conn or {"connection_id": connection_id, "bindings": {}}
    if conn.get("network_id"):
        cache.connection_networks.put(connection_id, conn["network_id"])
    return Session(connection_id=connection_id, connection=conn, prefetched=prefetched)


def _posted_channel(message: str | bytes) -> str | None:
    """The channel id of a ``post_envelope`` request frame, or None (any other frame, or one that
    does not parse: the wire's own decoding answers it)."""
    try:
        frame = json.loads(message)
        if frame.get("kind") != "request" or frame.get("op") != "post_envelope":
            return None
        channel_id = frame["params"]["envelope"]["channel_id"]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return channel_id if isinstance(channel_id, str) and channel_id else None


def token_live(token_hash: str | None, instance_id: str) -> bool:
    """Whether the token of that hash still proves ``instance_id`` (not revoked), from a read at
    most ``RELAYNET_CACHE_SECONDS`` old (relaynet.cache.tokens; a live token's read is kept, a
    revoked one is re-read each time). False without a hash."""
    if not token_hash:
        return False
    principal = cache.tokens.get(token_hash, lambda: rn_identity.authorize_hash(token_hash))
    return principal is not None and principal.instance_id == instance_id


def authenticate(name: str, scheme: str, claim: Any) -> Principal:
    """The instance principal a Passport's AuthBlock proves for agent ``name``.

    The claim is ``{"token": <rn_inst_ token>}`` of an instance of that agent (docs/protocol.md 12).
    Raises AuthError: another scheme, no token, an unknown or revoked token, a representative's
    token, or a token of another agent's instance."""
    if scheme != AUTH_SCHEME:
        raise AuthError(f"Relaynet accepts auth scheme {AUTH_SCHEME!r} with claim {{'token': <rn_inst_ token>}}, "
                        f"not {scheme!r}")
    token = claim.get("token") if isinstance(claim, dict) else None
    if not isinstance(token, str) or not token:
        raise AuthError("api_key claim missing required string field 'token'")
    principal = rn_identity.authorize(token)
    if principal is None or principal.kind != "instance":
        raise AuthError("unknown, revoked or malformed instance token")
    if principal.agent != name:
        raise AuthError(f"the token is not one of the instances of agent {name!r}")
    return principal


def _bind(session: Session, principal: Principal, claim: dict[str, Any]) -> None:
    if session.network_id not in (None, principal.network_id):
        raise AccessDeniedError("this connection already acts in another network; open a new connection")
    token_hash = rn_identity.hash_token(claim["token"])
    cache.tokens.put(token_hash, principal)  # just read by authenticate: the frames after need no read
    if not store.bind(session.connection_id, principal.network_id, principal.agent, principal.instance_id,
                      token_hash, clock.now_ms()):
        raise AccessDeniedError("this connection is gone or acts in another network")
    session.connection = {**session.connection, "network_id": principal.network_id,
                          "bindings": {**session.bound, principal.agent: principal.instance_id},
                          "tokens": {**(session.connection.get("tokens") or {}), principal.agent: token_hash}}
    rn_identity.touch(principal)


def _definition_passport(agent: dict[str, Any], ag2_record: dict[str, Any] | None) -> dict[str, Any]:
    """The AG2 passport of a Relaynet agent: its AG2 registration's, whose empty ``owner``,
    ``provider``, ``model`` and ``cost`` the definition's plugin passport fills (the operator's
    word, docs/protocol.md 3); an agent never registered over AG2 gets the definition's alone."""
    pp = agent.get("passport") or {}
    cost = pp.get("cost") or None
    base = Passport(name=agent["name"], owner=pp.get("owner") or "", provider=pp.get("provider"),
                    model=pp.get("model"), auth=AuthBlock(scheme=AUTH_SCHEME),
                    cost=None if cost is None else _cost(cost), agent_id=agent["name"],
                    created_at=agent.get("createdAt") or "").to_dict()
    if ag2_record is None:
        return base
    out = dict(ag2_record["passport"])
    for key in ("owner", "provider", "model", "cost"):
        if not out.get(key) and base.get(key):
            out[key] = base[key]
    return out


def _cost(cost: dict[str, Any]) -> CostProfile:
    return CostProfile(input_per_mtok=cost.get("input_per_mtok"), output_per_mtok=cost.get("output_per_mtok"))


def _definition_resume(agent: dict[str, Any], ag2_record: dict[str, Any] | None) -> dict[str, Any]:
    if ag2_record is not None:
        return dict(ag2_record["resume"])
    r = agent.get("resume") or {}
    caps = list(r.get("claimed_capabilities") or []) or [c["id"] for c in agent.get("capabilities") or []]
    return Resume(claimed_capabilities=caps, domains=list(r.get("domains") or []),
                  summary=r.get("summary") or agent.get("description") or "").to_dict()


def _require_net(session: Session) -> str:
    if session.network_id is None:
        raise AccessDeniedError("register or attach first: this connection is not in a network yet")
    return session.network_id


def _agent(session: Session, name_or_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    net = _require_net(session)
    d = load_directory(net)
    agent = d.agents.get(name_or_id)
    if agent is None:
        raise NotFoundError(f"agent not found: {name_or_id}")
    return agent, store.identity(net, name_or_id)


def op_register(session: Session, params: dict[str, Any]) -> Any:
    """``register``: authenticate the passport's claim, store the AG2 identity (a name registered
    before is taken over, not refused: Relaynet agents outlive connections), bind it here.
    Returns the passport with ``agent_id`` = the name and no claim."""
    passport = Passport.from_dict(params["passport"])
    if passport.effective_kind == "remote_agent":
        raise ProtocolError("remote_agent passports (federation) are not served by Relaynet")
    principal = authenticate(passport.name, passport.auth.scheme, passport.auth.claim)
    resume = Resume.from_dict(params.get("resume") or {})
    rule = Rule.from_dict(params["rule"]) if params.get("rule") is not None else Rule()
    _bind(session, principal, passport.auth.claim)
    passport.agent_id = passport.name
    passport.created_at = clock.iso(clock.now_ms())
    passport.auth = passport.auth.model_copy(update={"claim": {}})
    resume.last_updated = passport.created_at
    store.put_identity(principal.network_id, passport.name, {
        "passport": passport.to_dict(), "resume": resume.to_dict(), "rule": rule.to_dict(),
        "skill_md": params.get("skill_md"), "kind": passport.effective_kind, "registered_at": passport.created_at})
    return passport.to_dict()


def hello(session: Session, name: str, scheme: str, claim: Any, since_envelope_id: str | None) -> None:
    """The ``hello`` handshake (AG2's re-attach): authenticate, bind, welcome, then replay what
    the agent has not acked past ``since_envelope_id`` (None: no replay). An agent defined in
    Relaynet that never registered over AG2 gets an AG2 identity from its definition here.
    Raises AuthError, AccessDeniedError, NotFoundError (sent as an ErrorFrame by the wire)."""
    principal = authenticate(name, scheme, claim)
    _bind(session, principal, claim)
    net = principal.network_id
    if store.identity(net, name) is None:
        agent = load_directory(net).agents.get(name)
        if agent is None:
            raise NotFoundError(f"unknown name: {name}")
        store.put_identity(net, name, {"passport": _definition_passport(agent, None),
                                       "resume": _definition_resume(agent, None), "rule": Rule().to_dict(),
                                       "skill_md": agent.get("skill_md"), "kind": "agent",
                                       "registered_at": clock.iso(clock.now_ms())})
    session.outbox.append((session.connection_id, WelcomeFrame(endpoint_id=session.connection_id,
                                                                hub_time=clock.iso(clock.now_ms()))))
    if since_envelope_id is not None:
        replay(session, name, since_envelope_id)


def op_find_agent_id(session: Session, params: dict[str, Any]) -> Any:
    """``find_agent_id``: the name itself when such an agent exists, else None. On a connection
    not yet in a network (AG2's attach asks before its hello) any well-formed name answers itself
    and nothing is disclosed; the hello then authenticates."""
    name = params["name"]
    if session.network_id is None:
        return name if isinstance(name, str) and name else None
    return name if name in load_directory(session.network_id).agents else None


def op_get_agent(session: Session, params: dict[str, Any]) -> Any:
    name = params["name_or_id"]
    if session.network_id is None:  # before attach's hello: a bare passport, nothing disclosed
        return Passport(name=name, auth=AuthBlock(scheme=AUTH_SCHEME), agent_id=name).to_dict()
    agent, rec = _agent(session, name)
    return _definition_passport(agent, rec)


def op_get_resume(session: Session, params: dict[str, Any]) -> Any:
    if session.network_id is None:
        return Resume().to_dict()
    agent, rec = _agent(session, params["agent_id"])
    return _definition_resume(agent, rec)


def op_get_rule(session: Session, params: dict[str, Any]) -> Any:
    if session.network_id is None:
        return Rule().to_dict()
    _, rec = _agent(session, params["agent_id"])
    return dict(rec["rule"]) if rec else Rule().to_dict()


def op_get_skill(session: Session, params: dict[str, Any]) -> Any:
    agent, rec = _agent(session, params["agent_id"])
    return (rec or {}).get("skill_md") or agent.get("skill_md")


def op_names_for(session: Session, params: dict[str, Any]) -> Any:
    return {aid: aid for aid in params["agent_ids"]}


def op_list_agents(session: Session, params: dict[str, Any]) -> Any:
    """``list_agents``: every agent of the network (AG2-registered or not) as a passport; filters
    ``kind``, ``query`` (substring of name or resume summary), ``capability``; ``limit``."""
    net = _require_net(session)
    d = load_directory(net)
    recs = store.identities(net)
    out = []
    for name in sorted(d.agents):
        agent, rec = d.agents[name], recs.get(name)
        passport, resume = _definition_passport(agent, rec), _definition_resume(agent, rec)
        if params.get("kind") and (passport.get("kind") or "agent") != params["kind"]:
            continue
        q = (params.get("query") or "").lower()
        if q and q not in name.lower() and q not in (resume.get("summary") or "").lower():
            continue
        cap = params.get("capability")
        if cap and cap not in resume.get("claimed_capabilities", []) and cap not in resume.get("observed", {}):
            continue
        out.append(passport)
    return out[: int(params.get("limit") or 50)]


def _set_identity_field(session: Session, params: dict[str, Any], field_name: str, value: Any) -> None:
    principal = session.principal(params["agent_id"])
    if store.identity(principal.network_id, principal.agent) is None:
        raise NotFoundError(f"agent not registered: {principal.agent}")
    store.update_identity(principal.network_id, principal.agent, field_name, value)


def op_set_resume(session: Session, params: dict[str, Any]) -> Any:
    resume = Resume.from_dict(params["resume"])
    resume.last_updated = clock.iso(clock.now_ms())
    _set_identity_field(session, params, "resume", resume.to_dict())


def op_set_skill(session: Session, params: dict[str, Any]) -> Any:
    _set_identity_field(session, params, "skill_md", params.get("skill_md"))


def op_set_rule(session: Session, params: dict[str, Any]) -> Any:
    _set_identity_field(session, params, "rule", Rule.from_dict(params["rule"]).to_dict())


def op_unregister(session: Session, params: dict[str, Any]) -> Any:
    """``unregister``: forget the AG2 identity; the Relaynet agent definition stays."""
    principal = session.principal(params["agent_id"])
    store.delete_identity(principal.network_id, principal.agent)


# -- channels ------------------------------------------------------------------------------------

def _domain(fn: Callable[[], Any]) -> Any:
    """Run a domain call, raising its errors as AG2's."""
    try:
        return fn()
    except NotFound as exc:
        raise NotFoundError(exc.message if hasattr(exc, "message") else str(exc)) from None
    except PermissionDenied as exc:
        raise AccessDeniedError(str(exc)) from None
    except (Conflict, InvalidArgument) as exc:
        raise ProtocolError(_message(exc)) from None
    except RelaynetError as exc:
        raise ProtocolError(_message(exc)) from None


def _message(exc: RelaynetError) -> str:
    msg = getattr(exc, "message", None) or str(exc)
    fields = (getattr(exc, "details", None) or {}).get("fields")
    extra = [text for text in (f"{x['field']}: {x['message']}" for x in fields or []) if text != msg]
    return msg + (": " + "; ".join(extra) if extra else "")


def metadata(head: dict[str, Any], hs: dict[str, Any] | None) -> ChannelMetadata:
    """A Relaynet channel head (and its AG2 handshake, if any) as AG2's ChannelMetadata."""
    view = channels.view(head)
    ordered = sorted(head["participants"], key=lambda p: p["order"])
    parts = [Participant(agent_id=p["agent"], role=ParticipantRole(p["role"]), order=p["order"],
                         joined_at=head["created_at"]) for p in ordered]
    pending = list((hs or {}).get("pending_acks") or [])
    state = ChannelState(view["state"])
    if state == ChannelState.ACTIVE and pending:
        state = ChannelState.PENDING
    labels = dict((hs or {}).get("labels") or {})
    if head.get("intent"):
        labels["intent"] = head["intent"]
    return ChannelMetadata(
        channel_id=head["channel_id"], manifest=manifest(head["type"]), creator_id=ordered[0]["agent"],
        participants=parts, state=state, created_at=head["created_at"], expires_at=view["expires_at"],
        closed_at=view.get("closed_at"), close_reason=view.get("close_reason") or "",
        knobs=dict(head.get("knobs") or {}), labels=labels, pending_acks=pending)


def to_envelope(item: dict[str, Any], head: dict[str, Any]) -> Envelope:
    """A Relaynet envelope item as AG2's Envelope (``text`` -> ``ag2.msg.text`` with
    ``event_data.text``; ``opened``/``closed``/``expired`` -> ``ag2.channel.*`` addressed to every
    participant, the hub's own closes sent in the opener's name as AG2's hub does)."""
    members = channels.names(head)
    et = item["event_type"]
    content = item.get("content")
    audience = item.get("audience") or None
    if et == "text":
        data: dict[str, Any] = {"text": content if isinstance(content, str) else str(content)}
    elif et in _PROTOCOL:
        data = {"channel_id": head["channel_id"]}
        if isinstance(content, dict) and content.get("reason"):
            data["reason"] = content["reason"]
        audience = list(members)
    elif isinstance(content, dict):
        data = dict(content)
    else:
        data = {"content": content}
    return Envelope(channel_id=head["channel_id"], sender_id=item.get("sender") or members[0], audience=audience,
                    event_type=_TO_AG2.get(et, et), event_data=data, envelope_id=item["envelope_id"],
                    causation_id=item.get("causation_id"), created_at=item.get("created_at") or "")


def _read(net: str, channel_id: str) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """(head, handshake, envelope items in seq order) of one channel, one Query; NotFoundError.
    A channel past its TTL is expired first, with its ``expired`` envelope (relaynet.channels
    .expire_past_ttl), and read again."""
    head, hs, envs = store.channel(net, channel_id)
    if head is not None and head.get("type") in CHANNEL_TYPES and channels.expire_past_ttl(head, clock.now_ms()):
        head, hs, envs = store.channel(net, channel_id)
    if head is None or head.get("type") not in CHANNEL_TYPES:
        raise NotFoundError(f"channel not found: {channel_id}")
    return head, hs, envs


def _read_head(net: str, channel_id: str, session: "Session | None" = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(head, handshake) of one channel, one BatchGetItem whatever its length (:func:`_read`
    without the envelopes), or what ``session`` read with its connection (:func:`load_session`,
    used once); NotFoundError. A channel past its TTL is expired first and read again."""
    got = session.prefetched.pop((net, channel_id), None) if session is not None else None
    head, hs = got if got is not None else store.head_and_handshake(net, channel_id)
    if head is not None and head.get("type") in CHANNEL_TYPES and channels.expire_past_ttl(head, clock.now_ms()):
        head, hs = store.head_and_handshake(net, channel_id)
    if head is None or head.get("type") not in CHANNEL_TYPES:
        raise NotFoundError(f"channel not found: {channel_id}")
    return head, hs


def _check_participant(session: Session, head: dict[str, Any]) -> None:
    """AccessDeniedError unless an agent bound to this connection participates in the channel."""
    if not set(session.bound) & set(channels.names(head)):
        raise AccessDeniedError(f"no agent bound to this connection participates in channel {head['channel_id']}")


def _participant_channel(session: Session, channel_id: str):
    head, hs, envs = _read(_require_net(session), channel_id)
    _check_participant(session, head)
    return head, hs, envs


def _check(head: dict[str, Any], env: Envelope):
    """AG2's ``validate_send`` of ``env`` in the channel ``head`` (relaynet.ag2.turns.check, on
    the head's folded state): the Relaynet send it is, or None. Raises ProtocolError."""
    send, _ = turns.check(head["type"], channels.names(head), head["adapter_state"], head["channel_id"],
                          env.sender_id, env.event_type, env.event_data, clock.now_ms())
    return send


def op_create_channel(session: Session, params: dict[str, Any]) -> Any:
    """``create_channel``: open a Relaynet channel, then AG2's invite/ack handshake with the
    invitees connected over AG2 (others, such as MCP agents, accept by Relaynet's rule: opening
    is immediate). Answered at once when nobody has to ack, else by the last ack's invocation."""
    creator = params["creator_id"]
    principal = session.principal(creator)
    mtype = params["manifest_type"]
    if mtype not in CHANNEL_TYPES:
        raise NotFoundError(f"no adapter registered for {mtype!r}@v{params.get('manifest_version', 1)}")
    targets = [p for p in params["participants"] if p != creator]
    if len(set(params["participants"])) != len(params["participants"]):
        raise ProtocolError("participant listed twice")
    if not targets:
        raise ProtocolError("a Relaynet channel needs at least one participant besides its creator")
    ttl = params.get("ttl")
    ttl_s = parse_duration(ttl) if ttl is not None else None
    net = principal.network_id
    live = store.bindings(net, targets)
    labels = dict(params.get("labels") or {})
    invitees = sorted(live)
    record = {"pending_acks": invitees, "creator": creator, "creator_instance": principal.instance_id,
              "connection_id": session.connection_id, "request_id": session.request_id, "labels": labels,
              "manifest_version": params.get("manifest_version", 1)}
    channel_id = ids.new_id("ch")
    # The handshake is written in the channel's own transaction: the notifier, which may run the
    # moment the channel's ``opened`` commits (push at the write), then sees the invites pending
    # and holds the ``opened`` until the last ack (:func:`deliver`), so an invitee gets its invite
    # first, as from AG2's hub.
    with store.with_handshake(net, channel_id, record, clock.now_ms()):
        _domain(lambda: channels.open_channel(principal, mtype, targets, params.get("knobs"),
                                              params.get("intent"), ttl_s or None, None, channel_id=channel_id))
    head, hs, _ = _read(net, channel_id)
    if not invitees:
        return metadata(head, hs).to_dict()
    invite = {"channel_id": channel_id, "manifest_type": mtype, "manifest_version": record["manifest_version"],
              "creator_id": creator, "knobs": dict(head.get("knobs") or {}), "labels": metadata(head, hs).labels}
    for name in invitees:
        env = Envelope(channel_id=channel_id, sender_id=creator, audience=[name], event_type=EV_CHANNEL_INVITE,
                       event_data=invite, envelope_id=ids.new_id("env"), created_at=clock.iso(clock.now_ms()))
        session.outbox.append((live[name]["connection_id"], NotifyFrame(envelope=env, recipient_id=name)))
    return DEFERRED


def _answer_creator(session: Session, net: str, channel_id: str, hs: dict[str, Any], error: str | None,
                    read: tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]] | None = None) -> None:
    """Answer the creator's deferred ``create_channel``: the channel's metadata (from ``read``,
    a :func:`_read` the caller made after the handshake ended, else a new one) or ``error``."""
    if not hs.get("request_id"):
        return
    if error is None:
        head, hs_now, _ = read or _read(net, channel_id)
        frame = ResponseFrame(request_id=hs["request_id"], ok=True, result=metadata(head, hs_now).to_dict())
    else:
        frame = ResponseFrame(request_id=hs["request_id"], ok=False, error_code="protocol_error", error_message=error)
    session.outbox.append((hs["connection_id"], frame))


def op_post_envelope(session: Session, params: dict[str, Any]) -> Any:
    """``post_envelope``: an invite ack or reject, or an ``ag2.msg.text`` send (checked by the
    channel type's Relaynet adapter on the channel's folded state, relaynet.ag2.turns, then sent
    through relaynet.channels.send, whose adapter decides it again in the transaction). Other
    event types are refused with a ProtocolError naming the supported ones; a malformed envelope
    (an unknown or missing key, a value of the wrong type) too. Returns the envelope id."""
    try:
        env = Envelope.from_dict(params["envelope"])
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise ProtocolError(f"malformed envelope: {exc}") from None
    principal = session.principal(env.sender_id)
    net = principal.network_id
    head, hs = _read_head(net, env.channel_id, session)
    _check_participant(session, head)
    if env.sender_id not in channels.names(head):
        raise ProtocolError(f"channel {env.channel_id!r} only accepts sends from participants, got {env.sender_id!r}")
    if env.event_type in (EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT):
        return _invite_answer(session, net, principal, env, hs)
    if env.event_type != EV_TEXT:
        raise ProtocolError(f"Relaynet carries {EV_TEXT!r} envelopes and invite acks over AG2's wire, "
                            f"not {env.event_type!r}")
    meta = metadata(head, hs)
    if meta.is_terminal():
        raise ProtocolError(f"channel {env.channel_id!r} is {meta.state.value}")
    if meta.state != ChannelState.ACTIVE:
        raise ProtocolError(f"channel {env.channel_id!r} not active (state={meta.state.value})")
    send = _check(head, env)
    text = env.event_data.get("text")
    if not isinstance(text, str):
        raise ProtocolError("an ag2.msg.text envelope carries event_data.text, a string")
    sent = _domain(lambda: channels.send(principal, env.channel_id, send, text, audience=env.audience,
                                         causation_id=env.causation_id, head=head))
    return sent["envelope_id"]


def _invite_answer(session: Session, net: str, principal: Principal, env: Envelope, hs: dict[str, Any] | None) -> Any:
    envelope_id = ids.new_id("env")
    if hs is None or principal.agent not in (hs.get("pending_acks") or []):
        return envelope_id  # nothing pending for this agent: absorbed, as AG2's hub does
    if env.event_type == EV_CHANNEL_INVITE_REJECT:
        _domain(lambda: channels.close(principal, env.channel_id, reason="invite_rejected"))
        store.end_handshake(net, env.channel_id)
        _answer_creator(session, net, env.channel_id, hs, f"channel rejected by {principal.agent}")
        return envelope_id
    after = store.ack_handshake(net, env.channel_id, principal.agent)
    if after is not None and not after["pending_acks"]:
        _answer_creator(session, net, env.channel_id, after, None, read=_queue_opened(session, net, env.channel_id))
    return envelope_id


def _queue_opened(session: Session, net: str, channel_id: str):
    """Queue the channel's ``opened`` for its AG2-connected participants, which :func:`deliver`
    held while invites were pending (AG2's hub broadcasts ``EV_CHANNEL_OPENED`` on quorum); its
    delivery marker keeps it to one post per connection whoever gets there first. Returns the
    channel as read (:func:`_read`), for the creator's answer: one Query for both."""
    read = _read(net, channel_id)
    head, _, envs = read
    opened = next((e for e in envs if e["event_type"] == "opened"), None)
    if opened is not None:
        _queue(session, net, head, [(opened, recipients(opened, head))])
    return read


def op_get_channel(session: Session, params: dict[str, Any]) -> Any:
    head, hs, _ = _participant_channel(session, params["channel_id"])
    return metadata(head, hs).to_dict()


def op_list_channels(session: Session, params: dict[str, Any]) -> Any:
    """``list_channels``: the channels of ``agent_id`` (or of every agent bound here), newest
    first, every state (the client filters terminal ones)."""
    agents = [params["agent_id"]] if params.get("agent_id") else sorted(session.bound)
    limit = min(int(params.get("limit") or 50), 100)
    seen: dict[str, Any] = {}
    for agent in agents:
        principal = session.principal(agent)
        listed = _domain(lambda: channels.list_channels(principal, state="all", limit=limit))
        for ch in listed["channels"]:
            seen.setdefault(ch["channel_id"], ch)
    net = _require_net(session)
    hss = store.handshakes(net, list(seen))
    out = []
    for channel_id in list(seen)[:limit]:
        head = channels.load_channel(net, channel_id)
        out.append(metadata(head, hss.get(channel_id)).to_dict())
    return out


def op_close_channel(session: Session, params: dict[str, Any]) -> Any:
    head, _, _ = _participant_channel(session, params["channel_id"])
    agent = next(a for a in sorted(session.bound) if a in channels.names(head))
    principal = session.principal(agent)
    _domain(lambda: channels.close(principal, params["channel_id"], reason=params.get("reason") or "explicit_close"))
    head, hs, _ = _read(principal.network_id, params["channel_id"])
    return metadata(head, hs).to_dict()


def op_read_wal(session: Session, params: dict[str, Any]) -> Any:
    """``read_wal``: the channel's envelopes ``[since, until)``, cut to the longest prefix that
    fits one 128 KB message (read on with ``since``)."""
    head, _, envs = _participant_channel(session, params["channel_id"])
    since = int(params.get("since") or 0)
    until = params.get("until")
    window = envs[since:] if until is None else envs[since:int(until)]
    return f.fit_list([to_envelope(i, head).to_dict() for i in window])


def op_find_envelope_by_causation(session: Session, params: dict[str, Any]) -> Any:
    head, _, envs = _participant_channel(session, params["channel_id"])
    for item in envs:
        if item.get("sender") == params["sender_id"] and item.get("causation_id") == params["causation_id"]:
            return to_envelope(item, head).to_dict()
    return None


def op_can_send(session: Session, params: dict[str, Any]) -> Any:
    """``can_send``: whether an envelope of ``event_type`` (default ``ag2.msg.text``) from
    ``sender_id`` would be accepted now (the channel active, the turn rules of relaynet.ag2.turns)."""
    session.principal(params["sender_id"])
    try:
        head, hs, _ = _participant_channel(session, params["channel_id"])
    except NotFoundError:
        return False
    if metadata(head, hs).state != ChannelState.ACTIVE:
        return False
    probe = Envelope(channel_id=head["channel_id"], sender_id=params["sender_id"], audience=None,
                     event_type=params.get("event_type") or EV_TEXT, event_data={"text": ""})
    try:
        _check(head, probe)
    except ProtocolError:  # a refusal means "not now", as AG2's hub answers
        return False
    return True


def op_pending_turns_for(session: Session, params: dict[str, Any]) -> Any:
    """``pending_turns_for``: active channels whose adapter expects ``agent_id`` next, with the
    envelope that put the turn on it (relaynet.ag2.turns.expected_next)."""
    principal = session.principal(params["agent_id"])
    listed = _domain(lambda: channels.list_channels(principal, state="active", limit=100))
    out = []
    for ch in listed["channels"]:
        head, hs, envs = _read(principal.network_id, ch["channel_id"])
        if metadata(head, hs).state != ChannelState.ACTIVE:
            continue
        expected = turns.expected_next(head["type"], head["adapter_state"], envs)
        if expected is None or expected.agent_id != principal.agent:
            continue
        at = next((i.get("created_at") for i in envs if i["envelope_id"] == expected.triggering_envelope_id), None)
        out.append({"channel_id": head["channel_id"], "triggering_envelope_id": expected.triggering_envelope_id,
                    "expected_at": at or clock.iso(clock.now_ms())})
    return out


def op_report_turn_failure(session: Session, params: dict[str, Any]) -> Any:
    session.principal(params["agent_id"])
    log.warning("AG2 turn failed: channel=%s agent=%s envelope=%s error=%s", params.get("channel_id"),
                params.get("agent_id"), params.get("envelope_id"), str(params.get("error", ""))[:500])


# -- tasks (observe-only, as AG2's hub) and checkpoints ------------------------------------------

_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # AG2's hub: ids that are safe path segments


def _task_id(params: dict[str, Any]) -> str:
    task_id = params.get("task_id")
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
        raise ProtocolError(f"invalid task_id: {task_id!r}")
    return task_id


def _visible(session: Session, meta: dict[str, Any]) -> bool:
    """AG2's rule: a task shows to its owner's connection and to its channel's participants."""
    if meta.get("owner_id") in session.bound:
        return True
    if meta.get("channel_id"):
        try:
            _participant_channel(session, meta["channel_id"])
        except (AccessDeniedError, NotFoundError):
            return False
        return True
    return False


def op_observe_task(session: Session, params: dict[str, Any]) -> Any:
    """``observe_task``: record (or refresh) a task its owner runs; the owner must be bound here,
    and a task tied to a channel needs the owner among its participants."""
    meta = TaskMetadata.from_dict(params["metadata"])
    if not _TASK_ID.fullmatch(meta.task_id or ""):
        raise ProtocolError(f"invalid task_id: {meta.task_id!r}")
    principal = session.principal(meta.owner_id)
    if meta.channel_id:
        head, _, _ = _participant_channel(session, meta.channel_id)
        if meta.owner_id not in channels.names(head):
            raise AccessDeniedError(f"{meta.owner_id!r} does not participate in channel {meta.channel_id}")
    existing = store.task(principal.network_id, meta.task_id)
    if existing is not None and existing.get("owner_id") != meta.owner_id:
        raise AccessDeniedError(f"task {meta.task_id!r} belongs to another agent")
    if existing is not None:
        merged = TaskMetadata.from_dict(existing)
        merged.state = meta.state
        merged.started_at = meta.started_at or merged.started_at
        merged.expires_at = meta.expires_at or merged.expires_at
        merged.channel_id = meta.channel_id or merged.channel_id
        merged.progress.update(meta.progress)
        meta = merged
    elif not meta.created_at:
        meta.created_at = clock.iso(clock.now_ms())
    store.put_task(principal.network_id, meta.task_id, meta.to_dict())


def op_get_task(session: Session, params: dict[str, Any]) -> Any:
    task_id = _task_id(params)
    meta = store.task(_require_net(session), task_id)
    if meta is None or not _visible(session, meta):  # an invisible task answers as an unknown one
        raise NotFoundError(f"task not found: {task_id}")
    return TaskMetadata.from_dict(meta).to_dict()


def op_list_tasks(session: Session, params: dict[str, Any]) -> Any:
    out = []
    for meta in store.tasks(_require_net(session)):
        if params.get("agent_id") is not None and meta.get("owner_id") != params["agent_id"]:
            continue
        if params.get("channel_id") is not None and meta.get("channel_id") != params["channel_id"]:
            continue
        if params.get("state") is not None and meta.get("state") != params["state"]:
            continue
        if _visible(session, meta):
            out.append(TaskMetadata.from_dict(meta).to_dict())
    return out[: int(params.get("limit") or 50)]


def op_update_task(session: Session, params: dict[str, Any]) -> Any:
    """``update_task``: the owner moves its task; a terminal task never changes again (AG2's hub
    ignores further updates), and a terminal move stamps ``completed_at``."""
    task_id = _task_id(params)
    net = _require_net(session)
    existing = store.task(net, task_id)
    if existing is None:
        raise NotFoundError(f"task not found: {task_id}")
    session.principal(existing["owner_id"])
    meta = TaskMetadata.from_dict(existing)
    if meta.state in TERMINAL_TASK_STATES:
        return None
    now = clock.iso(clock.now_ms())
    if params.get("progress"):
        meta.progress.update(params["progress"])
        meta.last_progress_at = now
    if params.get("result") is not None:
        meta.result = params["result"]
    if params.get("error"):
        meta.error = str(params["error"])
    if params.get("state") is not None:
        meta.state = TaskState(params["state"])
        if meta.state in TERMINAL_TASK_STATES:
            meta.completed_at = now
    store.put_task(net, task_id, meta.to_dict())


def op_record_observation(session: Session, params: dict[str, Any]) -> Any:
    """``record_observation``: count a finished task of ``capability`` into the owner's AG2
    resume (``observed[capability]``: n, completed, failed, expired)."""
    principal = session.principal(params["owner_id"])
    outcome = TaskState(params["outcome"])
    rec = store.identity(principal.network_id, principal.agent)
    if rec is None:
        raise NotFoundError(f"agent not registered: {principal.agent}")
    resume = Resume.from_dict(rec["resume"])
    stat = resume.observed.get(params["capability"]) or ObservedStat()
    stat.n += 1
    if outcome.value in ("completed", "failed", "expired"):
        setattr(stat, outcome.value, getattr(stat, outcome.value) + 1)
    resume.observed[params["capability"]] = stat
    resume.last_updated = clock.iso(clock.now_ms())
    store.update_identity(principal.network_id, principal.agent, "resume", resume.to_dict())


def op_fire_task_event(session: Session, params: dict[str, Any]) -> Any:
    task_id = _task_id(params)
    meta = store.task(_require_net(session), task_id)
    if meta is None or meta.get("owner_id") not in session.bound:
        raise AccessDeniedError(f"task {task_id!r} is not owned by an agent bound to this connection")
    log.warning("AG2 task event: task=%s kind=%s", task_id, str(params.get("kind"))[:100])


def _checkpoint_writer(session: Session, task_id: str) -> Principal:
    net = _require_net(session)
    meta = store.task(net, task_id)
    if meta is not None:
        return session.principal(meta["owner_id"])
    ckpt = store.checkpoint(net, task_id)
    if ckpt is not None:
        return session.principal(ckpt["writer"])  # an unobserved task's checkpoint: its first writer's
    return session.any_principal()


def op_checkpoint_task(session: Session, params: dict[str, Any]) -> Any:
    task_id = _task_id(params)
    if not isinstance(params.get("state"), dict):
        raise ProtocolError("a checkpoint's state is a JSON object")
    principal = _checkpoint_writer(session, task_id)
    store.put_checkpoint(principal.network_id, task_id, principal.agent, params["state"])


def op_read_task_checkpoint(session: Session, params: dict[str, Any]) -> Any:
    task_id = _task_id(params)
    principal = _checkpoint_writer(session, task_id)
    ckpt = store.checkpoint(principal.network_id, task_id)
    return None if ckpt is None else ckpt.get("state", {})


# -- delivery ------------------------------------------------------------------------------------

def recipients(item: dict[str, Any], head: dict[str, Any]) -> list[str]:
    """Who an envelope is delivered to over AG2: every participant for the channel's own events
    (opened, closed, expired, the sender included, as AG2's hub does), else its audience or every
    participant but the sender."""
    members = channels.names(head)
    if item["event_type"] in _PROTOCOL:
        return members
    return [n for n in (item.get("audience") or members) if n != item.get("sender")]


def replay(session: Session, agent: str, since_envelope_id: str) -> None:
    """Queue, after the welcome, every envelope addressed to the agent that it has not acked:
    those whose copy is still in its Relaynet mailbox (an ack takes the copy out, :func:`receipt`;
    a nack, a handler still running when the connection went, or no answer at all leaves it), in
    creation order, past ``since_envelope_id`` when that is not empty, at most
    ``RELAYNET_MAILBOX_CAP`` of them (what a mailbox holds before sends to it are refused;
    docs/protocol.md 12).
    Unlike a cursor, an envelope nacked before a later one was acked is still replayed.
    Envelopes it sent are not in its mailbox; ``network_inbox`` taking a copy delivers it too."""
    net = _require_net(session)
    session.principal(agent)  # AccessDeniedError when the agent is not bound here
    heads: dict[str, dict[str, Any] | None] = {}
    for entry in mail_store.channel_copies(net, agent, settings().mailbox_cap):
        item = entry.get("envelope") or {}
        channel_id = entry.get("channelId")
        if not item.get("envelope_id") or (since_envelope_id and item["envelope_id"] <= since_envelope_id):
            continue
        if channel_id not in heads:
            try:
                heads[channel_id] = channels.load_channel(net, channel_id)
            except NotFound:
                heads[channel_id] = None
        head = heads[channel_id]
        if head is None or head.get("type") not in CHANNEL_TYPES or agent not in recipients(item, head):
            continue
        session.outbox.append((session.connection_id, NotifyFrame(envelope=to_envelope(item, head), recipient_id=agent)))


def receipt(session: Session, recipient_id: str, channel_id: str, envelope_id: str, status: str) -> None:
    """A client's receipt: an ``ack`` by an agent bound here advances its cursor of the channel
    and takes the envelope's copy out of the agent's Relaynet mailbox (delivered: network_inbox
    does not hand it out again, and an AG2-only agent's mailbox does not fill to
    RELAYNET_MAILBOX_CAP; docs/protocol.md 12); anything else (a nack, an unattributable or
    foreign receipt) changes nothing."""
    if status != "ack" or recipient_id not in session.bound or not channel_id or not envelope_id:
        if status == "nack":
            log.warning("AG2 envelope nacked: recipient=%s channel=%s envelope=%s", recipient_id, channel_id,
                        envelope_id)
        return
    store.advance_cursor(session.network_id, recipient_id, channel_id, envelope_id)
    try:
        msg_id = ids.sibling("msg", envelope_id)
    except ValueError:
        return  # not an envelope id of ours: nothing in any mailbox
    mail_store.discard(session.network_id, {"agent": recipient_id}, msg_id)


OPS: dict[str, Callable[[Session, dict[str, Any]], Any]] = {
    "register": op_register, "find_agent_id": op_find_agent_id, "get_agent": op_get_agent,
    "get_resume": op_get_resume, "get_rule": op_get_rule, "get_skill": op_get_skill, "names_for": op_names_for,
    "list_agents": op_list_agents, "set_resume": op_set_resume, "set_skill": op_set_skill,
    "set_rule": op_set_rule, "unregister": op_unregister,
    "create_channel": op_create_channel, "get_channel": op_get_channel, "list_channels": op_list_channels,
    "close_channel": op_close_channel, "post_envelope": op_post_envelope, "read_wal": op_read_wal,
    "find_envelope_by_causation": op_find_envelope_by_causation, "can_send": op_can_send,
    "pending_turns_for": op_pending_turns_for, "report_turn_failure": op_report_turn_failure,
    "observe_task": op_observe_task, "get_task": op_get_task, "list_tasks": op_list_tasks,
    "update_task": op_update_task, "record_observation": op_record_observation,
    "fire_task_event": op_fire_task_event, "checkpoint_task": op_checkpoint_task,
    "read_task_checkpoint": op_read_task_checkpoint,
}


# -- posting -----------------------------------------------------------------------------------

def flush(session: Session, endpoint_url: str) -> int:
    """Post the session's outbox in order (postToConnection); a connection that is gone is
    forgotten (its bindings too). An answer over 128 KB becomes an ``ok=false`` answer saying
    so. A notify is posted only by whoever takes its delivery marker (store.claim_delivery), so
    a connection gets each envelope once per recipient however many paths find it. Returns how
    many frames were posted. Raises botocore's ClientError for any other failed post (the marker
    given back first, so a retry posts it)."""
    sent = 0
    gone: set[str] = set()
    for connection_id, frame in session.outbox:
        if connection_id in gone:
            continue
        try:
            data = f.encode(frame)
        except f.TooLarge as exc:
            if not isinstance(frame, ResponseFrame):
                log.warning("AG2 frame not sent: %s", exc)
                continue
            data = f.encode(ResponseFrame(request_id=frame.request_id, ok=False, error_code="protocol_error",
                                          error_message=f"the answer is over API Gateway's 128 KB message limit "
                                                        f"({exc}); ask for less (read_wal: since/until)"))
        marker = (connection_id, frame.recipient_id, frame.envelope.envelope_id) \
            if isinstance(frame, NotifyFrame) else None
        if marker and not store.claim_delivery(*marker, clock.now_ms()):
            continue  # posted to this connection already
        try:
            post.post(endpoint_url, connection_id, data)
            sent += 1
        except post.Gone:
            gone.add(connection_id)
            store.delete_connection(connection_id)
        except Exception:
            if marker:
                store.release_delivery(*marker)
            raise
    session.outbox.clear()
    return sent


def written_before(net: str, channel_id: str, item: dict[str, Any]) -> dict[str, Any] | None:
    """The envelope written in the same transaction as ``item`` and just before it, which the
    stream may hand over after it (AWS does not order the records of one transaction's items):
    the ``opened`` of a seed written with its channel (seq 2, relaynet.channels.open_channel), or
    the envelope a ``closed`` with a ``causation_id`` closes (seq - 1, relaynet.channels.send).
    A transaction's envelopes share their ``created_at``, so an earlier envelope from another
    write (which went its own way, and may have been acked on an older connection) is not
    returned. None for every other envelope (no read); one strongly consistent GetItem otherwise."""
    seq = int(item.get("seq") or 0)
    closes = item.get("event_type") == "closed" and item.get("causation_id") and seq > 1
    if not closes and not (seq == 2 and item.get("event_type") != "opened"):
        return None
    before = channel_store.get_envelope(net, channel_id, seq - 1)
    return before if before is not None and before.get("created_at") == item.get("created_at") else None


def deliver(net: str, channel_id: str, item: dict[str, Any], endpoint_url: str) -> int:
    """Notify the AG2-connected recipients of one new envelope item (the stream notifier's job,
    for every envelope whichever surface wrote it), after the envelope written with it just
    before (:func:`written_before`) when that one has not reached them yet: its delivery marker
    decides, so each envelope still reaches each connection once, and in seq order however the
    stream orders one transaction's records. A channel's ``opened`` is held while its AG2
    handshake waits for acks (one more GetItem, for ``opened`` only): the last ack's invocation
    sends it (:func:`_queue_opened`), so invitees get the invite first however soon this runs
    after the write. Returns how many frames were posted."""
    head = _channel_shape(net, channel_id)
    if head.get("type") not in CHANNEL_TYPES:
        return 0
    before = written_before(net, channel_id, item)
    notices = [(before, recipients(before, head))] if before else []
    notices.append((item, recipients(item, head)))
    if any(n["event_type"] == "opened" for n, _ in notices) and _invites_pending(net, channel_id):
        notices = [(n, who) for n, who in notices if n["event_type"] != "opened"]  # the last ack sends it
    session = Session(connection_id="", connection={"network_id": net})
    _queue(session, net, head, notices)
    return flush(session, endpoint_url) if session.outbox else 0


def _channel_shape(net: str, channel_id: str) -> dict[str, Any]:
    """``{channel_id, type, participants}`` of the channel's head, which never change after it
    opens (relaynet.cache.channel_shapes: a conversation's every envelope reads it once per
    container and bound, not once each). Raises NotFound for a channel that is not there."""
    def load() -> dict[str, Any]:
        head = channels.load_channel(net, channel_id)
        return {key: head.get(key) for key in ("channel_id", "type", "participants")}

    return cache.channel_shapes.get((settings().table_name, net, channel_id), load)


def _invites_pending(net: str, channel_id: str) -> bool:
    """Whether the channel's AG2 handshake (written with the channel) still waits for acks."""
    return bool((store.handshake(net, channel_id) or {}).get("pending_acks"))


def _queue(session: Session, net: str, head: dict[str, Any], notices: list[tuple[dict[str, Any], list[str]]]) -> None:
    """Append a notify frame per (envelope item, recipient) for the recipients connected over
    AG2 with a live token (a revoked token is notified nothing), in the order given."""
    names = list(dict.fromkeys(n for _, who in notices for n in who))
    if not names:
        return
    live = {n: b for n, b in store.bindings(net, names).items()
            if token_live(b.get("token_hash"), b.get("instance_id"))}
    for envelope_item, who in notices:
        env = to_envelope(envelope_item, head)
        for name in who:
            if name in live:
                session.outbox.append((live[name]["connection_id"], NotifyFrame(envelope=env, recipient_id=name)))


def expire_handshakes(now_ms: int, endpoint_url: str) -> int:
    """Close every channel whose invitees have not all acked within
    ``RELAYNET_AG2_INVITE_TIMEOUT_SECONDS`` (30 s, as AG2's ``Hub(invite_ack_timeout=30.0)``;
    relaynet.config) with ``invite_timeout``, and answer its creator ``protocol_error`` (AG2's
    client has usually given up by then). Returns how many."""
    session = Session(connection_id="", connection={})
    closed = 0
    for hs in store.stale_handshakes(now_ms - int(settings().ag2_invite_timeout * 1000)):
        net, channel_id = hs["network_id"], hs["channel_id"]
        if not store.end_handshake(net, channel_id):
            continue  # the last ack came first
        creator = Principal(kind="instance", network_id=net, instance_id=hs.get("creator_instance"),
                            agent=hs["creator"])
        try:
            channels.close(creator, channel_id, reason="invite_timeout")
        except RelaynetError as exc:
            log.warning("AG2 handshake of %s not closed: %s", channel_id, exc)
        _answer_creator(session, net, channel_id, hs, f"channel {channel_id!r} ack timeout")
        closed += 1
    flush(session, endpoint_url)
    return closed


def keepalive(now_ms: int, idle_ms: int, endpoint_url: str) -> int:
    """Send a ``ping`` frame to every connection silent for ``idle_ms`` (API Gateway closes a
    connection idle for 10 minutes; AG2's client ignores the frame). Returns how many."""
    session = Session(connection_id="", connection={})
    for conn in store.idle_connections(now_ms - idle_ms):
        session.outbox.append((conn["connection_id"], PingFrame()))
    sent = flush(session, endpoint_url)
    for conn in store.idle_connections(now_ms - idle_ms):
        store.touch_connection(conn["connection_id"], now_ms)
    return sent
