"""Channel adapters (PROTOCOL.md 5.1): who may send what, as pure functions over a folded state.

``ADAPTERS[type]`` gives the adapter of a channel type; see :mod:`relaynet.adapters.base` for the
interface they share.
"""

from __future__ import annotations

from relaynet.adapters.base import Adapter, AdapterError, Decision, Send
from relaynet.adapters.consulting import Consulting
from relaynet.adapters.conversation import Conversation
from relaynet.adapters.discussion import Discussion
from relaynet.adapters.workflow import Workflow

TYPES = ("conversation", "discussion", "consulting", "workflow")


def adapter(channel_type: str, reply_within_s: int = 600) -> Adapter:
    """The adapter of ``channel_type``; KeyError for an unknown type."""
    return {
        "conversation": Conversation,
        "discussion": Discussion,
        "consulting": lambda: Consulting(reply_within_s),
        "workflow": Workflow,
    }[channel_type]()


__all__ = ["Adapter", "AdapterError", "Decision", "Send", "TYPES", "adapter"]
