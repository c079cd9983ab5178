"""The plugin surface's tools, one module per domain module they call (channels, tasks, peers,
context, consult), so each tool's Lambda loads only its own domain; relaynet.plugin gathers them."""
