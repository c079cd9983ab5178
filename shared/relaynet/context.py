"""The plugin surface's ``context``: search and quote over what the caller may see (PROTOCOL.md 5.8).

``channel`` scope covers the envelopes of the caller's channels (and, when given, one channel);
``knowledge`` covers the network's artifacts (label, uri, type) and tasks (title, objective and
completion reason). Matching is a case-insensitive substring; excerpts are at most 240 characters
around the first match.
"""

from __future__ import annotations

from typing import Any

from relaynet import channels, cursors, events
from relaynet.errors import NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.store import channels as channel_store
from relaynet.store import mailboxes as mail_store
from relaynet.store import tasks as task_store

EXCERPT = 240


def excerpt(text: str, query: str) -> str:
    """At most 240 characters of ``text`` around the first match of ``query``."""
    at = text.lower().find(query.lower())
    start = max(0, min(at - EXCERPT // 3, len(text) - EXCERPT)) if at >= 0 else 0
    return text[start:start + EXCERPT]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return " ".join(str(v) for v in content.values() if isinstance(v, (str, int, float)))
    return ""


def _visible_envelopes(principal: Principal, channel_id: str | None) -> list[dict[str, Any]]:
    net = principal.network_id
    if channel_id:
        head, envs = channel_store.head_and_envelopes(net, channel_id)  # one Query
        if head is None:
            raise NotFound(f"no channel {channel_id!r} in this network")
        if principal.agent not in channels.names(head):
            raise PermissionDenied("your agent is not a participant of this channel")
        pages = [envs]
    else:
        pages = (channel_store.envelopes(net, r["channel_id"]) for r in channel_store.memberships(net, principal.agent))
    out = []
    for envs in pages:
        for env in envs:
            if not env.get("audience") or principal.agent in env["audience"] or env.get("sender") == principal.agent:
                out.append(env)
    return out


THREADS_SEARCHED = 50


def _visible_thread_messages(principal: Principal) -> list[dict[str, Any]]:
    """Messages of the caller's agent's most recent threads (found through the event stream: the
    threads it posted in or was addressed in), at most :data:`THREADS_SEARCHED` threads."""
    net = principal.network_id
    thread_ids: list[str] = []
    page = events.recent(net, 100)
    for _ in range(10):
        for evt in page["events"]:
            mine = evt.get("fromAgent") == principal.agent or principal.agent in (evt.get("recipients") or [])
            if evt.get("kind") == "message" and mine and evt.get("threadId") not in thread_ids:
                thread_ids.append(evt["threadId"])
        if len(thread_ids) >= THREADS_SEARCHED or not page["after"]:
            break
        page = events.recent(net, 100, page["after"])
    out = []
    for thread_id in thread_ids[:THREADS_SEARCHED]:
        out += [m for m in mail_store.thread_messages(net, thread_id) if m.get("kind") in ("ask", "reply")]
    return out


def search(principal: Principal, query: str, scope: str, channel_id: str | None, limit: int,
           cursor: str | None = None) -> dict[str, Any]:
    """``{results: [{id, sender, when, excerpt}], nextCursor}``, newest first (then by id, a total
    order the cursor keeps its place in: PROTOCOL.md 2 "Lists"; a bad cursor is InvalidArgument)."""
    listing = cursors.Listing("context.search", principal, query=query, scope=scope, channel_id=channel_id)
    after = listing.position(cursor)
    results = []
    if scope == "knowledge":
        net = principal.network_id
        for task in task_store.all_of_network(net):
            reasons = [h.get("reason", "") for h in task.get("history", []) if h.get("state") == "completed"]
            text = " \n".join([task.get("title", ""), task.get("objective", ""), *reasons])
            if query.lower() in text.lower():
                creator = task.get("creator") or {}
                results.append({"id": task["id"], "sender": creator.get("agent") or f"rep:{creator.get('representative')}",
                                "when": task["createdAt"],
                                "excerpt": excerpt(text, query)})
        for art in task_store.artifacts_of_network(net):
            text = " ".join([art.get("label", ""), art.get("uri", ""), art.get("type", "")])
            if query.lower() in text.lower():
                results.append({"id": art["artifactId"], "sender": (art.get("publisher") or {}).get("agent"),
                                "when": art["createdAt"],
                                "excerpt": excerpt(text, query)})
    else:
        if not channel_id:
            for msg in _visible_thread_messages(principal):
                if query.lower() in (msg.get("body") or "").lower():
                    results.append({"id": msg["id"], "sender": (msg.get("from") or {}).get("agent")
                                    or msg.get("from"), "when": msg["createdAt"], "excerpt": excerpt(msg["body"], query)})
        for env in _visible_envelopes(principal, channel_id):
            text = _text(env.get("content"))
            if env.get("event_type") in ("text", "packet") and query.lower() in text.lower():
                results.append({"id": env["envelope_id"], "sender": env.get("sender"), "when": env["created_at"],
                                "excerpt": excerpt(text, query)})
    # newest first: ascending by the inverted (when, id) so that page_sorted can walk it
    results.sort(key=lambda r: (r["when"], r["id"]), reverse=True)
    if after is not None:
        results = [r for r in results if (r["when"], r["id"]) < tuple(after)]
    page = results[:limit]
    last = [page[-1]["when"], page[-1]["id"]] if len(results) > limit else None
    return {"results": page, "nextCursor": listing.next_cursor(last)}


def quote(principal: Principal, speaker: str, recent_n: int, channel_id: str | None,
          thread_id: str | None) -> dict[str, Any]:
    """The speaker's last ``recent_n`` texts visible to the caller, oldest first:
    ``{quotes: [{id, when, text}]}``."""
    if thread_id:
        net = principal.network_id
        meta, messages = mail_store.thread_and_messages(net, thread_id)
        if meta is None:
            raise NotFound(f"no thread {thread_id!r} in this network")
        if principal.agent not in meta.participants:
            raise PermissionDenied("your agent is not a participant of this thread")
        said = [m for m in messages if (m.get("from") or {}).get("agent") == speaker]
        return {"quotes": [{"id": m["id"], "when": m["createdAt"], "text": m["body"]} for m in said[-recent_n:]]}
    texts = [e for e in _visible_envelopes(principal, channel_id)
             if e.get("sender") == speaker and e.get("event_type") in ("text", "packet") and _text(e.get("content"))]
    texts.sort(key=lambda e: (e["created_at"], e["seq"]))
    return {"quotes": [{"id": e["envelope_id"], "when": e["created_at"], "text": _text(e["content"])}
                       for e in texts[-recent_n:]]}
