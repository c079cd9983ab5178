"""postToConnection: how every AG2 wire function sends a frame to a WebSocket client, through API
Gateway's management API (``apigatewaymanagementapi``: ``POST /@connections/{id}``). The local
stack (``relaynet serve``) serves the same API and writes to its sockets, so the handlers carry no
local-only code.

The endpoint is ``RELAYNET_AG2_MANAGEMENT_URL`` when set (template.yaml sets it for the stream
notifier and the keepalive; the local stack sets it), else ``https://<domainName>/<stage>`` of the
WebSocket event being handled.
"""

from __future__ import annotations

import os
import threading

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


class Gone(Exception):
    """The connection no longer exists (API Gateway's ``GoneException``, HTTP 410)."""


_clients: dict[str, object] = {}  # endpoint -> its management client, at most 8 (one per stage in practice)
_clients_lock = threading.Lock()


def _client(endpoint: str):
    with _clients_lock:
        client = _clients.get(endpoint)
        if client is None:
            if len(_clients) >= 8:
                del _clients[next(iter(_clients))]
            client = _clients[endpoint] = boto3.client(
                "apigatewaymanagementapi", endpoint_url=endpoint,
                config=Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=2, read_timeout=5))
        return client


def close_clients() -> None:
    """Close the connection pools of the management clients made so far (after a SnapStart
    restore, relaynet.snapstart); each reconnects on its next call."""
    with _clients_lock:
        clients = list(_clients.values())
    for client in clients:
        client.close()


def endpoint(request_context: dict | None = None) -> str:
    """The management API endpoint: the environment's, else the one of ``request_context``
    (a WebSocket event's ``requestContext``). Raises RuntimeError when neither names one."""
    configured = os.environ.get("RELAYNET_AG2_MANAGEMENT_URL")
    if configured:
        return configured.rstrip("/")
    if request_context and request_context.get("domainName") and request_context.get("stage"):
        return f"https://{request_context['domainName']}/{request_context['stage']}"
    raise RuntimeError("no management API endpoint: set RELAYNET_AG2_MANAGEMENT_URL")


def post(endpoint_url: str, connection_id: str, data: bytes) -> None:
    """Send one message to one connection. Raises :class:`Gone` when the connection is gone;
    other API errors (throttling, a message over 128 KB) propagate as botocore's ClientError."""
    try:
        _client(endpoint_url).post_to_connection(ConnectionId=connection_id, Data=data)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "GoneException" or \
                exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 410:
            raise Gone(connection_id) from None
        raise


def disconnect(endpoint_url: str, connection_id: str) -> None:
    """Close a connection from the server side (``DELETE /@connections/{id}``); a gone one is fine."""
    try:
        _client(endpoint_url).delete_connection(ConnectionId=connection_id)
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 410:
            raise
