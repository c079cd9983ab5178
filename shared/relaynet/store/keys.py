"""Key shapes of the one table: the only place that spells them (docs/architecture.md lists the
access patterns each serves).

| item | PK | SK |
|---|---|---|
| token | ``TOKEN#<sha256>`` | ``TOKEN`` |
| network name index | ``NETNAME#<name>`` | ``NETNAME`` |
| network / agent / group / resource / instance | ``NET#<net>`` | ``META`` / ``AGENT#<name>`` / ``GROUP#<slug>`` / ``RES#<key>`` / ``INST#<id>`` |
| representative | ``REP#<name>`` | ``META`` |
| thread and its messages | ``NET#<net>#THR#<thr>`` | ``META`` / ``MSG#<msg>`` |
| mailbox entry (undelivered) | ``NET#<net>#MBOX#A#<agent>`` or ``NET#<net>#MBOX#I#<inst>`` | ``MSG#<msg>`` |
| send record (Idempotency-Key of an ask / reply, 1 h) | ``NET#<net>#SEND#<sha256>`` | ``SEND`` |
| task and its artifacts | ``NET#<net>#TASK#<task>`` | ``META`` / ``ART#<art>`` |
| artifact without task | ``NET#<net>#ARTS`` | ``ART#<art>`` |
| claim by id (a reference to its tree item) and a task's claims | ``NET#<net>#CLAIMS`` | ``CLAIM#<clm>`` / ``TASK#<task>#HEAD``, ``TASK#<task>#CLM#<clm>`` |
| claim tree of one namespace (live and pending claims, high-water marks) | ``NET#<net>#CLAIMTREE#<scopeType>#<resourceId>`` | ``A#<anchor>//<instance>#<scope hash>`` / ``A#<anchor>//~HW`` |
| ended claims (released or expired, kept a day) | ``NET#<net>#CLAIMS#ENDED`` | ``CLAIM#<clm>`` |
| the deployment's cursor-signing key | ``CONFIG#CURSORS`` | ``KEY`` |

GSI1 (sparse, routing): ``GSI1PK = ROUTE#<n>`` (:func:`route_pk`, one of :data:`ROUTE_SHARDS`
shards by a stable hash of network and task), ``GSI1SK = <due ms, 13 digits>#<net>#<task>`` on
tasks that are ``pending`` (not parked) or ``offered``; a pending task nobody is eligible for is
*parked* under ``GSI1PK = WAIT#<net>#<wait key>``, ``GSI1SK = <parked ms>#<task>``, and its wait
group has a marker item (``NET#<net>#WAIT`` / ``<wait key>``) listed under ``GSI1PK = WAITING#<n>``
(:func:`waiting_pk`, sharded the same way by network and wait key). Tables written before the
shards (``ROUTE`` and ``WAITING``, :data:`LEGACY_ROUTING_PKS`) are still read by the sweep, and
every item it writes lands in its shard (docs/architecture.md, "Routing shards").
GSI2 (listings): ``GSI2PK = NET#<net>#TASKS``,
``GSI2SK = <task id>`` on every task (newest first by ULID).
GSI3 (mailbox view, keys and ``kind``/``createdAt``/``senderInstance`` only): every mailbox entry
of an agent and of each of its instances under ``GSI3PK = NET#<net>#MBOXV#<agent>``,
``GSI3SK = MSG#<msg>``, so one Query counts what an instance could fetch (``GET /v1/inbox/summary``).
GSI4 (tasks by last update): the tasks' own ``GSI2PK`` and ``updatedAt`` as its keys
(relaynet.store.table.INDEX_KEYS), newest update first for A2A's ListTasks.
"""

from __future__ import annotations

import hashlib

META = "META"

#: How many partitions GSI1's routing index is spread over (docs/architecture.md, "Routing
#: shards"): a partition takes at most 1,000 write units a second, so 16 shards lift the
#: deployment's routing writes to 16,000/s and keep the busiest shard near 1/16 of them; the sweep
#: pays one Query per shard per run. Fixed: items of a shard past a smaller count would never be
#: read again, so changing it needs a migration.
ROUTE_SHARDS = 16
ROUTE = "ROUTE"  # the routing partition before the shards (still swept: LEGACY_ROUTING_PKS)
WAITING = "WAITING"  # the wait-group marker partition before the shards


def shard(*parts: str) -> int:
    """The shard (0 .. ROUTE_SHARDS - 1) of the ids ``parts``: a stable hash (SHA-256, never
    Python's per-process ``hash``), so every writer and the sweep agree on it."""
    digest = hashlib.sha256("#".join(parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") % ROUTE_SHARDS


def route_pk(net_id: str, task_id: str) -> str:
    """GSI1PK of a routable (pending, not parked, or offered) task: ``ROUTE#<n>``."""
    return f"{ROUTE}#{shard(net_id, task_id)}"


def route_pks() -> list[str]:
    """Every routing shard's GSI1PK, in shard order."""
    return [f"{ROUTE}#{n}" for n in range(ROUTE_SHARDS)]


def waiting_pk(net_id: str, wait_key: str) -> str:
    """GSI1PK of a wait group's marker: ``WAITING#<n>``."""
    return f"{WAITING}#{shard(net_id, wait_key)}"


def waiting_pks() -> list[str]:
    """Every wait-marker shard's GSI1PK, in shard order."""
    return [f"{WAITING}#{n}" for n in range(ROUTE_SHARDS)]


#: Where tables written before the shards keep routable tasks (``ROUTE``) and wait-group markers
#: (``WAITING``): the sweep reads them too until they are empty (a Query of an empty partition
#: costs one read unit), and moves each item it writes into its shard.
LEGACY_ROUTING_PKS = (ROUTE, WAITING)


def token(token_hash: str) -> tuple[str, str]:
    return f"TOKEN#{token_hash}", "TOKEN"


def cursor_key() -> tuple[str, str]:
    """The deployment's secret for signing list cursors (relaynet.cursors), one per table."""
    return "CONFIG#CURSORS", "KEY"


def network_name(name: str) -> tuple[str, str]:
    return f"NETNAME#{name}", "NETNAME"


def net(net_id: str) -> str:
    return f"NET#{net_id}"


def network(net_id: str) -> tuple[str, str]:
    return net(net_id), META


def agent(net_id: str, name: str) -> tuple[str, str]:
    return net(net_id), f"AGENT#{name}"


def group(net_id: str, slug: str) -> tuple[str, str]:
    return net(net_id), f"GROUP#{slug}"


def resource(net_id: str, key: str) -> tuple[str, str]:
    return net(net_id), f"RES#{key}"


def instance(net_id: str, inst_id: str) -> tuple[str, str]:
    return net(net_id), f"INST#{inst_id}"


def representative(name: str) -> tuple[str, str]:
    return f"REP#{name}", META


def thread_pk(net_id: str, thr_id: str) -> str:
    return f"{net(net_id)}#THR#{thr_id}"


def thread(net_id: str, thr_id: str) -> tuple[str, str]:
    return thread_pk(net_id, thr_id), META


def thread_message(net_id: str, thr_id: str, msg_id: str) -> tuple[str, str]:
    return thread_pk(net_id, thr_id), f"MSG#{msg_id}"


def mailbox_pk(net_id: str, address: dict) -> str:
    """``{"agent": name}`` or ``{"instanceId": id}`` -> the mailbox partition."""
    if "instanceId" in address:
        return f"{net(net_id)}#MBOX#I#{address['instanceId']}"
    return f"{net(net_id)}#MBOX#A#{address['agent']}"


def public_address(mailbox: dict) -> dict:
    """The protocol's address (PROTOCOL.md 2) of a mailbox address: ``{"instanceId": id}`` for an
    instance's mailbox (whose address also carries its ``agent``, for the mailbox view) or
    ``{"agent": name}``; what ``recipients`` and error details show."""
    if "instanceId" in mailbox:
        return {"instanceId": mailbox["instanceId"]}
    return {"agent": mailbox["agent"]}


def mailbox_view(net_id: str, agent: str) -> str:
    """GSI3PK of every mailbox entry of ``agent`` and of its instances (the inbox summary)."""
    return f"{net(net_id)}#MBOXV#{agent}"


def send_record(net_id: str, digest: str) -> tuple[str, str]:
    """A send's durable record (relaynet.messaging), keyed by the hash of its Idempotency-Key."""
    return f"{net(net_id)}#SEND#{digest}", "SEND"


def task_pk(net_id: str, task_id: str) -> str:
    return f"{net(net_id)}#TASK#{task_id}"


def task(net_id: str, task_id: str) -> tuple[str, str]:
    return task_pk(net_id, task_id), META


def tasks_index(net_id: str) -> str:
    return f"{net(net_id)}#TASKS"


def route_sk(due_ms: int, net_id: str, task_id: str) -> str:
    return f"{due_ms:013d}#{net_id}#{task_id}"


def wait_pk(net_id: str, wait_key: str) -> str:
    """GSI1PK of the tasks parked in one wait group (same target, same creator exclusions)."""
    return f"WAIT#{net_id}#{wait_key}"


def wait_sk(parked_ms: int, task_id: str) -> str:
    return f"{parked_ms:013d}#{task_id}"


def wait_marker(net_id: str, wait_key: str) -> tuple[str, str]:
    """The marker item of a wait group (GSI1PK :func:`waiting_pk`, GSI1SK :func:`waiting_sk`)."""
    return f"{net(net_id)}#WAIT", wait_key


def waiting_sk(net_id: str, wait_key: str) -> str:
    return f"{net_id}#{wait_key}"


def artifact(net_id: str, art_id: str, task_id: str | None) -> tuple[str, str]:
    pk = task_pk(net_id, task_id) if task_id else f"{net(net_id)}#ARTS"
    return pk, f"ART#{art_id}"


def claims_pk(net_id: str) -> str:
    return f"{net(net_id)}#CLAIMS"


def claims_head(net_id: str) -> tuple[str, str]:
    """The network-wide fencing counter of the layout before issue 25 (read only to migrate)."""
    return claims_pk(net_id), "HEAD"


def claim_tree_pk(net_id: str, scope_type: str, resource_id: str | None) -> str:
    """The claim tree of one namespace (PROTOCOL.md 4.9: claims conflict only within one
    ``scopeType`` and ``resourceId``); relaynet.store.claims lays out its sort keys."""
    return f"{net(net_id)}#CLAIMTREE#{scope_type}#{resource_id or ''}"


def task_claims(net_id: str, task_id: str) -> tuple[str, str]:
    """(partition, sort-key prefix) of a task's claim index: its ``HEAD`` counter and an entry
    per claim that carried the task."""
    return claims_pk(net_id), f"TASK#{task_id}#"


def claim(net_id: str, claim_id: str) -> tuple[str, str]:
    return claims_pk(net_id), f"CLAIM#{claim_id}"


# Channels (PROTOCOL.md 5): the head holds the folded adapter state and the sequence; envelopes
# sort by seq; a membership item per participant lists an agent's channels. GSI1 ``CHANNELS``
# holds active channels by their next deadline (TTL or the consulting reply window).
CHANNEL_TIMERS = "CHANNELS"


def channel_pk(net_id: str, ch_id: str) -> str:
    return f"{net(net_id)}#CH#{ch_id}"


def channel_head(net_id: str, ch_id: str) -> tuple[str, str]:
    return channel_pk(net_id, ch_id), "HEAD"


def envelope(net_id: str, ch_id: str, seq: int) -> tuple[str, str]:
    return channel_pk(net_id, ch_id), f"ENV#{seq:010d}"


def membership(net_id: str, agent: str, ch_id: str) -> tuple[str, str]:
    return f"{net(net_id)}#AGCH#{agent}", f"CH#{ch_id}"


def memberships_pk(net_id: str, agent: str) -> str:
    return f"{net(net_id)}#AGCH#{agent}"


def timer_sk(due_ms: int, net_id: str, ch_id: str) -> str:
    return f"{due_ms:013d}#{net_id}#{ch_id}"


def agent_stats(net_id: str, agent: str) -> tuple[str, str]:
    """Observed counters of an agent (``tasks_total``, ``tasks_completed``, ``tasks_failed``,
    ``consults_answered``, ``consults_expired``), kept apart from the operator-set definition."""
    return net(net_id), f"STATS#{agent}"


def artifacts_index(net_id: str) -> str:
    """GSI2 partition listing every artifact of a network (newest last by ULID)."""
    return f"{net(net_id)}#ARTS"


def ended_claim(net_id: str, claim_id: str) -> tuple[str, str]:
    """Where a claim goes once released or expired: out of the hot claims partition."""
    return f"{claims_pk(net_id)}#ENDED", f"CLAIM#{claim_id}"


def events_pk(net_id: str) -> str:
    """The network's event stream (control_get_history), sorted by event ULID."""
    return f"{net(net_id)}#EVENTS"


def event(net_id: str, evt_id: str) -> tuple[str, str]:
    return events_pk(net_id), f"EVT#{evt_id}"


def events_network(pk: str) -> str | None:
    """The network whose history partition ``pk`` is (:func:`events_pk`), or None."""
    if not pk.startswith("NET#") or not pk.endswith("#EVENTS"):
        return None
    return pk.removeprefix("NET#").removesuffix("#EVENTS")


def confirmation(rep: str, confirmation_id: str) -> tuple[str, str]:
    """A pending two-step operation of a representative (valid 5 minutes)."""
    return f"REP#{rep}", f"CONFIRM#{confirmation_id}"


def conversation(rep: str, conversation_id: str) -> str:
    """The representative's conversation with its owner (control_channel_send/history)."""
    return f"REP#{rep}#CONV#{conversation_id}"


def channels_index(net_id: str) -> str:
    """GSI2 partition listing every channel head of a network."""
    return f"{net(net_id)}#CHANNELS"


# Webhook deliveries (relaynet.push): a delivery that failed and waits for a retry, per
# instance; GSI1 ``PUSHRETRY`` lists the retrying ones by when they are due.
PUSH_RETRY = "PUSHRETRY"


def push_delivery(net_id: str, inst_id: str, delivery_id: str) -> tuple[str, str]:
    return f"{net(net_id)}#PUSH#{inst_id}", f"DLV#{delivery_id}"


def push_due_sk(due_ms: int, net_id: str, inst_id: str, delivery_id: str) -> str:
    return f"{due_ms:013d}#{net_id}#{inst_id}#{delivery_id}"


def parse_mailbox_pk(pk: str) -> tuple[str, dict[str, str]] | None:
    """``(net_id, {"agent": a} | {"instanceId": i})`` of a mailbox partition key, else None."""
    if not pk.startswith("NET#") or "#MBOX#" not in pk:
        return None
    head, _, tail = pk.partition("#MBOX#")
    kind, _, ident = tail.partition("#")
    if kind == "A" and ident:
        return head.removeprefix("NET#"), {"agent": ident}
    if kind == "I" and ident:
        return head.removeprefix("NET#"), {"instanceId": ident}
    return None
