"""AG2's network wire protocol (the ``ag2`` package's ``ag2.network``, 1.2.1) served by Relaynet:
an unmodified ``HubClient(WsLink(url))`` registers, opens channels and talks through it.

- :mod:`relaynet.ag2.frames`: the frame codec, strict as AG2's own, and API Gateway's size limits.
- :mod:`relaynet.ag2.wire`: one inbound frame in, the frames to send out (domain-free dispatch).
- :mod:`relaynet.ag2.ops`: the request ops over Relaynet's identities and channels.
- :mod:`relaynet.ag2.post`: postToConnection (API Gateway's management API; the local stack
  serves the same API).
"""
