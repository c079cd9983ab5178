"""A remote A2A 1.0 agent served by the official SDK's own server classes, for the bridge's e2e
tests (tests/e2e/test_a2a_bridge_e2e.py, tests/e2e/test_a2a_bridge_push_e2e.py): an
``AgentExecutor`` under ``DefaultRequestHandler`` with an ``InMemoryTaskStore`` (and, with
``push``, the SDK's ``InMemoryPushNotificationConfigStore`` and ``BasePushNotificationSender``),
its JSON-RPC and Agent Card routes, on uvicorn in a daemon thread on 127.0.0.1."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import uvicorn
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import BasePushNotificationSender, InMemoryPushNotificationConfigStore, InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette

from tests.e2e.conftest import free_port, until


@contextmanager
def sdk_remote(executor: AgentExecutor, name: str, description: str, skill: pb.AgentSkill, *,
               push: bool = False, middleware: Any = None) -> Iterator[str]:
    """Serve ``executor`` as the A2A agent ``name`` (its card: JSON-RPC 1.0 at ``/rpc``, no
    streaming, ``pushNotifications`` as ``push`` says, the one ``skill``), behind ``middleware``
    when given; yields its card's URL. On exit every ``executor.release`` gate is set (so no task
    waits on a test that ended) and the server stops."""
    port = free_port()
    card = pb.AgentCard(
        name=name, description=description, version="1.0",
        supported_interfaces=[pb.AgentInterface(url=f"http://127.0.0.1:{port}/rpc", protocol_binding="JSONRPC",
                                                protocol_version="1.0")],
        capabilities=pb.AgentCapabilities(streaming=False, push_notifications=push),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"], skills=[skill])
    kwargs: dict[str, Any] = {}
    if push:
        configs = InMemoryPushNotificationConfigStore()
        kwargs = {"push_config_store": configs, "push_sender": BasePushNotificationSender(httpx.AsyncClient(), configs)}
    handler = DefaultRequestHandler(executor, InMemoryTaskStore(), card, **kwargs)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/rpc")])
    if middleware is not None:
        app.add_middleware(middleware)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started, "the SDK's server started", 20)
    try:
        yield f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    finally:
        for gate in getattr(executor, "release", {}).values():
            gate.set()
        server.should_exit = True
        thread.join(10)
