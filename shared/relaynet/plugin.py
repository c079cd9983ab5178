"""The plugin surface's action tools (PROTOCOL.md 5.2 to 5.8) gathered in one namespace, for callers
that want them all (tests, scripts). Each tool lives in :mod:`relaynet.plugin_tools` next to the
domain module it calls; a handler imports that module only, so its Lambda loads only its domain."""

from __future__ import annotations

from relaynet.plugin_tools.channels import channels_tool, handoff, say
from relaynet.plugin_tools.consult import delegate
from relaynet.plugin_tools.context import context_tool
from relaynet.plugin_tools.peers import peers_tool
from relaynet.plugin_tools.tasks import WAIT_POLL_SECONDS, tasks_tool, wait

__all__ = ["WAIT_POLL_SECONDS", "channels_tool", "context_tool", "delegate", "handoff", "peers_tool", "say",
           "tasks_tool", "wait"]
