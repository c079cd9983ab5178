"""The plugin surface's action tools (PROTOCOL.md 5.5 to 5.8) and channel-level tools (5.2, 5.3):
argument checks per action, then one call into the domain module that owns the object.

Each tool imports its domain module itself (its handler file does so at init), so a Lambda loads
only its own tool's modules."""

from __future__ import annotations

import time
from typing import Any

from relaynet.config import settings
from relaynet.errors import InvalidArgument
from relaynet.identity import Principal
from relaynet.models import plugin as m
from relaynet.taskstate import TERMINAL

WAIT_POLL_SECONDS = 0.5


def say(principal: Principal, req: m.SayRequest) -> dict[str, Any]:
    """say: ``{envelope_id, seq, channel_state}``."""
    from relaynet import channels
    from relaynet.adapters import Send

    out = channels.send(principal, req.channel_id, Send(sender=principal.agent, tool="say"), req.content, req.audience)
    return {key: out[key] for key in ("envelope_id", "seq", "channel_state")}


def handoff(principal: Principal, req: m.HandoffRequest) -> dict[str, Any]:
    """handoff: ``{envelope_id, seq, next_speaker, channel_state}``; ``reason`` needs ``finish``."""
    from relaynet import channels
    from relaynet.adapters import Send

    if req.reason is not None and req.finish is None:
        raise InvalidArgument.field("reason", "only meaningful with finish")
    attempt = Send(sender=principal.agent, tool="handoff", target=req.target, finish=req.finish, reason=req.reason,
                   context=req.context or {}, routing_tool=req.tool)
    content = {key: value for key, value in {"text": req.content, "finish": req.finish, "target": req.target,
                                             "reason": req.reason, "context": req.context, "tool": req.tool}.items()
               if value is not None}
    out = channels.send(principal, req.channel_id, attempt, content, event_type="packet")
    return {key: out[key] for key in ("envelope_id", "seq", "next_speaker", "channel_state")}


def delegate(principal: Principal, req: m.ConsultRequest) -> dict[str, Any]:
    """delegate: ``{channel_id, state, reply}`` (see relaynet.consult)."""
    from relaynet import consult

    return consult.delegate(principal, req)


def peers_tool(principal: Principal, req: m.PeersRequest) -> dict[str, Any]:
    """peers ``find`` | ``describe``."""
    from relaynet import peers

    if req.action == "describe":
        m.require(req, "name")
        return peers.describe(principal, req.name)
    return peers.find(principal, req.query, req.capability, req.sort_by, req.limit, req.cursor)


def channels_tool(principal: Principal, req: m.ChannelsRequest) -> dict[str, Any]:
    """channels ``list`` | ``open`` | ``info`` | ``close``."""
    from relaynet import channels

    if req.action == "list":
        return channels.list_channels(principal, req.state or "active", req.limit, req.cursor)
    if req.action == "open":
        m.require(req, "type", "target")
        targets = [req.target] if isinstance(req.target, str) else list(req.target)
        return channels.open_channel(principal, req.type, targets, req.knobs, req.intent, req.ttl, req.message)
    m.require(req, "channel_id")
    if req.action == "info":
        return channels.info(principal, req.channel_id)
    return channels.close(principal, req.channel_id)


def tasks_tool(principal: Principal, req: m.TasksRequest, on_terminal=None) -> dict[str, Any]:
    """tasks ``progress`` | ``complete`` | ``list`` | ``status`` | ``wait`` | ``cancel`` on the
    worker surface's tasks. ``on_terminal`` releases a finished task's claims."""
    from relaynet import tasks
    from relaynet.models.worker import TaskUpdateRequest

    if req.action == "list":
        return tasks.list_for(principal, req.scope or "own", req.state or "active", req.limit, req.cursor)
    m.require(req, "task_id")
    if req.action == "progress":
        m.require(req, "payload")
        return tasks.progress(principal, req.task_id, req.payload)
    if req.action == "complete":
        update = TaskUpdateRequest(taskId=req.task_id, status="completed", reason=req.result or "completed")
        return tasks.update(principal, update, on_terminal=on_terminal)
    if req.action == "cancel":
        update = TaskUpdateRequest(taskId=req.task_id, status="cancelled", reason=req.reason)
        return tasks.update(principal, update, on_terminal=on_terminal)
    if req.action == "status":
        return {"task": tasks.summary(tasks.load_task(principal.network_id, req.task_id))}
    return wait(principal, req.task_id, req.timeout)


def wait(principal: Principal, task_id: str, timeout_s: int) -> dict[str, Any]:
    """tasks ``wait`` (PROTOCOL.md 5.7): once the task is terminal (at once if it already is), its
    summary ``{id, title, state, creator, target, assignee, resource, createdAt, updatedAt}`` with
    ``done: true``; ``{done: false}`` if it is not terminal after at most
    ``min(timeout, RELAYNET_MAX_WAIT_SECONDS)``. An unknown id is 404 at once."""
    from relaynet import tasks

    deadline = time.monotonic() + min(timeout_s, settings().max_wait)
    while True:
        task = tasks.load_task(principal.network_id, task_id)
        if task["state"] in TERMINAL:
            return {**tasks.summary(task), "done": True}
        if time.monotonic() >= deadline:
            return {"done": False}
        time.sleep(min(WAIT_POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def context_tool(principal: Principal, req: m.ContextRequest) -> dict[str, Any]:
    """context ``search`` | ``quote``."""
    from relaynet import context

    if req.action == "search":
        m.require(req, "query")
        return context.search(principal, req.query, req.scope or "channel", req.channel_id, req.limit, req.cursor)
    m.require(req, "speaker")
    if req.channel_id and req.thread_id:
        raise InvalidArgument.field("thread_id", "give channel_id or thread_id, not both")
    return context.quote(principal, req.speaker, req.recent_n, req.channel_id, req.thread_id)


