"""The client's version (the ``relaynet-client`` distribution's, client/pyproject.toml reads it
from here): the SDK's ``User-Agent`` and the MCP bridge's ``serverInfo.version``.

``relaynet`` is a namespace package (PEP 420) shared with the hub's distribution, so the version
lives in a module each distribution owns (the hub's is ``relaynet.version``). A module, not
``importlib.metadata``: reading it costs the hook and the bridge no metadata scan at start.
"""

__version__ = "0.1.0"
