"""Request models of the tool surfaces (PROTOCOL.md 4), shared by the handlers (validation and
the OpenAPI document), the SDK and the MCP bridge (input schemas). Unknown arguments are
refused (``extra="forbid"``): an agent that misspells ``toAgent`` must hear about it."""
