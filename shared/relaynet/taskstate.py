"""The task state machine of PROTOCOL.md 4.8, as one table, the permission decision, and the cap
on a task's inline history (docs/protocol.md 4.7).

| from | to | who |
|---|---|---|
| pending | accepted | an eligible instance (pull), which becomes the assignee |
| offered | accepted | the offered instance only |
| offered | pending | the hub, when the offer expires (never a caller) |
| accepted | working, blocked | the assignee |
| working | blocked, completed, failed | the assignee |
| blocked | working | the assignee |
| any non-terminal | cancelled | the creator's agent (or a representative) |

Roles a caller can hold towards a task (relaynet.tasks works them out):

- ``creator``: the caller's agent created the task, or the caller is a representative.
- ``offered_instance`` and ``assignee``: the task is offered or assigned to the caller's instance.
- ``eligible`` and ``assignee``: the task is ``pending`` and the caller's instance is eligible for
  it (4.6), so it could pull-accept it and become the assignee. Holding ``assignee`` here makes
  "working before accepting" a state error (409, accept first), not a permission error.

:func:`decide` applies PROTOCOL.md 4.8's order: permission before state. A caller none of whose
roles may ever move a task into ``to`` is 403; a move the table has from this state but for
another role is 403; a move the table does not have from this state is 409 with ``allowed``.
"""

from __future__ import annotations

import json

TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATES = ("pending", "offered", "accepted", "working", "blocked", "completed", "failed", "cancelled")
NON_TERMINAL = tuple(s for s in STATES if s not in TERMINAL)
REQUESTABLE = ("accepted", "working", "blocked", "completed", "failed", "cancelled")  # a caller's `status`
REASON_REQUIRED = frozenset({"blocked", "completed", "failed"})
HELD = frozenset({"accepted", "working", "blocked"})  # states in which the assignee holds the task

# (from, to) -> the role that may make the move. "router" moves are the hub's own.
TRANSITIONS: dict[tuple[str, str], str] = {
    ("pending", "accepted"): "eligible",
    ("offered", "accepted"): "offered_instance",
    ("offered", "pending"): "router",
    ("accepted", "working"): "assignee",
    ("accepted", "blocked"): "assignee",
    ("working", "blocked"): "assignee",
    ("working", "completed"): "assignee",
    ("working", "failed"): "assignee",
    ("blocked", "working"): "assignee",
    **{(s, "cancelled"): "creator" for s in NON_TERMINAL},
}

ALLOWED_BY_CALLERS = frozenset(pair for pair, role in TRANSITIONS.items() if role != "router")


def roles_for(to: str) -> set[str]:
    """The roles that may move a task into ``to`` from some state."""
    return {role for (_, dst), role in TRANSITIONS.items() if dst == to and role != "router"}


def allowed_from(state: str) -> list[str]:
    """States a caller may request from ``state`` by the table (the hub's own moves excluded),
    in the protocol's order of statuses."""
    return [dst for dst in REQUESTABLE if (state, dst) in ALLOWED_BY_CALLERS]


def rule(src: str, dst: str) -> str | None:
    """The role the move needs, or None when the table has no such move (or only the hub's)."""
    role = TRANSITIONS.get((src, dst))
    return None if role == "router" else role


def decide(state: str, to: str, roles: set[str]) -> str:
    """``"ok"``, ``"forbidden"`` (403) or ``"invalid"`` (409) for a caller with ``roles``."""
    if not roles & roles_for(to):
        return "forbidden"
    needed = rule(state, to)
    if needed is None:
        return "invalid"
    return "ok" if needed in roles else "forbidden"



#: How many ``history`` entries a task item holds (docs/protocol.md 4.7): the first (the task's
#: creation) and the newest ones, at most ``HISTORY_KEPT`` entries of at most ``HISTORY_BYTES``
#: (as JSON) in all. A task offered and let expire forever (two entries per offer TTL) would
#: otherwise pass DynamoDB's 400 KB item limit in about four days, after which no write of it
#: succeeds; a router entry is about 150 bytes, a caller's reason up to 8 KiB.
HISTORY_KEPT = 50
HISTORY_BYTES = 64 * 1024


def _size(entry: dict) -> int:
    return len(json.dumps(entry, default=str, separators=(",", ":")))


def cap_history(task: dict) -> int:
    """Drop (in memory) the oldest ``history`` entries after the first until at most
    ``HISTORY_KEPT`` entries of at most ``HISTORY_BYTES`` remain (the newest entry is always
    kept), adding how many went to ``task["historyDropped"]``. Returns how many were dropped now.

    Every transition, router or caller, goes through it (relaynet.tasks), so no task item grows
    without bound; the network's event stream (control_get_history) still records each offer and
    expiry.
    """
    history = task.get("history") or []
    if len(history) <= 2:
        return 0
    sizes = [_size(h) for h in history]
    keep_from = max(1, len(history) - (HISTORY_KEPT - 1))
    total = sizes[0] + sum(sizes[keep_from:])
    while total > HISTORY_BYTES and keep_from < len(history) - 1:
        total -= sizes[keep_from]
        keep_from += 1
    dropped = keep_from - 1
    if dropped <= 0:
        return 0
    task["history"] = [history[0], *history[keep_from:]]
    task["historyDropped"] = int(task.get("historyDropped") or 0) + dropped
    return dropped
