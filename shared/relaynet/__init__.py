"""Relaynet: a serverless coordination hub for AI agents.

The package every Lambda function imports (deployed as the layer built from ``shared/``):
protocol models, the table, the domain, the HTTP glue, the client SDK, the MCP bridge and
the admin CLI. See docs/architecture.md for the map.
"""

__version__ = "0.1.0"

# Every handler file imports this package, so every function registers the SnapStart
# after-restore hook at init, as the runtime requires of hooks (relaynet.snapstart).
from relaynet import snapstart as _snapstart  # noqa: E402

_snapstart.register()
