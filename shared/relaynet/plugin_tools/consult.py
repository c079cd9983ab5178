"""The plugin surface's delegate tool (PROTOCOL.md 5.4): a consulting channel, through relaynet.consult."""

from __future__ import annotations

from typing import Any

from relaynet import consult
from relaynet.identity import Principal
from relaynet.models import plugin as m


def delegate(principal: Principal, req: m.ConsultRequest) -> dict[str, Any]:
    """delegate: ``{channel_id, state, reply}`` (see relaynet.consult)."""
    return consult.delegate(principal, req)

