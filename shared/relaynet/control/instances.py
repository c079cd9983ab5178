"""The control tools on instances (PROTOCOL.md 6, grant ``operate``): launch_agent, and the
two-step stop_agent and restart_agent (the first call returns a confirmation valid 5 minutes, the
second, with its id, acts; the confirmation is consumed in the operation's own transaction).

Request floors (docs/architecture.md "Access patterns"): a stop's second step reads the
representative, the instance, the claims partition and the instance's tasks (one BatchGetItem)
and makes one TransactWriteItems; a restart's reads the representative and the instance and
makes one TransactWriteItems.
"""

from __future__ import annotations

import secrets
from typing import Any

from relaynet import claims, clock, events, tasks
from relaynet.control.grants import scope
from relaynet.errors import Conflict, InvalidArgument, NotFound
from relaynet.identity import INSTANCE_PREFIX, Principal, hash_token, launch_instance, mint_token, token_item
from relaynet.store import directory as dir_store
from relaynet.store import unit_of_work as uow

CONFIRMATION_TTL_S = 300
STOP_ATTEMPTS = 3  # single-transaction attempts of a stop before it goes object by object
_STOP_REASON = "instance stopped"


def _confirm(rep: dict[str, Any], action: str, net: str, instance_id: str) -> dict[str, Any]:
    """Step one: ``{confirmationId, expiresAt, action, instanceId}``."""
    conf_id = "conf_" + secrets.token_urlsafe(16)
    expires = clock.now_ms() + CONFIRMATION_TTL_S * 1000
    dir_store.put_confirmation(rep["name"], conf_id, action, net, instance_id, expires)
    return {"confirmationId": conf_id, "expiresAt": clock.iso(expires), "action": action, "instanceId": instance_id}


def _bad_confirmation() -> InvalidArgument:
    return InvalidArgument.field("confirmationId", "unknown, expired, already used, or for another operation")


def _operated(principal: Principal, network_id: str | None, instance_id: str) -> tuple[dict, Principal, dict]:
    """(representative, bound principal, the instance item): the scope check with the instance read
    once (NotFound before PermissionDenied, PROTOCOL.md 2)."""
    seen: dict[str, dict[str, Any]] = {}

    def exists(net: str) -> None:
        inst = dir_store.instance(net, instance_id)
        if inst is None:
            raise NotFound(f"no instance {instance_id!r} in this network")
        seen["inst"] = inst

    rep, p = scope(principal, network_id, "operate", exists)
    return rep, p, seen["inst"]


def _run(actions: list[dict[str, Any]]) -> bool:
    """One transaction whose first action consumes the confirmation: a failed condition there is
    400 ``confirmationId``. False (nothing written, the confirmation still unused) when another
    action's condition failed or the transaction met another one."""
    done = uow.commit(actions)
    if not done and done.refused_at(0):
        raise _bad_confirmation()
    return bool(done)


def _run_once(actions: list[dict[str, Any]]) -> None:
    """:func:`_run`, and a lost race is Conflict ``in_progress`` (409, ``Retry-After``): the
    instance changed meanwhile, and the same ``confirmationId`` may be sent again."""
    if not _run(actions):
        raise Conflict("in_progress", "the instance changed meanwhile; retry", headers={"Retry-After": "1"})


def stop_agent(principal: Principal, network_id: str | None, instance_id: str,
               confirmation_id: str | None) -> dict[str, Any]:
    """control_stop_agent, two steps. Step two revokes the token, marks the instance stopped,
    releases its claims and returns every non-terminal task offered or assigned to it to pending,
    all in one transaction: ``{instanceId, status: "stopped", releasedClaims, requeuedTasks}``.

    Raises NotFound (unknown instance), PermissionDenied (below ``operate``), InvalidArgument
    (``confirmationId`` unknown, expired, used, or for another operation; nothing changes). When
    the work does not fit in one transaction (100 actions: about 30 claims and tasks), or keeps
    losing races, the instance is stopped first and the rest is released and requeued object by
    object, as each write's own conditions allow.
    """
    rep, p, inst = _operated(principal, network_id, instance_id)
    net = p.network_id
    if confirmation_id is None:
        return _confirm(rep, "stop", net, instance_id)
    for _ in uow.attempts(STOP_ATTEMPTS):
        now = clock.now_ms()
        seen = sorted(inst.get("active") or ())
        released, claim_actions = claims.holder_release_actions(net, instance_id, now)
        requeued, task_actions = tasks.requeue_actions(net, instance_id, seen, _STOP_REASON, now)
        actions = [*_stop_actions(rep, net, inst, confirmation_id, now, seen), *claim_actions, *task_actions]
        if not uow.fits(actions):
            break
        if not _run(actions):  # a claim renewed, a task moved or an offer landed: read again
            inst = dir_store.instance(net, instance_id) or inst
            continue
        return {"instanceId": instance_id, "status": "stopped", "releasedClaims": released, "requeuedTasks": requeued}
    _run_once(_stop_actions(rep, net, inst, confirmation_id, clock.now_ms(), None))
    released = claims.release_for_holder(net, instance_id)
    requeued = tasks.return_to_pending(net, instance_id, _STOP_REASON)
    return {"instanceId": instance_id, "status": "stopped", "releasedClaims": released, "requeuedTasks": requeued}


def _stop_actions(rep: dict[str, Any], net: str, inst: dict[str, Any], confirmation_id: str, now: int,
                  seen_active: list[str] | None) -> list[dict[str, Any]]:
    """Consume the confirmation (first), stop the instance, revoke its token, record the event."""
    instance_id = inst["id"]
    return [
        dir_store.consume_confirmation_action(rep["name"], confirmation_id, "stop", net, instance_id, now),
        dir_store.stop_instance_action(net, instance_id, now, seen_active),
        dir_store.revoke_token_action(inst["tokenHash"]),
        events.event_action(net, "instance", {"representative": rep["name"]},
                            f"instance {instance_id} of {inst['agent']} stopped", instanceId=instance_id,
                            state="stopped"),
    ]


def restart_agent(principal: Principal, network_id: str | None, instance_id: str,
                  confirmation_id: str | None) -> dict[str, Any]:
    """control_restart_agent, two steps. Step two rotates the token (the old one is 401 at once),
    clears ``stopped`` and the instance's declared capabilities, in one transaction that also
    consumes the confirmation; returns ``{instanceId, token}``. Errors as :func:`stop_agent`."""
    rep, p, inst = _operated(principal, network_id, instance_id)
    net = p.network_id
    if confirmation_id is None:
        return _confirm(rep, "restart", net, instance_id)
    token = mint_token(INSTANCE_PREFIX)
    now = clock.now_ms()
    _run_once([
        dir_store.consume_confirmation_action(rep["name"], confirmation_id, "restart", net, instance_id, now),
        dir_store.restart_instance_action(net, instance_id, inst["tokenHash"], hash_token(token), now),
        dir_store.revoke_token_action(inst["tokenHash"]),
        dir_store.put_new_action(token_item(token, Principal("instance", net, instance_id, inst["agent"]))),
        events.event_action(net, "instance", p.actor, f"instance {instance_id} of {inst['agent']} restarted",
                            instanceId=instance_id, state="available"),
    ])
    return {"instanceId": instance_id, "token": token}


def launch_agent(principal: Principal, network_id: str | None, agent: str) -> dict[str, Any]:
    """control_launch_agent: a new instance; ``{instanceId, token}`` (the token is shown once).
    NotFound for an agent the network does not define."""
    def exists(net: str) -> None:
        if dir_store.agent(net, agent) is None:
            raise NotFound(f"no agent named {agent!r} in this network")

    _, p = scope(principal, network_id, "operate", exists)
    return launch_instance(p.network_id, agent)
