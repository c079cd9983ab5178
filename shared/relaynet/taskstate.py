"""The task state machine of PROTOCOL.md 4.8, as one table.

| from | to | who |
|---|---|---|
| pending | accepted | an eligible instance (pull) |
| offered | accepted | the offered instance |
| offered | pending | the hub, when the offer expires (never a caller) |
| accepted | working, blocked | the assignee |
| working | blocked, completed, failed | the assignee |
| blocked | working | the assignee |
| any non-terminal | cancelled | the creator's agent (or a representative) |
"""

from __future__ import annotations

TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATES = ("pending", "offered", "accepted", "working", "blocked", "completed", "failed", "cancelled")
NON_TERMINAL = tuple(s for s in STATES if s not in TERMINAL)
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


def roles_for(to: str) -> set[str]:
    """The roles that may move a task into ``to`` from some state."""
    return {role for (_, dst), role in TRANSITIONS.items() if dst == to and role != "router"}


def allowed_from(state: str) -> list[str]:
    """States a caller may request from ``state`` by the table (the hub's own moves excluded)."""
    return [dst for (src, dst), role in TRANSITIONS.items() if src == state and role != "router"]


def rule(src: str, dst: str) -> str | None:
    """The role the move needs, or None when the table has no such move."""
    return TRANSITIONS.get((src, dst))
