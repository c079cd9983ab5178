"""Calling a remote A2A 1.0 agent over its JSON-RPC binding (issue 28 part 3, docs/protocol.md 13.4).

The hub is the A2A *client* here: :func:`resolve` reads the remote's Agent Card and picks its
JSON-RPC interface of protocol version 1.x; :func:`call` makes one JSON-RPC request there with
``A2A-Version: 1.0`` and the member's credentials. Both apply the push targets' rules
(relaynet.push.target_error: in AWS only ``https`` to public addresses, checked again by
resolution before every request; loopback and ``http`` only on the local stack) and never
follow a redirect, so a spec cannot turn the hub against its own network.

httpx rather than the ``a2a-sdk`` client: the SDK's client pulls protobuf and gRPC into every
Lambda for three JSON-RPC methods whose shapes relaynet.a2a.wire already holds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from relaynet import push

__all__ = ["A2A_VERSION", "RemoteAgent", "RemoteError", "TIMEOUT_S", "auth_headers", "call", "resolve"]

A2A_VERSION = "1.0"
TIMEOUT_S = 10.0  # one card read or JSON-RPC request; the bridge's run has minutes
USER_AGENT = "relaynet-a2a/1"


class RemoteError(Exception):
    """A remote call that did not give a result: ``code`` is the JSON-RPC error code the remote
    answered (e.g. -32001 TaskNotFoundError, -32002 TaskNotCancelableError), or None when no
    JSON-RPC answer came (unreachable, refused target, HTTP error, not JSON). ``denied`` is True
    when the remote answered HTTP 401 or 403 without a JSON-RPC answer: it refused the
    credentials, which no retry changes."""

    def __init__(self, message: str, code: int | None = None, denied: bool = False):
        super().__init__(message)
        self.message = message
        self.code = code
        self.denied = denied


@dataclass(frozen=True)
class RemoteAgent:
    """A resolved remote: ``name`` from its card, ``rpc_url`` its JSON-RPC 1.x interface,
    ``push`` whether its card says ``capabilities.pushNotifications`` (it takes a push config)."""

    name: str
    rpc_url: str
    push: bool = False


def auth_headers(authentication: dict[str, Any] | None) -> dict[str, str]:
    """``Authorization: <first scheme> <credentials>`` from an A2A ``AuthenticationInfo``-shaped
    ``{schemes, credentials}``, or no header."""
    auth = authentication or {}
    if auth.get("credentials") and auth.get("schemes"):
        return {"Authorization": f"{auth['schemes'][0]} {auth['credentials']}"}
    return {}


def _json(response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise RemoteError(f"{what}: HTTP {response.status_code}, not JSON") from None


def resolve(card_url: str, authentication: dict[str, Any] | None = None) -> RemoteAgent:
    """The remote whose Agent Card is at ``card_url``. Raises RemoteError (code None) when the
    card cannot be read, is not a card, or offers no JSON-RPC interface of version 1.x that may
    be contacted."""
    import httpx

    problem = push.target_error(card_url)
    if problem:
        raise RemoteError(f"agent card URL refused: {problem}")
    try:
        response = push.outbound().get(card_url, headers={"User-Agent": USER_AGENT, **auth_headers(authentication)},
                                       timeout=TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise RemoteError(f"agent card: {type(exc).__name__}: {str(exc)[:200]}") from None
    if response.status_code != 200:
        raise RemoteError(f"agent card: HTTP {response.status_code}")
    card = _json(response, "agent card")
    if not isinstance(card, dict) or not isinstance(card.get("name"), str):
        raise RemoteError("agent card: not an A2A AgentCard (no name)")
    for iface in card.get("supportedInterfaces") or []:
        if not isinstance(iface, dict):
            continue
        version = str(iface.get("protocolVersion") or "")
        if iface.get("protocolBinding") == "JSONRPC" and version.split(".")[0] == "1" and iface.get("url"):
            problem = push.target_error(str(iface["url"]))
            if problem:
                raise RemoteError(f"agent card: JSON-RPC interface refused: {problem}")
            capabilities = card.get("capabilities")
            takes_push = isinstance(capabilities, dict) and capabilities.get("pushNotifications") is True
            return RemoteAgent(card["name"], str(iface["url"]), takes_push)
    raise RemoteError("agent card: no JSONRPC interface of protocol version 1.x in supportedInterfaces")


def call(remote: RemoteAgent, method: str, params: dict[str, Any],
         authentication: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``result`` of one JSON-RPC request ``method(params)`` to ``remote``.

    Raises RemoteError: with the remote's ``code`` and ``message`` for a JSON-RPC error answer
    (-32603 when its code is not an integer), code None when
    no JSON-RPC answer came (the target is refused, unreachable, or answers something else),
    ``denied`` when that answer was HTTP 401 or 403.
    """
    import httpx

    problem = push.target_error(remote.rpc_url)
    if problem:
        raise RemoteError(f"JSON-RPC URL refused: {problem}")
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    headers = {"A2A-Version": A2A_VERSION, "User-Agent": USER_AGENT, **auth_headers(authentication)}
    try:
        response = push.outbound().post(remote.rpc_url, json=body, headers=headers, timeout=TIMEOUT_S,
                                        follow_redirects=False)
    except httpx.HTTPError as exc:
        raise RemoteError(f"{method}: {type(exc).__name__}: {str(exc)[:200]}") from None
    if response.status_code in (401, 403):
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not (isinstance(answer, dict) and isinstance(answer.get("error"), dict)):
            raise RemoteError(f"{method}: HTTP {response.status_code}: the remote refused the credentials "
                              "(authentication in the agent's a2a: definition)", denied=True)
    answer = _json(response, method)
    if not isinstance(answer, dict):
        raise RemoteError(f"{method}: HTTP {response.status_code}, not a JSON-RPC response")
    error = answer.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        raise RemoteError(str(error.get("message") or f"{method} failed"), code if isinstance(code, int) else -32603)
    result = answer.get("result")
    if not isinstance(result, dict):
        raise RemoteError(f"{method}: HTTP {response.status_code}, no result object")
    return result
