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

# In AWS a write hands its pushes to the stream functions as it commits (relaynet.push_at_write);
# a no-op unless RELAYNET_PUSH_AT_WRITE_TARGETS is set. A malformed value is left to the settings,
# which refuse it by name at the cold start.
from relaynet import push_at_write as _push_at_write  # noqa: E402

try:
    _push_at_write.install()
except ValueError:
    pass
