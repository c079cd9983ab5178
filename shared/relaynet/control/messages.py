"""The control tools on messages (PROTOCOL.md 6): get_thread (``observe``), ask and reply
(``communicate``), wake_agent (``operate``), each through relaynet.messaging."""

from __future__ import annotations

from typing import Any

from relaynet import messaging
from relaynet.control.grants import objects, scope, worker_request
from relaynet.errors import InvalidArgument, NotFound
from relaynet.identity import Principal
from relaynet.models.worker import AskRequest, ReplyRequest
from relaynet.resources import normalise as normalise_resource
from relaynet.store import directory as dir_store
from relaynet.store import mailboxes as mail_store

_MESSAGE_FIELDS = ("id", "threadId", "kind", "from", "to", "subject", "body", "taskId", "resource", "createdAt")


def get_thread(principal: Principal, network_id: str | None, thread_id: str) -> dict[str, Any]:
    """control_get_thread: ``{thread: {id, subject, participants, taskId, resource, createdAt}, messages}``."""
    _, p = scope(principal, network_id, "observe")
    meta, messages = mail_store.thread_and_messages(p.network_id, thread_id)
    if meta is None:
        raise NotFound(f"no thread {thread_id!r} in this network")
    thread = {"id": meta.id, "subject": meta.subject, "taskId": meta.taskId, "resource": meta.resource,
              "createdAt": meta.createdAt, "participants": sorted(meta.participants)}
    return {"thread": thread,
            "messages": [{f: m[f] for f in _MESSAGE_FIELDS if m.get(f) is not None} for m in messages]}


def ask(principal: Principal, req) -> dict[str, Any]:
    """control_ask: as network_ask, sent by the representative (needs communicate)."""
    if req.resource:
        normalise_resource(req.resource)  # a bad resource is 400 before 404 and 403 (PROTOCOL.md 2)
    to = {} if req.toInstance else {"name": req.toAgent}
    _, p = scope(principal, req.networkId, "communicate",
                 objects(instance_id=req.toInstance, thread_id=req.threadId, task_id=req.taskId, **to),
                 call_checks=True)
    return messaging.ask(p, worker_request(AskRequest, req))


def reply(principal: Principal, req) -> dict[str, Any]:
    """control_reply: a reply in a thread, as the representative (needs communicate). A
    representative may write in any thread of a network it can communicate with."""
    _, p = scope(principal, req.networkId, "communicate", objects(thread_id=req.threadId), call_checks=True)
    return messaging.reply(p, worker_request(ReplyRequest, req))


def wake(principal: Principal, req) -> dict[str, Any]:
    """control_wake_agent: a ``notice`` (reason default ``explicit``) in the agent's or instance's
    mailbox; ``toInstance`` wins over ``toAgent``, one of them is required. Returns
    ``{messageId, threadId, to}``. The notice's mailbox entry also fires the instance's (or, for
    an agent, every instance's) push endpoint with a ``wake`` event (relaynet.push)."""
    if not (req.toInstance or req.toAgent):  # 400 before 404 and 403 (PROTOCOL.md 2)
        raise InvalidArgument("toAgent or toInstance is required", [{"field": "toAgent", "message": "required"},
                                                                   {"field": "toInstance", "message": "required"}])
    to = {} if req.toInstance else {"agent": req.toAgent}
    _, p = scope(principal, req.networkId, "operate", objects(instance_id=req.toInstance, **to),
                 call_checks=True)
    net = p.network_id
    if req.toInstance:
        inst = dir_store.instance(net, req.toInstance)
        if inst is None:
            raise NotFound(f"no instance {req.toInstance!r} in this network")
        box = {"instanceId": req.toInstance, "agent": inst["agent"]}
    else:
        if dir_store.agent(net, req.toAgent) is None:
            raise NotFound(f"no agent named {req.toAgent!r} in this network")
        box = {"agent": req.toAgent}
    reason = req.reason or "explicit"
    return messaging.wake_notice(p, box, f"Wake up ({reason}): check network_inbox and your tasks.", reason)
