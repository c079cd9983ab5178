"""The local MCP bridge (PROTOCOL.md 9): a stdio MCP server that relays tool calls to the hub.

``relaynet mcp worker`` (or ``python -m relaynet.mcp_bridge worker``) serves exactly the worker
surface's tools, the 12 ``network_*`` tools, each with its catalogue description
and an input schema derived from its pydantic request model, as ``make generate`` writes them
into :mod:`relaynet.client_tools` (the bridge imports none of the hub's code). Configuration comes from the
environment, read at start:

- ``RELAYNET_URL``: the hub's base URL (``http://127.0.0.1:8787``, an API Gateway stage URL);
- ``RELAYNET_TOKEN``: the instance (``rn_inst_``) or representative (``rn_rep_``) token.

The bridge starts without contacting the hub: a missing variable, a bad token or an unreachable
hub surfaces as a tool error on the first call, never as a crash at start. Each call is relayed
as ``POST {RELAYNET_URL}/v1/tools/<name>`` with the arguments object as the JSON body; the hub
validates it (one source of truth: the agent sees the hub's ``details.fields``). A 2xx answer
comes back as one text content block holding the JSON result; an error answer comes back as a
tool error (``isError: true``) whose text reads ``<code> (<reason>): <message>`` followed by the
details JSON. Creating writes carry a fresh ``Idempotency-Key`` per tool call and are retried
once with the same key when the first attempt got no response.

Built on the official ``mcp`` SDK 2.x low-level ``Server`` (constructor-registered
``on_list_tools`` / ``on_call_tool`` handlers, ``mcp.server.stdio.stdio_server``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from collections.abc import Mapping
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from relaynet import mcp_channel
from relaynet.client import ApiError, AsyncRelaynetClient
from relaynet.client_tools import SURFACES
from relaynet.client_version import __version__

__all__ = [
    "Bridge",
    "INSTRUCTIONS",
    "build_server",
    "format_error",
    "mcp_tools",
    "run",
    "serve",
]

logger = logging.getLogger("relaynet.mcp_bridge")

URL_VAR = "RELAYNET_URL"
TOKEN_VAR = "RELAYNET_TOKEN"

#: Tools that create something and accept an ``Idempotency-Key`` (PROTOCOL.md 2). ``channels``
#: is creating only for ``action: "open"``.
CREATING_TOOLS = frozenset(
    {
        "network_ask",
        "network_reply",
        "network_delegate",
        "network_publish_artifact",
        "delegate",
        "say",
        "handoff",
        "control_ask",
        "control_delegate",
    }
)

#: How often a blocking ``delegate`` looks at its consulting channel again.
POLL_SECONDS = 1.0

#: Longest wait the bridge honours for a ``Retry-After`` of a 409 ``in_progress`` answer.
MAX_IN_PROGRESS_WAIT = 5.0

_WORKER_INSTRUCTIONS = (
    "You are connected to a Relaynet network as one agent instance; call network_whoami first to "
    "learn your agent name, responsibilities and peers. Only tool calls reach other agents: your "
    "plain text output is seen by no one on the network, so answer asks with network_reply, hand "
    "off work with network_delegate and report progress with network_task_update. Check "
    "network_inbox after each step of your work (and whenever you are about to stop) and follow "
    "the instructions carried by each message. Accept a task (network_task_update "
    "status=accepted) before doing any work on it, and only then work; report working, blocked, "
    "completed (reason = the evidence) or failed. Claims are coordination, not permission: claim "
    "files with network_claim before changing them and release the claim when done, and never "
    "work on a scope another instance holds; if a claim is refused, work elsewhere or ask the "
    "holder. A relaynet channel event (\"2 new on Relaynet: ...\") means mail waits: call "
    "network_inbox; the event never carries the message itself."
)
_PLUGIN_INSTRUCTIONS = (
    "You are connected to a Relaynet network. Only tool calls reach other agents: your plain "
    "text output is seen by no one. Use peers to find agents, delegate for one-shot consults "
    "(it waits for the answer) and channels/say/handoff for conversations; it is your turn in a "
    "channel only when channels info lists the tool in your_tools. New envelopes also arrive in "
    "network_inbox (the worker bridge). Use tasks to report progress on and complete work "
    "assigned to you."
)
_CONTROL_INSTRUCTIONS = (
    "You are a Relaynet representative acting for a human operator. Use control_network_status "
    "and control_list_blocked to see what needs attention, control_ask/control_delegate to reach "
    "agents, and confirm destructive steps (control_stop_agent, control_restart_agent) with the "
    "confirmationId the first call returns."
)

#: The MCP ``initialize`` instructions of each surface.
INSTRUCTIONS: dict[str, str] = {
    "worker": _WORKER_INSTRUCTIONS,
    "plugin": _PLUGIN_INSTRUCTIONS,
    "control": _CONTROL_INSTRUCTIONS,
}


# --------------------------------------------------------------------------- the tool list


def mcp_tools(surface: str) -> list[types.Tool]:
    """The MCP tool list of a surface, in catalogue order: each tool's name, catalogue description
    and input schema as ``make generate`` wrote them into :mod:`relaynet.client_tools` (from the
    hub's catalogue and request models; tests/test_generate.py checks they agree). An unknown
    surface gives ``[]``."""
    return [
        types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
        for t in SURFACES.get(surface, ())
    ]


# --------------------------------------------------------------------------- relaying calls


def format_error(err: ApiError) -> str:
    """The text of a tool error: ``<code> (<reason>): <message>``, then details and retry hint.

    E.g. ``conflict (claim_conflict): scope is claimed by coder/inst_...`` followed by
    ``details: {"reason": "claim_conflict", "conflicts": [...]}``.
    """
    head = err.code
    if err.reason:
        head += f" ({err.reason})"
    text = f"{head}: {err.message}" if err.message else head
    if err.status:
        text += f" [HTTP {err.status}]"
    if err.details:
        text += "\ndetails: " + json.dumps(err.details, ensure_ascii=False)
    if err.retry_after is not None:
        text += f"\nretry after {err.retry_after:g} s"
    return text


def _text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)


def _is_creating(name: str, arguments: Mapping[str, Any]) -> bool:
    if name in CREATING_TOOLS:
        return True
    return name == "channels" and arguments.get("action") == "open"


class Bridge:
    """Relays tool calls of one surface to the hub; keeps one ``AsyncRelaynetClient``.

    Args:
        surface: ``worker`` | ``plugin`` | ``control``.
        url: the hub's base URL, or ``None`` / ``""`` when not configured.
        token: the bearer token, or ``None`` / ``""`` when not configured.
        timeout: seconds per HTTP request.
        transport: an ``httpx.AsyncBaseTransport`` for tests.
    """

    def __init__(
        self,
        surface: str,
        url: str | None,
        token: str | None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.surface = surface
        self.url = url or None
        self.token = token or None
        self.timeout = timeout
        self.tools = {t["name"]: t for t in SURFACES.get(surface, ())}
        self._transport = transport
        self._client: AsyncRelaynetClient | None = None

    @classmethod
    def from_env(cls, surface: str, environ: Mapping[str, str] | None = None) -> "Bridge":
        """A bridge configured from ``RELAYNET_URL`` and ``RELAYNET_TOKEN``; never contacts the hub."""
        env = os.environ if environ is None else environ
        return cls(surface, env.get(URL_VAR, "").strip(), env.get(TOKEN_VAR, "").strip())

    def configuration_error(self) -> str | None:
        """Why calls cannot be relayed (missing variables), or ``None``."""
        missing = [var for var, value in ((URL_VAR, self.url), (TOKEN_VAR, self.token)) if not value]
        if not missing:
            return None
        names = " and ".join(missing)
        verb = "is" if len(missing) == 1 else "are"
        return (
            f"not_configured: {names} {verb} not set. The relaynet MCP bridge needs {URL_VAR} (the "
            f"hub's base URL, e.g. http://127.0.0.1:8787) and {TOKEN_VAR} (this agent's rn_inst_ "
            f"token, or an rn_rep_ token for the control surface) in its environment; set them in "
            f"the MCP server configuration and restart it."
        )

    def _get_client(self) -> AsyncRelaynetClient:
        if self._client is None:
            assert self.url is not None
            self._client = AsyncRelaynetClient(
                self.url, self.token, timeout=self.timeout, transport=self._transport
            )
        return self._client

    async def relay(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """POST one call; raises :class:`ApiError`. Creating writes get an ``Idempotency-Key``
        and one retry with it when no response arrived; a retry answered 409 ``in_progress`` is
        tried once more after its ``Retry-After`` (at most ``MAX_IN_PROGRESS_WAIT`` s)."""
        client = self._get_client()
        if not _is_creating(name, arguments):
            return await client.call(name, arguments)
        key = str(uuid.uuid4())
        try:
            return await client.call(name, arguments, idempotency_key=key)
        except ApiError as err:
            if not err.is_transport_error:
                raise
            logger.warning("%s: %s; retrying once with the same Idempotency-Key", name, err.message)
        try:
            return await client.call(name, arguments, idempotency_key=key)
        except ApiError as err:
            if not (err.code == "conflict" and err.reason == "in_progress"):
                raise
            await anyio.sleep(min(err.retry_after if err.retry_after is not None else 1.0, MAX_IN_PROGRESS_WAIT))
        return await client.call(name, arguments, idempotency_key=key)

    async def _wait_if_asked(self, name: str, args: dict[str, Any], result: dict[str, Any],
                             started: float) -> dict[str, Any]:
        """The plugin surface's blocking calls (PROTOCOL.md 5): ``delegate`` and ``tasks`` ``wait``
        hold until done or their ``timeout`` (default 300 s), calling the API again as needed,
        since one server-side wait lasts at most 20 s."""
        if self.surface != "plugin" or not (name == "delegate" or (name == "tasks" and args.get("action") == "wait")):
            return result
        deadline = started + float(args.get("timeout", 300))  # the first call's own wait counts
        client = self._get_client()
        if name == "tasks":
            while not result.get("done") and anyio.current_time() < deadline:
                remaining = max(1, int(deadline - anyio.current_time()))
                result = await client.call("tasks", {**args, "timeout": remaining})
            return result
        while result.get("reply") is None and result.get("state") == "active" and anyio.current_time() < deadline:
            await anyio.sleep(min(POLL_SECONDS, max(0.0, deadline - anyio.current_time())))
            info = await client.call("channels", {"action": "info", "channel_id": result["channel_id"]})
            texts = [e for e in info["envelopes"] if e.get("event_type") == "text"]
            result = {"channel_id": result["channel_id"], "state": info["channel"]["state"],
                      "reply": texts[1]["content"] if len(texts) > 1 else None}
        return result

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """Relay a tools/call; every failure but an unknown tool name is a tool error result.

        Raises:
            MCPError: ``INVALID_PARAMS`` for a tool this surface does not have.
        """
        if name not in self.tools:
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r} (this is the {self.surface} surface)")
        problem = self.configuration_error()
        if problem:
            return _text_result(problem, is_error=True)
        args = dict(arguments or {})
        started = anyio.current_time()
        try:
            result = await self.relay(name, args)
            result = await self._wait_if_asked(name, args, result, started)
        except ApiError as err:
            return _text_result(format_error(err), is_error=True)
        except httpx.InvalidURL as exc:
            return _text_result(f"not_configured: {URL_VAR}={self.url!r} is not a valid URL: {exc}", is_error=True)
        except Exception as exc:  # never let a bug kill the stdio session
            logger.exception("relaying %s failed", name)
            return _text_result(f"internal: the relaynet MCP bridge failed: {type(exc).__name__}: {exc}", is_error=True)
        return _text_result(json.dumps(result, ensure_ascii=False))

    async def aclose(self) -> None:
        """Close the HTTP client, if one was opened."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


# --------------------------------------------------------------------------- the MCP server


def build_server(bridge: Bridge) -> Server[Any]:
    """The low-level MCP server for ``bridge.surface``: ``relaynet-<surface>``, the package version,
    the surface's instructions, and ``tools/list`` + ``tools/call`` handlers."""
    tools = mcp_tools(bridge.surface)

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await bridge.call_tool(params.name, params.arguments)

    return Server(
        f"relaynet-{bridge.surface}",
        version=__version__,
        instructions=INSTRUCTIONS.get(bridge.surface),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve(surface: str, environ: Mapping[str, str] | None = None) -> None:
    """Serve ``surface`` over this process's stdin/stdout until the client disconnects. The
    worker surface is also a Claude Code channel (relaynet.mcp_channel): it declares the
    experimental ``claude/channel`` capability and, once the client has initialised, tells it of
    the instance's events with ``notifications/claude/channel``."""
    bridge = Bridge.from_env(surface, environ)
    server = build_server(bridge)
    channel = surface == "worker"
    connected: list[Any] = []
    ready = anyio.Event()

    async def on_initialized(ctx: ServerRequestContext[Any], params: types.NotificationParams) -> None:
        connected.append(ctx.session)  # its standalone channel outlives this notification
        ready.set()

    async def tell(params: dict[str, Any]) -> None:
        await connected[0].send_notification(mcp_channel.ChannelNotification(params=params))

    async def channel_events() -> None:
        await ready.wait()
        await mcp_channel.pump(bridge.url, bridge.token, tell)

    if channel:
        server.add_notification_handler("notifications/initialized", types.NotificationParams, on_initialized)
    options = server.create_initialization_options(
        experimental_capabilities={mcp_channel.CAPABILITY: {}} if channel else None)
    try:
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tg:
            if channel and bridge.configuration_error() is None:
                tg.start_soon(channel_events)
            await server.run(read_stream, write_stream, options)
            tg.cancel_scope.cancel()
    finally:
        await bridge.aclose()


def run(surface: str) -> None:
    """Run the stdio MCP server of ``surface`` (``worker`` | ``plugin`` | ``control``).

    Reads ``RELAYNET_URL`` and ``RELAYNET_TOKEN``; does not contact the hub before the first
    tool call. Logs go to stderr (``RELAYNET_LOG_LEVEL``, default WARNING); stdout is the wire.

    Raises:
        ValueError: an unknown surface, or one with no tools in this build.
    """
    if surface not in INSTRUCTIONS:
        raise ValueError(f"unknown surface {surface!r}: expected one of {', '.join(INSTRUCTIONS)}")
    if not SURFACES.get(surface):
        raise ValueError(f"the {surface} surface has no tools in this build of relaynet")
    if not logging.getLogger().handlers:
        logging.basicConfig(
            stream=sys.stderr,
            level=os.environ.get("RELAYNET_LOG_LEVEL", "WARNING").upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    anyio.run(serve, surface)


def main(argv: list[str] | None = None) -> int:
    """``python -m relaynet.mcp_bridge <surface>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(f"usage: python -m relaynet.mcp_bridge {{{'|'.join(INSTRUCTIONS)}}}", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        run(args[0])
    except ValueError as exc:
        print(f"relaynet mcp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
