"""The AG2 wire's own table items: connections, bindings, AG2 identities, per-(agent, channel)
cursors and pending channel handshakes (docs/architecture.md, "AG2 wire"). The channels and
envelopes themselves are Relaynet's (relaynet.channels): AG2 channels are Relaynet channels.

| item | PK | SK |
|---|---|---|
| connection (one WebSocket) | ``AG2#CONN#<connection id>`` | ``CONN`` |
| delivery marker (an envelope posted to that connection for one recipient) | ``AG2#CONN#<connection id>`` | ``SENT#<recipient>#<envelope id>`` |
| binding (an agent's live connection) and AG2 identity (passport, resume, rule, SKILL.md) | ``NET#<net>#AG2`` | ``BIND#<agent>`` / ``AGENT#<agent>`` |
| cursor (last acked envelope) | ``NET#<net>#AG2#CUR#<agent>`` | ``CH#<channel>`` |
| pending handshake of a channel (invitees still to ack, who asked) | the channel's partition | ``AG2`` |
| observed AG2 task / its checkpoint | ``NET#<net>#AG2#TASKS`` | ``TASK#<task id>`` / ``CKPT#<task id>`` |

GSI1 (sparse): every connection under ``GSI1PK = AG2CONNS``, ``GSI1SK = <last frame ms, 13
digits>#<connection id>``, so the keepalive finds the connections idle longest in one Query;
every handshake still waiting for acks under ``GSI1PK = AG2HANDSHAKES``, ``GSI1SK = <started ms>#<net>#<channel>``.
Connections and delivery markers carry ``ttl`` (the table's TTL attribute, epoch seconds): API Gateway
ends every connection after 2 hours, so a connection item older than that is garbage whether or not
``$disconnect`` ran; ``$disconnect`` deletes the connection's whole partition.
"""

from __future__ import annotations

from typing import Any

from relaynet.store import keys as k
from relaynet.store import table as t

_HANDSHAKE_SK = "AG2"  # a channel's AG2 handshake record: in the channel's partition, beside its head

CONNECTIONS_INDEX = "AG2CONNS"
HANDSHAKES_INDEX = "AG2HANDSHAKES"
CONNECTION_TTL_SECONDS = 2 * 3600 + 600  # API Gateway's 2-hour cap plus a margin


def _conn_key(connection_id: str) -> tuple[str, str]:
    return f"AG2#CONN#{connection_id}", "CONN"


def _net_pk(net: str) -> str:
    return f"{k.net(net)}#AG2"


def _activity_sk(ms: int, connection_id: str) -> str:
    return f"{ms:013d}#{connection_id}"


# -- connections --------------------------------------------------------------------------------

def put_connection(connection_id: str, now_ms: int) -> None:
    """A new connection (``$connect``), bound to nobody yet."""
    pk, sk = _conn_key(connection_id)
    t.put({"PK": pk, "SK": sk, "connection_id": connection_id, "connected_ms": now_ms, "last_ms": now_ms,
           "bindings": {}, "tokens": {}, "GSI1PK": CONNECTIONS_INDEX, "GSI1SK": _activity_sk(now_ms, connection_id),
           "ttl": now_ms // 1000 + CONNECTION_TTL_SECONDS})


def get_connection(connection_id: str) -> dict[str, Any] | None:
    """The connection item: ``{connection_id, connected_ms, last_ms, network_id?, bindings
    {agent: instance id}}``, or None when it is gone."""
    return t.get(*_conn_key(connection_id))


def connection_and_channel(connection_id: str, net: str, channel_id: str) -> tuple[
        dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    """(the connection item, the channel head, its AG2 handshake) in one strongly consistent
    BatchGetItem; each None when absent."""
    keys = [_conn_key(connection_id), *_head_keys(net, channel_id)]
    got = t.batch_get(keys)
    return got.get(keys[0]), got.get(keys[1]), got.get(keys[2])


def touch_connection(connection_id: str, now_ms: int) -> None:
    """Record a frame's arrival (what the keepalive measures idleness by)."""
    t.update(*_conn_key(connection_id), "SET last_ms = :now, GSI1SK = :sk", condition="attribute_exists(PK)",
             now=now_ms, sk=_activity_sk(now_ms, connection_id))


def bind(connection_id: str, net: str, agent: str, instance_id: str, token_hash: str, now_ms: int) -> bool:
    """Bind ``agent`` (served by ``instance_id``, proved by the token whose hash is
    ``token_hash``) to the connection and make the connection the agent's live one (the last bind
    wins, as AG2's ``Hub.bind_endpoint``). A connection serves one network: False (nothing
    written) when it is already bound in another or is gone."""
    pk, sk = _conn_key(connection_id)
    try:
        t.transact([
            t.tx_update(pk, sk, "SET network_id = :net, bindings.#a = :inst, tokens.#a = :tok",
                        "attribute_exists(PK) AND (attribute_not_exists(network_id) OR network_id = :net)",
                        names={"#a": agent}, net=net, inst=instance_id, tok=token_hash),
            t.tx_put({"PK": _net_pk(net), "SK": f"BIND#{agent}", "connection_id": connection_id,
                      "instance_id": instance_id, "token_hash": token_hash, "bound_ms": now_ms}),
        ])
    except t.TransactionCancelled:
        return False
    return True


def unbind(connection_id: str, net: str, agent: str) -> None:
    """Take ``agent`` off the connection (its token was revoked): the connection no longer acts
    for it, and its binding goes if it still points at this connection (nothing is notified to
    it here any more)."""
    pk, sk = _conn_key(connection_id)
    t.update(pk, sk, "REMOVE bindings.#a, tokens.#a", condition="attribute_exists(PK)", names={"#a": agent})
    t.delete_if(_net_pk(net), f"BIND#{agent}", "connection_id = :c", c=connection_id)


def delete_connection(connection_id: str) -> dict[str, Any] | None:
    """Forget a connection (``$disconnect``, or a postToConnection that answered Gone): the
    bindings that still point at it, its delivery markers and its item; returns the item that
    was there (None when it was already gone)."""
    conn = get_connection(connection_id)
    if conn is None:
        return None
    net = conn.get("network_id")
    for agent in (conn.get("bindings") or {}):
        t.delete_if(_net_pk(net), f"BIND#{agent}", "connection_id = :c", c=connection_id)
    pk, sk = _conn_key(connection_id)
    t.batch_delete((i["PK"], i["SK"]) for i in t.query(pk, sk_prefix="SENT#"))
    t.delete_if(pk, sk, "attribute_exists(PK)")
    return conn


def claim_delivery(connection_id: str, recipient: str, envelope_id: str, now_ms: int) -> bool:
    """Take the one right to post ``envelope_id`` to ``recipient`` on this connection (a
    conditional put of its delivery marker). False when it was taken before: the hello's replay
    and the stream notifier can both find an envelope written just before a re-attach, and a
    stream batch can be retried, but a connection gets each envelope once (docs/protocol.md 12)."""
    pk, _ = _conn_key(connection_id)
    return t.put({"PK": pk, "SK": f"SENT#{recipient}#{envelope_id}", "ttl": now_ms // 1000 + CONNECTION_TTL_SECONDS},
                 "attribute_not_exists(PK)")


def release_delivery(connection_id: str, recipient: str, envelope_id: str) -> None:
    """Give the right back (the post failed for a reason other than a gone connection), so a
    retry of the same delivery posts it."""
    pk, _ = _conn_key(connection_id)
    t.delete_if(pk, f"SENT#{recipient}#{envelope_id}", "attribute_exists(PK)")


def idle_connections(before_ms: int, limit: int = 500) -> list[dict[str, Any]]:
    """Connections whose last frame came before ``before_ms``, idlest first."""
    return t.query(CONNECTIONS_INDEX, index="GSI1", sk_lt=f"{before_ms:013d}~", limit=limit, consistent=False)


def binding(net: str, agent: str) -> dict[str, Any] | None:
    """``{connection_id, instance_id, token_hash, bound_ms}`` of the agent's live connection, or None."""
    return t.get(_net_pk(net), f"BIND#{agent}")


def bindings(net: str, agents: list[str]) -> dict[str, dict[str, Any]]:
    """The live bindings of ``agents`` (absent agents are not connected over AG2)."""
    if not agents:
        return {}
    got = t.batch_get([(_net_pk(net), f"BIND#{a}") for a in agents])
    return {a: got[(_net_pk(net), f"BIND#{a}")] for a in agents if (_net_pk(net), f"BIND#{a}") in got}


# -- AG2 identities -------------------------------------------------------------------------------

def put_identity(net: str, agent: str, record: dict[str, Any]) -> None:
    """Store (or replace: a register takes the identity over) the agent's AG2 identity:
    ``{passport, resume, rule, skill_md, kind, registered_at}``, the passport without its claim."""
    t.put({"PK": _net_pk(net), "SK": f"AGENT#{agent}", "agent": agent, **record})


def identity(net: str, agent: str) -> dict[str, Any] | None:
    """The agent's AG2 identity record, or None when it never registered over AG2."""
    return t.get(_net_pk(net), f"AGENT#{agent}")


def identities(net: str) -> dict[str, dict[str, Any]]:
    """Every AG2 identity of the network, by agent name (one Query)."""
    return {i["agent"]: i for i in t.query(_net_pk(net), sk_prefix="AGENT#")}


def update_identity(net: str, agent: str, field: str, value: Any) -> None:
    """Replace one part (``resume``, ``rule``, ``skill_md``) of an AG2 identity."""
    t.update(_net_pk(net), f"AGENT#{agent}", "SET #f = :v", names={"#f": field}, v=value)


def delete_identity(net: str, agent: str) -> None:
    """``unregister``: forget the AG2 identity (the Relaynet agent definition stays)."""
    t.delete_if(_net_pk(net), f"AGENT#{agent}", "attribute_exists(PK)")


# -- cursors ----------------------------------------------------------------------------------------

def advance_cursor(net: str, agent: str, channel_id: str, envelope_id: str) -> bool:
    """Move the (agent, channel) cursor to ``envelope_id`` when it sorts above the current one
    (monotonic, as AG2's ``Hub._advance_cursor``). False when it did not move."""
    return bool(t.update(f"{k.net(net)}#AG2#CUR#{agent}", f"CH#{channel_id}", "SET envelope_id = :e",
                         condition="attribute_not_exists(envelope_id) OR envelope_id < :e", e=envelope_id))


# -- pending handshakes -------------------------------------------------------------------------

def handshake_item(net: str, channel_id: str, record: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """A channel's AG2 handshake item: ``{pending_acks, creator, creator_instance, connection_id,
    request_id, labels, manifest_version}``; the channel is ``pending`` to AG2 until
    ``pending_acks`` is empty. One still waiting is listed under GSI1 ``AG2HANDSHAKES`` by when it
    began, so the keepalive can time it out."""
    pk, sk = _handshake_key(net, channel_id)
    item = {"PK": pk, "SK": sk, "network_id": net, "channel_id": channel_id,
            "started_ms": now_ms, **record}
    if record.get("pending_acks"):
        item.update(GSI1PK=HANDSHAKES_INDEX, GSI1SK=f"{now_ms:013d}#{net}#{channel_id}")
    return item


def handshake_action(net: str, channel_id: str, record: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The conditional Put of a new channel's handshake item (:func:`handshake_item`), for the
    channel's own transaction (relaynet.store.table.ride): a notifier that reads the channel's
    envelopes reads its handshake too."""
    return t.tx_put(handshake_item(net, channel_id, record, now_ms), "attribute_not_exists(PK)")


def with_handshake(net: str, channel_id: str, record: dict[str, Any], now_ms: int):
    """A context manager: the first write made inside it (the new channel's transaction,
    relaynet.channels.open_channel) also writes the channel's handshake (:func:`handshake_action`),
    so no notifier ever reads the channel without it; nothing is written when the block writes
    nothing. Yields the rider (``written``)."""
    return t.ride(handshake_action(net, channel_id, record, now_ms))


def stale_handshakes(before_ms: int, limit: int = 100) -> list[dict[str, Any]]:
    """Handshakes still waiting for acks that began before ``before_ms``, oldest first."""
    return t.query(HANDSHAKES_INDEX, index="GSI1", sk_lt=f"{before_ms:013d}~", limit=limit, consistent=False)


def end_handshake(net: str, channel_id: str) -> bool:
    """Stop waiting (a timeout): no acks pending any more, off the index. False when it had
    already ended (the last ack came first)."""
    return bool(t.update(*_handshake_key(net, channel_id), "SET pending_acks = :none REMOVE GSI1PK, GSI1SK",
                         condition="size(pending_acks) > :zero", none=[], zero=0))


def _handshake_key(net: str, channel_id: str) -> tuple[str, str]:
    return k.channel_pk(net, channel_id), _HANDSHAKE_SK


def _head_keys(net: str, channel_id: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The keys of a channel's head and of its AG2 handshake record."""
    return k.channel_head(net, channel_id), _handshake_key(net, channel_id)


def handshake(net: str, channel_id: str) -> dict[str, Any] | None:
    """The channel's AG2 handshake record, or None (a channel opened by the HTTP tools)."""
    return t.get(*_head_keys(net, channel_id)[1])


def head_and_handshake(net: str, channel_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the channel head, its AG2 handshake record) in one strongly consistent BatchGetItem,
    however long the channel; either None when absent."""
    keys = _head_keys(net, channel_id)
    got = t.batch_get(keys)
    return got.get(keys[0]), got.get(keys[1])


def handshakes(net: str, channel_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The handshake records of several channels, by channel id."""
    if not channel_ids:
        return {}
    got = t.batch_get([_handshake_key(net, c) for c in channel_ids])
    return {c: got[_handshake_key(net, c)] for c in channel_ids if _handshake_key(net, c) in got}


def ack_handshake(net: str, channel_id: str, agent: str) -> dict[str, Any] | None:
    """Remove ``agent`` from the pending acks, once; returns the record after the update, or None
    when the agent was not pending (a second ack, or no handshake)."""
    rec = handshake(net, channel_id)
    if rec is None or agent not in (rec.get("pending_acks") or []):
        return None
    rest = [a for a in rec["pending_acks"] if a != agent]
    expr = "SET pending_acks = :rest" + ("" if rest else " REMOVE GSI1PK, GSI1SK")
    ok = t.update(*_handshake_key(net, channel_id), expr,
                  condition="contains(pending_acks, :a) AND size(pending_acks) = :n",
                  rest=rest, a=agent, n=len(rec["pending_acks"]))
    if not ok:
        return ack_handshake(net, channel_id, agent)  # another ack moved it first: read again
    return {**rec, "pending_acks": rest}


def channel_items(net: str, channel_id: str) -> list[dict[str, Any]]:
    """The whole channel partition (head, envelopes, handshake), strongly consistent, in key order."""
    return t.query(k.channel_pk(net, channel_id))


def parse_channel_pk(pk: str) -> tuple[str, str] | None:
    """``(network id, channel id)`` of a channel partition's key, or None for any other key."""
    parts = pk.split("#")
    if len(parts) == 4 and parts[0] == "NET" and parts[2] == "CH":
        return parts[1], parts[3]
    return None


# -- AG2 tasks (observe-only records) and checkpoints -------------------------------------------

def _tasks_pk(net: str) -> str:
    return f"{k.net(net)}#AG2#TASKS"


def put_task(net: str, task_id: str, metadata: dict[str, Any]) -> None:
    """Store an observed AG2 task's ``TaskMetadata.to_dict()`` (last write wins)."""
    t.put({"PK": _tasks_pk(net), "SK": f"TASK#{task_id}", "task_id": task_id, "owner": metadata.get("owner_id"),
           "metadata": metadata})


def task(net: str, task_id: str) -> dict[str, Any] | None:
    """The stored ``TaskMetadata`` dict of an observed AG2 task, or None."""
    item = t.get(_tasks_pk(net), f"TASK#{task_id}")
    return None if item is None else item["metadata"]


def tasks(net: str) -> list[dict[str, Any]]:
    """Every observed AG2 task of the network, by task id (one Query)."""
    return [i["metadata"] for i in t.query(_tasks_pk(net), sk_prefix="TASK#")]


def put_checkpoint(net: str, task_id: str, writer: str, state: dict[str, Any]) -> None:
    """A task's resume snapshot (last write wins; ``writer`` is the agent that first wrote it)."""
    t.update(_tasks_pk(net), f"CKPT#{task_id}", "SET #s = :s, writer = if_not_exists(writer, :w)",
             names={"#s": "state"}, s=state, w=writer)


def checkpoint(net: str, task_id: str) -> dict[str, Any] | None:
    """``{state, writer}`` of a task's snapshot, or None."""
    return t.get(_tasks_pk(net), f"CKPT#{task_id}")


# -- channels as read, and items as written ----------------------------------------------------

def channel_of(item: dict[str, Any]) -> tuple[str, str] | None:
    """``(network id, channel id)`` of the channel partition ``item`` (an item as written: a
    stream image decoded) is in, or None for an item of any other partition
    (:func:`parse_channel_pk`). KeyError when ``item`` has no key."""
    return parse_channel_pk(item["PK"])


def channel(net: str, channel_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[dict[str, Any]]]:
    """(head or None, AG2 handshake or None, envelope items in ``seq`` order) of one channel:
    :func:`channel_items`' one strongly consistent Query, split by sort key (keys.channel_head,
    ``AG2``: :func:`handshake_item`, keys.envelope)."""
    items = channel_items(net, channel_id)
    head_sk = k.channel_head(net, channel_id)[1]
    head = next((i for i in items if i["SK"] == head_sk), None)
    hs = next((i for i in items if i["SK"] == _HANDSHAKE_SK), None)
    envs = sorted((i for i in items if i["SK"].startswith("ENV#")), key=lambda i: int(i["seq"]))
    return head, hs, envs
