"""AG2's turn-taking read through Relaynet's adapters (relaynet.adapters): one set of rules for
both surfaces. The plugin surface's ``say``/``handoff`` and an AG2 client's ``post_envelope``
are decided by the same ``Adapter.decide`` on the same folded state (the channel head's
``adapter_state``, which relaynet.channels.send writes in each send's transaction); this module
only says what an AG2 envelope is in Relaynet's terms and answers AG2's adapter questions
(``validate_send``, ``expected_next``; AG2 1.2.1 ``ag2/network/adapters/*.py``) from there.

What AG2's adapters do that Relaynet's do not, kept here rather than in relaynet.adapters so the
plugin surface's behaviour is unchanged:

- Only *turn* envelopes meet the turn rules: ``ag2.msg.text`` in every type, and ``ag2.packet``
  in a workflow (AG2's ``_is_substantive``). Every other event type (the ``ag2.channel.*`` and
  ``ag2.task.*`` events, a packet outside a workflow, anything else) passes without a turn, as
  informational data; ``ag2.context.set`` in a workflow only from a participant.
- A turn from someone not in the channel is refused whatever the type (AG2's conversation adapter
  checks it; Relaynet's hub checks membership before its adapters, relaynet.channels.send).
- A text in a workflow is a handoff that names no target: the graph decides (AG2 folds text like
  a packet without routing). A packet's ``routing`` is a handoff's target (``kind: handoff``),
  its finish (``kind: finish``, ``reason``) or the routing tool (``tool``, for ``tool_called``);
  ``context_updates.set`` its context. Relaynet's handoff cannot delete a context variable, so a
  packet that asks to (``context_updates.delete``) is refused.

The expected turn's triggering envelope is the last turn envelope of the channel's log
(AG2's ``last_envelope_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relaynet import adapters
from relaynet.adapters import Decision, Send
from relaynet.ag2.protocol.envelope import CHANNEL_PROTOCOL_EVENTS, EV_CONTEXT_SET, EV_PACKET, EV_TEXT
from relaynet.ag2.protocol.errors import ProtocolError

__all__ = ("ExpectedTurn", "attempt", "check", "expected_next", "turn_item")

NOT_A_PARTICIPANT = "not_a_participant"


@dataclass(frozen=True)
class ExpectedTurn:
    """Who the channel expects next and the envelope that put the turn on them (None: nothing
    sent yet), AG2's ``ExpectedTurn``."""

    agent_id: str
    triggering_envelope_id: str | None = None


def _is_turn(channel_type: str, event_type: str) -> bool:
    if event_type in CHANNEL_PROTOCOL_EVENTS or event_type.startswith("ag2.task."):
        return False
    return event_type == EV_TEXT or (channel_type == "workflow" and event_type == EV_PACKET)


def attempt(channel_type: str, sender: str, event_type: str, event_data: dict[str, Any]) -> Send | None:
    """The Relaynet send an AG2 envelope of ``event_type`` from ``sender`` is, or None when it
    is not a turn (module docstring). Raises ProtocolError for a packet that deletes context
    variables or whose ``routing``/``context_updates`` is not an object."""
    if not _is_turn(channel_type, event_type):
        return None
    tool = adapters.adapter(channel_type).tool
    if event_type == EV_TEXT:
        return Send(sender=sender, tool=tool)
    routing = event_data.get("routing") or {}
    updates = event_data.get("context_updates") or {}
    if not isinstance(routing, dict) or not isinstance(updates, dict):
        raise ProtocolError("a packet's routing and context_updates are objects")
    if updates.get("delete"):
        raise ProtocolError("Relaynet's workflow handoff sets context variables; it does not delete them")
    context = updates.get("set") or {}
    if not isinstance(context, dict):
        raise ProtocolError("a packet's context_updates.set is an object")
    kind = routing.get("kind")
    body = event_data.get("body")
    return Send(sender=sender, tool=tool, context=dict(context), routing_tool=routing.get("tool"),
                target=(routing.get("target") or None) if kind == "handoff" else None,
                finish=(body if isinstance(body, str) else "") if kind == "finish" else None,
                reason=(routing.get("reason") or None) if kind == "finish" else None)


def check(channel_type: str, participants: list[str], state: dict[str, Any], channel_id: str, sender: str,
          event_type: str, event_data: dict[str, Any], now_ms: int = 0) -> tuple[Send | None, Decision | None]:
    """AG2's ``validate_send`` for an envelope in a channel whose folded state is ``state``:
    ``(the send, Relaynet's decision)``, both None when the envelope is not a turn. Raises
    ProtocolError when it is refused (out of turn, not a participant, or :func:`attempt`'s)."""
    if channel_type == "workflow" and event_type == EV_CONTEXT_SET and sender not in participants:
        raise ProtocolError(f"workflow {channel_id!r} only accepts {EV_CONTEXT_SET} from participants, got {sender!r}")
    send = attempt(channel_type, sender, event_type, event_data)
    if send is None:
        return None, None
    if sender not in participants:
        decision = Decision(state=state, refusal=NOT_A_PARTICIPANT, message=f"{sender!r} is not a participant")
    else:
        decision = adapters.adapter(channel_type).decide(state, send, now_ms)
    if not decision.accepted:
        raise ProtocolError(f"{channel_type} channel {channel_id!r} refuses a send from {sender!r}: {decision.message}")
    return send, decision


def turn_item(channel_type: str, item: dict[str, Any]) -> bool:
    """Whether a Relaynet envelope item of the channel's log was a turn: a ``text``, or in a
    workflow a ``packet`` (a handoff, or the seed)."""
    return item.get("event_type") == "text" or (channel_type == "workflow" and item.get("event_type") == "packet")


def expected_next(channel_type: str, state: dict[str, Any], items: list[dict[str, Any]]) -> ExpectedTurn | None:
    """AG2's ``expected_next``: the adapter's next speaker in ``state`` (None: anyone, as in a
    conversation, or nobody, once a consult is answered or a workflow terminated), with the last
    turn of ``items`` (the channel's envelope items in seq order) as the trigger."""
    nxt = adapters.adapter(channel_type).next_speaker(state)
    if nxt is None:
        return None
    last = next((i["envelope_id"] for i in reversed(items) if turn_item(channel_type, i)), None)
    return ExpectedTurn(agent_id=nxt, triggering_envelope_id=last)
