"""The plugin surface's peers tool (PROTOCOL.md 5.5): find | describe, through relaynet.peers."""

from __future__ import annotations

from typing import Any

from relaynet import peers
from relaynet.identity import Principal
from relaynet.models import plugin as m


def peers_tool(principal: Principal, req: m.PeersRequest) -> dict[str, Any]:
    """peers ``find`` | ``describe``."""
    if req.action == "describe":
        m.require(req, "name")
        return peers.describe(principal, req.name)
    return peers.find(principal, req.query, req.capability, req.sort_by, req.limit, req.cursor)

