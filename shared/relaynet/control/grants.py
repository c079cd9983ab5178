"""Grants and scope of the control tools (PROTOCOL.md 6), and the tools about them (whoami,
list_networks, use_network).

A representative is a principal of the whole deployment (``REP#<name>``) with grants per
network: ``observe`` < ``communicate`` < ``delegate`` < ``operate``, each including the ones
before it. Every tool acts in one network: ``networkId`` if given, else the active network
(``control_use_network``; the first granted network by default). No grant at all on a network is
404 (it does not exist for this caller); too low a grant is 403.
"""

from __future__ import annotations

from typing import Any, Callable

from relaynet import cache, cursors
from relaynet.config import settings
from relaynet.errors import NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.store import claims as claim_store
from relaynet.store import directory as dir_store
from relaynet.store import mailboxes as mail_store
from relaynet.store import tasks as task_store

LEVELS = ("observe", "communicate", "delegate", "operate")


def _cache_key(principal: Principal) -> tuple[str, str]:
    return settings().table_name, principal.rep


def representative(principal: Principal, fresh: bool = True) -> dict[str, Any]:
    """The representative's item (``grants``, ``grantOrder``, ``activeNetwork``); NotFound if it
    was deleted since the token was issued.

    ``fresh=False`` may answer a copy this container read at most ``RELAYNET_CACHE_SECONDS`` ago
    (relaynet.cache.representatives; no request): for the grants of a call that names its
    network. A call acting in the active network reads it fresh, since ``control_use_network``
    runs in another function's container and the very next call must see its effect.
    """
    if fresh:
        rep = dir_store.representative(principal.rep)
        if rep is not None:
            cache.representatives.put(_cache_key(principal), rep)
    else:
        rep = cache.representatives.get(_cache_key(principal), lambda: dir_store.representative(principal.rep))
    if rep is None:
        raise NotFound(f"representative {principal.rep!r} no longer exists")
    return rep


def granted_order(rep: dict[str, Any]) -> list[str]:
    """The networks the representative holds a grant on: ``grantOrder`` first, then the rest by id."""
    grants = rep.get("grants") or {}
    order = [n for n in rep.get("grantOrder") or [] if n in grants]
    return order + sorted(n for n in grants if n not in order)


def scope(principal: Principal, network_id: str | None, needed: str | None,
          exists: Callable[[str], Any] | None = None, *, call_checks: bool = False
          ) -> tuple[dict[str, Any], Principal]:
    """(the representative item, a principal bound to the network the call acts in).

    Checks in the protocol's order (PROTOCOL.md 2: existence before permission): the network
    (NotFound: no grant at all on it, or none on any), then ``exists(network id)`` when given (it
    raises NotFound for a named object that is not in the network), then the grant (PermissionDenied
    below ``needed``; PROTOCOL.md 6).

    ``call_checks=True`` says the domain call made with the returned principal raises NotFound
    itself for every object ``exists`` checks (before it writes anything). Then ``exists`` runs
    only when the grant is too low, so that call still answers 404 before 403, and a call with the
    grant reads each named object once, in the domain (issue 16: each of these reads was made
    twice; docs/architecture.md "Access patterns").
    """
    rep = representative(principal, fresh=network_id is None)
    grants = rep.get("grants") or {}
    net = network_id or rep.get("activeNetwork") or next(iter(granted_order(rep)), None)
    if net is None or net not in grants:
        raise NotFound(f"no network {network_id!r} for this representative" if network_id else "no granted network")
    denied = bool(needed) and LEVELS.index(grants[net]) < LEVELS.index(needed)
    if exists is not None and (denied or not call_checks):
        exists(net)
    if denied:
        raise PermissionDenied(f"this needs the {needed!r} grant on {net}; you have {grants[net]!r}")
    return rep, Principal("representative", network_id=net, rep=principal.rep)


def objects(task_id: str | None = None, thread_id: str | None = None, instance_id: str | None = None,
            name: str | None = None, agent: str | None = None, claim_id: str | None = None) -> Callable[[str], None]:
    """An ``exists`` check for :func:`scope`: NotFound for the first named object missing from the
    network (``name``: an agent or group; ``agent``: an agent definition; a claim live or ended).
    One read per named object (GetItem; a claim: up to two)."""
    def check(net: str) -> None:
        if instance_id and dir_store.instance(net, instance_id) is None:
            raise NotFound(f"no instance {instance_id!r} in this network")
        if name and dir_store.agent(net, name) is None and dir_store.group(net, name) is None:
            raise NotFound(f"no agent or group named {name!r}")
        if agent and dir_store.agent(net, agent) is None:
            raise NotFound(f"no agent named {agent!r} in this network")
        if thread_id and mail_store.get_thread(net, thread_id) is None:
            raise NotFound(f"no thread {thread_id!r} in this network")
        if task_id and task_store.get(net, task_id) is None:
            raise NotFound(f"no task {task_id!r} in this network")
        if claim_id and not claim_store.exists(net, claim_id):
            raise NotFound(f"no claim {claim_id!r} in this network")
    return check


def worker_request(model, req, **extra):
    """The worker-surface request a control request stands for (same argument names, no ``networkId``)."""
    fields = req.model_dump(exclude={"networkId"}, exclude_none=True)
    return model.model_validate({**fields, **extra})


def _views(rep: dict[str, Any], nets: list[str], metas: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    metas = dict(metas or {})
    missing = [n for n in nets if n not in metas]
    if missing:
        metas.update(dir_store.networks(missing))
    return [{"networkId": n, "name": (metas.get(n) or {}).get("name"), "grant": rep["grants"][n]} for n in nets]


def whoami(principal: Principal) -> dict[str, Any]:
    """control_whoami: ``{representative: {id, name}, grants, activeNetwork}``.

    One BatchGetItem when this container read the representative within the cache bound: the
    representative (fresh, for ``activeNetwork``) with the names of its cached grants' networks;
    a grant added since costs one more request for the new names.
    """
    known = cache.representatives.peek(_cache_key(principal))
    if known is None:
        rep = representative(principal)
        nets = _views(rep, granted_order(rep))
    else:
        rep, metas = dir_store.representative_with_networks(principal.rep, granted_order(known))
        if rep is None:
            raise NotFound(f"representative {principal.rep!r} no longer exists")
        cache.representatives.put(_cache_key(principal), rep)
        nets = _views(rep, granted_order(rep), metas)
    active = rep.get("activeNetwork") or (nets[0]["networkId"] if nets else None)
    return {"representative": {"id": rep["id"], "name": rep["name"]}, "grants": nets, "activeNetwork": active}


def list_networks(principal: Principal, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    """control_list_networks: ``{networks: [{networkId, name, grant}], nextCursor}``, the networks
    the representative holds a grant on, by network id (creation order), paged by id
    (PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    listing = cursors.Listing("control_list_networks", principal)
    after = listing.position(cursor)
    rep = representative(principal, fresh=False)  # grants only (relaynet.cache bound)
    chunk, last = cursors.page_sorted(sorted(rep.get("grants") or {}), lambda net: net, after, limit)
    return {"networks": _views(rep, chunk), "nextCursor": listing.next_cursor(last)}


def use_network(principal: Principal, network_id: str) -> dict[str, Any]:
    """control_use_network: sets and returns ``activeNetwork``."""
    rep, bound = scope(principal, network_id, "observe")
    dir_store.set_active_network(rep["name"], bound.network_id)
    cache.representatives.drop(lambda key: key[1] == rep["name"])
    return {"activeNetwork": bound.network_id}
