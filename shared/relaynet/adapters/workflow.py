"""workflow: 2 or more participants; knob ``graph`` is AG2's ``TransitionGraph.to_dict()`` JSON;
only the expected speaker may ``handoff``; ``say`` is not offered (PROTOCOL.md 5.1, 5.3).

A handoff is one packet. Its ``context`` is applied to the channel's variables first; then
``finish`` closes the channel with ``reason`` (default ``finished``); else ``target`` (a
participant) becomes the next speaker; else the graph decides: transitions are tried lowest
``priority`` first (ties in list order), the first whose condition holds resolves the target,
else ``default_target``. A target resolving to nobody (``terminate``) closes the channel with its
reason; otherwise the channel closes with ``max_turns`` once the packet count reaches
``max_turns``. This is AG2's ``WorkflowAdapter.fold``/``on_accepted`` rule.

Conditions: ``always``, ``from_speaker {agent_id}``, ``tool_called {tool_name}``,
``context_equals {key, value}``. Targets: ``agent {agent_id}``, ``round_robin``, ``stay``,
``revert_to_initiator``, ``terminate {reason}``.
"""

from __future__ import annotations

from typing import Any

from relaynet.adapters.base import NOT_YOUR_TURN, AdapterError, Decision, Send, at_least, refuse, wrong_tool

CONDITIONS = {"always": set(), "from_speaker": {"agent_id"}, "tool_called": {"tool_name"},
              "context_equals": {"key", "value"}}
TARGETS = {"agent": {"agent_id"}, "round_robin": set(), "stay": set(), "revert_to_initiator": set(),
           "terminate": {"reason"}}
_REQUIRED_ARGS = {"from_speaker": {"agent_id"}, "tool_called": {"tool_name"}, "context_equals": {"key"},
                  "agent": {"agent_id"}}


def _named(node: Any, kinds: dict[str, set[str]], where: str, participants: list[str]) -> dict[str, Any]:
    if not isinstance(node, dict) or not isinstance(node.get("name"), str):
        raise AdapterError(where, "must be an object {name, args}")
    name, args = node["name"], node.get("args") or {}
    if name not in kinds:
        raise AdapterError(where, f"unknown {where.rsplit('.', 1)[-1]} {name!r}; one of {sorted(kinds)}")
    if not isinstance(args, dict) or set(args) - kinds[name] or _REQUIRED_ARGS.get(name, set()) - set(args):
        raise AdapterError(f"{where}.args", f"{name} takes {sorted(kinds[name]) or 'no arguments'}")
    if name == "agent" and args["agent_id"] not in participants:
        raise AdapterError(f"{where}.args.agent_id", f"{args['agent_id']!r} is not a participant")
    return {"name": name, "args": args}


def validate_graph(graph: Any, participants: list[str]) -> dict[str, Any]:
    """The graph, checked and normalised; raises AdapterError (400) naming the bad part."""
    where = "knobs.graph"
    if not isinstance(graph, dict):
        raise AdapterError(where, "required: AG2 TransitionGraph.to_dict() JSON")
    unknown = set(graph) - {"initial_speaker", "transitions", "default_target", "max_turns"}
    if unknown:
        raise AdapterError(where, f"unknown graph keys {sorted(unknown)}")
    if graph.get("initial_speaker") not in participants:
        raise AdapterError(f"{where}.initial_speaker", f"{graph.get('initial_speaker')!r} is not a participant")
    transitions = graph.get("transitions") or []
    if not isinstance(transitions, list):
        raise AdapterError(f"{where}.transitions", "must be a list")
    out = []
    for i, tr in enumerate(transitions):
        if not isinstance(tr, dict) or set(tr) - {"when", "then", "priority"}:
            raise AdapterError(f"{where}.transitions.{i}", "must be {when, then, priority}")
        priority = tr.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise AdapterError(f"{where}.transitions.{i}.priority", "must be an integer")
        out.append({"when": _named(tr.get("when"), CONDITIONS, f"{where}.transitions.{i}.when", participants),
                    "then": _named(tr.get("then"), TARGETS, f"{where}.transitions.{i}.then", participants),
                    "priority": priority})
    default = graph.get("default_target") or {"name": "terminate", "args": {}}
    max_turns = graph.get("max_turns")
    if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1):
        raise AdapterError(f"{where}.max_turns", "must be a positive integer or null")
    return {"initial_speaker": graph["initial_speaker"], "transitions": out,
            "default_target": _named(default, TARGETS, f"{where}.default_target", participants),
            "max_turns": max_turns}


def _holds(cond: dict[str, Any], state: dict[str, Any], send: Send) -> bool:
    name, args = cond["name"], cond["args"]
    if name == "always":
        return True
    if name == "from_speaker":
        return send.sender == args["agent_id"]
    if name == "tool_called":
        return send.routing_tool == args["tool_name"]
    return state["context"].get(args["key"]) == args.get("value")


def _resolve(target: dict[str, Any], state: dict[str, Any], send: Send) -> tuple[str | None, str]:
    name, args = target["name"], target["args"]
    order = state["participants"]
    if name == "agent":
        return args["agent_id"], ""
    if name == "round_robin":
        return order[(order.index(send.sender) + 1) % len(order)], ""
    if name == "stay":
        return send.sender, ""
    if name == "revert_to_initiator":
        return order[0], ""
    return None, args.get("reason") or "after_work"


class Workflow:
    type = "workflow"
    tool = "handoff"

    def initial_state(self, participants: list[str], knobs: dict[str, Any]) -> dict[str, Any]:
        """The folded state. Optional values (``max_turns``, ``expected``) may be absent rather
        than null once stored (the table drops nulls), so they are read with ``.get``."""
        at_least(participants, 2, self.type)
        unknown = set(knobs) - {"graph", "context_vars"}
        if unknown:
            raise AdapterError("knobs", f"unknown workflow knobs {sorted(unknown)}")
        graph = validate_graph(knobs.get("graph"), participants)
        context = knobs.get("context_vars") or {}
        if not isinstance(context, dict):
            raise AdapterError("knobs.context_vars", "must be an object")
        return {"participants": list(participants), "graph": graph, "expected": graph["initial_speaker"],
                "turns": 0, "context": dict(context)}

    def decide(self, state: dict[str, Any], send: Send, now_ms: int) -> Decision:
        refused = wrong_tool(self, state, send)
        if refused:
            return refused
        if send.sender != state.get("expected"):
            return refuse(state, NOT_YOUR_TURN, f"it is {state.get('expected')}'s turn")
        new = {**state, "context": {**state["context"], **send.context}, "turns": state["turns"] + 1}
        graph = state["graph"]
        if send.finish is not None:
            new["expected"] = None
            return Decision(state=new, close_reason=send.reason or "finished")
        if send.target is not None:
            nxt, reason = send.target, ""
        else:
            rule = next((tr for tr in sorted(graph["transitions"], key=lambda tr: tr["priority"])
                         if _holds(tr["when"], new, send)), None)
            nxt, reason = _resolve(rule["then"] if rule else graph["default_target"], new, send)
        new["expected"] = nxt
        if nxt is None:
            return Decision(state=new, close_reason=reason)
        if graph.get("max_turns") is not None and new["turns"] >= graph["max_turns"]:
            return Decision(state=new, close_reason="max_turns")
        return Decision(state=new)

    def next_speaker(self, state: dict[str, Any]) -> str | None:
        return state.get("expected")

    def your_tools(self, state: dict[str, Any], agent: str) -> list[str]:
        return ["handoff"] if state.get("expected") == agent else []
