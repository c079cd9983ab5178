"""The directory repository: reads and writes of one network's partition (``NET#<net>``: the
network, agents, groups, resources, instances, stats) and of representatives (``REP#<name>``).

relaynet.directory folds these items into a :class:`relaynet.directory.Directory` and decides
what they mean (availability, candidates); this module only knows where they are.
"""

from __future__ import annotations

from typing import Any, Iterable

from relaynet.store import identity as identity_store
from relaynet.store import keys as k
from relaynet.store import table as t



def _rarely_changing(pk: str, sk: str) -> dict[str, Any] | None:
    """An item that rarely changes: eventually consistent, confirmed strongly before saying "absent"."""
    return t.get(pk, sk, consistent=False) or t.get(pk, sk)


def partition(net: str) -> list[dict[str, Any]]:
    """Every item of the network's directory partition (one strongly consistent Query, paged)."""
    return t.query(k.net(net))


#: The network item's ``pushState``: ``"some"`` once any push config was written in the network
#: (never cleared: it only means "look"), ``"none"`` once a look found none before any was
#: written; absent on networks no notification has looked at yet (tables from before).
PUSH_STATE = "pushState"


def has_push_config(net: str) -> bool:
    """Whether any agent definition or instance of the network has a push config (docs/protocol.md
    10.3). One strongly consistent GetItem of the network item: ``pushState = "none"`` answers
    False, so a network that never had a webhook costs the notifier one small read, not its
    directory. Otherwise the partition is Queried, filtered on ``attribute_exists(push)`` (paged
    like :func:`partition`); an unmarked network found without any is marked ``"none"`` on the
    condition that nobody marked it meanwhile (:func:`mark_push_configured` marks before it
    writes a config, so a config is never hidden by a mark)."""
    meta = t.get(*k.network(net))
    state = (meta or {}).get(PUSH_STATE)
    if state == "none":
        return False
    found = bool(t.query(k.net(net), filter_expr="attribute_exists(#push)", filter_names={"#push": "push"}))
    if state is None and meta is not None and not found:
        t.update(*k.network(net), "SET #s = :s", condition="attribute_exists(PK) AND attribute_not_exists(#s)",
                 names={"#s": PUSH_STATE}, s="none")
    return found


def mark_push_configured(net: str) -> None:
    """Before a push config is written in ``net`` (an instance's ``PUT /v1/push``, a spec's agent
    with ``push``): ``pushState = "some"`` on the network item, which must exist (an UpdateItem;
    nothing is written when it does not)."""
    t.update(*k.network(net), "SET #s = :s", condition="attribute_exists(PK)", names={"#s": PUSH_STATE}, s="some")


def kind_of(item: dict[str, Any]) -> tuple[str, str]:
    """``(kind, name)`` of a directory item: ``("META", "")``, ``("AGENT", name)``, ``("GROUP",
    slug)``, ``("RES", key)``, ``("INST", id)``, ``("STATS", agent)``."""
    sk = item["SK"]
    if sk == k.META:
        return "META", ""
    kind, _, rest = sk.partition("#")
    return kind, rest


def instance(net: str, instance_id: str, *, settled: bool = True) -> dict[str, Any] | None:
    """The instance item, or None. ``settled``: strongly consistent; else eventually consistent,
    confirmed strongly before answering None (for callers that need only its agent)."""
    return t.get(*k.instance(net, instance_id)) if settled else _rarely_changing(*k.instance(net, instance_id))


agent = identity_store.agent  # the agent definition, or None (strongly consistent): one read, written once


def group(net: str, slug: str) -> dict[str, Any] | None:
    """The group item (``members``), or None (strongly consistent)."""
    return t.get(*k.group(net, slug))


def agent_or_group(net: str, name: str) -> tuple[str, dict[str, Any]] | None:
    """``("agent", definition)`` or ``("group", group)`` for an address name, or None: one
    eventually consistent BatchGetItem, repeated strongly before answering None."""
    keys = [k.agent(net, name), k.group(net, name)]
    got = t.batch_get(keys, consistent=False) or t.batch_get(keys)
    if keys[0] in got:
        return "agent", got[keys[0]]
    if keys[1] in got:
        return "group", got[keys[1]]
    return None


def network_id(name: str) -> str | None:
    """The id of the network named ``name`` (its name item: eventually consistent, confirmed
    strongly before saying "absent"), or None."""
    item = _rarely_changing(*k.network_name(name))
    return item["networkId"] if item else None


def networks(net_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{network id: network META}`` of the networks that exist (one BatchGetItem per 100)."""
    ids = list(net_ids)
    got = t.batch_get([k.network(n) for n in ids]) if ids else {}
    return {n: got[k.network(n)] for n in ids if k.network(n) in got}


def representative(name: str) -> dict[str, Any] | None:
    """The representative's item (``grants`` by network id, ``grantOrder``, ``activeNetwork``)."""
    return t.get(*k.representative(name))


def representative_with_networks(name: str, net_ids: Iterable[str]) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """(the representative's item or None, ``{network id: network META}`` of ``net_ids`` that
    exist), in one BatchGetItem (up to 99 networks; more take one more per 100)."""
    ids = list(net_ids)
    rep_key = k.representative(name)
    got = t.batch_get([rep_key, *(k.network(n) for n in ids)])
    return got.get(rep_key), {n: got[k.network(n)] for n in ids if k.network(n) in got}


def set_active_network(rep: str, net: str) -> None:
    """Record the representative's active network (control_use_network)."""
    t.update(*k.representative(rep), "SET activeNetwork = :n", n=net)


# --------------------------------------------------------------------------- two-step operations

def put_confirmation(rep: str, confirmation_id: str, action: str, net: str, instance_id: str, expires_ms: int) -> None:
    """Store a pending two-step operation of a representative (``ttl`` an hour after it expires)."""
    pk, sk = k.confirmation(rep, confirmation_id)
    t.put({"PK": pk, "SK": sk, "action": action, "networkId": net, "instanceId": instance_id,
           "expiresAt": expires_ms, "ttl": expires_ms // 1000 + 3600})


def consume_confirmation(rep: str, confirmation_id: str, action: str, net: str, instance_id: str, now_ms: int) -> bool:
    """Delete the confirmation if it is for this action, network and instance and not expired
    (one conditional DeleteItem). False when it is unknown, expired, used or for something else."""
    pk, sk = k.confirmation(rep, confirmation_id)
    return t.delete_if(pk, sk, "#a = :a AND networkId = :n AND instanceId = :i AND expiresAt > :now",
                       names={"#a": "action"}, a=action, n=net, i=instance_id, now=now_ms)


def consume_confirmation_action(rep: str, confirmation_id: str, action: str, net: str, instance_id: str,
                                now_ms: int) -> dict[str, Any]:
    """The same as :func:`consume_confirmation`, as a Delete for the operation's own transaction
    (its failure cancels the operation: ``ConditionalCheckFailed`` at this action's index)."""
    pk, sk = k.confirmation(rep, confirmation_id)
    return t.tx_delete(pk, sk, "attribute_exists(PK) AND #a = :a AND networkId = :n AND instanceId = :i "
                       "AND expiresAt > :now", names={"#a": "action"}, a=action, n=net, i=instance_id, now=now_ms)


# --------------------------------------------------------------------------- instance lifecycle

def stop_instance_action(net: str, instance_id: str, now_ms: int, seen_active: list[str] | None = None
                         ) -> dict[str, Any]:
    """The Update marking an instance ``stopped`` (``stoppedAt`` now) and dropping its run state
    (``supervisor``: its token is revoked in the same transaction, so no supervisor can report
    on it any more; relaynet.supervision).

    With ``seen_active`` (the ``active`` set as read), those task ids also leave ``active`` and
    ``held``, on condition that ``active`` is still exactly that set (its size and each member:
    an offer or accept that landed since the read cancels the transaction, so no task is left
    offered to a stopped instance)."""
    stop = "SET #st = :stopped, stoppedAt = :now REMOVE supervisor, supervisorLastRun"
    if seen_active is None:
        return t.tx_update(*k.instance(net, instance_id), stop, names={"#st": "status"}, stopped="stopped", now=now_ms)
    vals: dict[str, Any] = {"stopped": "stopped", "now": now_ms}
    if not seen_active:
        return t.tx_update(*k.instance(net, instance_id), stop,
                           "attribute_exists(PK) AND attribute_not_exists(active)", names={"#st": "status"}, **vals)
    members = {f"t{i}": task_id for i, task_id in enumerate(seen_active)}
    cond = " AND ".join(["attribute_exists(PK)", "size(active) = :n",
                         *(f"contains(active, :{name})" for name in members)])
    return t.tx_update(*k.instance(net, instance_id),
                       f"{stop} DELETE active :tids, held :tids", cond,
                       names={"#st": "status"}, tids=set(seen_active), n=len(seen_active), **members, **vals)


def revoke_token_action(token_hash: str) -> dict[str, Any]:
    """The Update revoking a token (the authorizer then answers it as unknown: 401)."""
    return t.tx_update(*k.token(token_hash), "SET revoked = :yes", yes=True)


def restart_instance_action(net: str, instance_id: str, old_hash: str, new_hash: str, now_ms: int) -> dict[str, Any]:
    """The Update making a stopped (or live) instance ``available`` again under a new token hash,
    its declared capabilities and run state (``supervisor``: a supervisor holding the old token
    can no longer report) cleared; conditional on the token hash still being ``old_hash``."""
    return t.tx_update(*k.instance(net, instance_id),
                       "SET #st = :available, tokenHash = :h, lastSeenAt = :now, capabilities = :none "
                       "REMOVE stoppedAt, supervisor, supervisorLastRun",
                       "tokenHash = :old", names={"#st": "status"}, available="available", h=new_hash, now=now_ms,
                       none=[], old=old_hash)


def put_new_action(item: dict[str, Any]) -> dict[str, Any]:
    """The Put of a new item (``attribute_not_exists``), e.g. a token item from relaynet.identity."""
    return t.tx_put(item, "attribute_not_exists(PK)")


def add_to_stats_action(net: str, agent: str, increments: dict[str, int]) -> dict[str, Any]:
    """The Update adding ``increments`` (counter name -> amount) to an agent's observed counters
    (``NET#<net>`` / ``STATS#<agent>``, kept apart from the operator-set definition)."""
    expr = "ADD " + ", ".join(f"{name} :{name}" for name in increments)
    return t.tx_update(*k.agent_stats(net, agent), expr, **increments)


def own_view(net: str, instance_id: str, agent_name: str) -> tuple[dict | None, dict | None, dict | None]:
    """(instance, agent definition, network META) of a caller (network_whoami): one BatchGetItem."""
    keys = [k.instance(net, instance_id), k.agent(net, agent_name), k.network(net)]
    got = t.batch_get(keys)
    return got.get(keys[0]), got.get(keys[1]), got.get(keys[2])


def set_capabilities(net: str, instance_id: str, capabilities: list[dict[str, Any]]) -> bool:
    """Replace an instance's declared capabilities; False when the instance no longer exists."""
    return bool(t.update(*k.instance(net, instance_id), "SET capabilities = :caps",
                         condition="attribute_exists(PK)", caps=capabilities))



def address_names(net: str) -> list[str]:
    """Every agent name and group slug of the network, sorted (one Query of the partition): what
    an unknown address name's 404 lists."""
    return sorted(name for kind, name in map(kind_of, partition(net)) if kind in ("AGENT", "GROUP"))
