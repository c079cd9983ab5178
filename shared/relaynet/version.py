"""The hub's version (the ``relaynet`` distribution's, root pyproject.toml reads it from here).

``relaynet`` is a namespace package (PEP 420) shared by two distributions, the hub (``shared/``,
the Lambda layer) and the client (``client/``, ``relaynet-client``), so neither owns a
``relaynet/__init__.py`` to hold a ``__version__``; each keeps its own in a module of its own
(this one; ``relaynet.client_version`` on the client's side). A module, not
``importlib.metadata``: the layer is a copy of the package with no distribution metadata, and
GET /v1/health, the OpenAPI document, the A2A card and the DynamoDB client's user agent read it.
"""

__version__ = "0.1.0"
