"""The Agent Cards of a network's agent definitions (docs/protocol.md 13.1).

``GET /a2a/<network>/<agent>/.well-known/agent-card.json`` and ``GET /a2a/<network>`` (every
card of the network) need no token: a card holds only what ``network_discover`` shows any member
(the definition's name, description and operator-set capabilities), and says how to call the
agent, never who may.
"""

from __future__ import annotations

from typing import Any

from relaynet.version import __version__
from relaynet.a2a.wire import PROTOCOL_VERSION, is_name
from relaynet.config import settings
from relaynet.directory import load
from relaynet.errors import NotFound
from relaynet.store import directory as dir_store

SCHEME = "relaynet"


def base_url(origin: str, network: str, agent: str) -> str:
    """``<origin>/a2a/<network>/<agent>``: the agent's JSON-RPC endpoint (``origin`` e.g.
    ``https://abc.execute-api.eu-west-1.amazonaws.com``)."""
    return f"{origin}/a2a/{network}/{agent}"


def card(origin: str, network: str, agent: dict[str, Any]) -> dict[str, Any]:
    """An A2A ``AgentCard`` (JSON) of one stored agent definition: the JSON-RPC interface at its
    base URL, truthful capabilities (streaming where this hub serves it, settings().a2a_streaming;
    push notification configs as signed webhooks; no extended card: docs/protocol.md 13), a bearer scheme (a Relaynet token), text in and out, one skill
    per declared capability."""
    name = agent["name"]
    return {
        "name": name,
        "description": agent.get("description") or f"Relaynet agent {name} of network {network}",
        "supportedInterfaces": [{"url": base_url(origin, network, name), "protocolBinding": "JSONRPC",
                                 "protocolVersion": PROTOCOL_VERSION}],
        "version": __version__,
        "capabilities": {"streaming": settings().a2a_streaming, "pushNotifications": True, "extendedAgentCard": False},
        "securitySchemes": {SCHEME: {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "A Relaynet token: an instance token acts as that instance; a "
                           "representative token needs the delegate grant on the network."}}},
        "securityRequirements": [{"schemes": {SCHEME: {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "text/uri-list"],
        "skills": [{"id": c["id"], "name": c.get("name") or c["id"], "description": c.get("description") or c.get("name") or c["id"],
                    "tags": [c["id"]]} for c in agent.get("capabilities") or []],
    }


def agent_card(origin: str, network: str, agent_name: str) -> dict[str, Any]:
    """The card of ``agent_name`` in network ``network`` (names). Raises NotFound (no such
    network or agent). Two GetItems."""
    net = dir_store.network_id(network) if is_name(network) and is_name(agent_name) else None
    agent = dir_store.agent(net, agent_name) if net else None
    if agent is None:
        raise NotFound(f"no agent {agent_name[:64]!r} in network {network[:64]!r}")
    return card(origin, network, agent)


def network_cards(origin: str, network: str) -> dict[str, Any]:
    """``{"network": name, "agents": [card, ...]}`` by agent name. Raises NotFound (no such
    network). A GetItem and the directory's Query."""
    net = dir_store.network_id(network) if is_name(network) else None
    if net is None:
        raise NotFound(f"no network {network[:64]!r}")
    d = load(net)
    return {"network": network, "agents": [card(origin, network, d.agents[n]) for n in sorted(d.agents)]}
