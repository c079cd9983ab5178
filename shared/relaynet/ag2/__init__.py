"""AG2's network wire protocol (the ``ag2`` package's ``ag2.network``, 1.2.1) served by Relaynet:
an unmodified ``HubClient(WsLink(url))`` registers, opens channels and talks through it. Nothing
here imports ``ag2`` (issue 30 part 2): the protocol is modelled in :mod:`relaynet.ag2.protocol`.

- :mod:`relaynet.ag2.protocol`: Relaynet's pydantic models of AG2's frames, envelope, identity
  records, rule, channel metadata, task metadata and error codes, checked against AG2 by tests.
- :mod:`relaynet.ag2.turns`: AG2's turn questions (``validate_send``, ``expected_next``)
  answered by Relaynet's adapters (relaynet.adapters), so both surfaces share one set of rules.
- :mod:`relaynet.ag2.frames`: the frame codec, strict as AG2's own, and API Gateway's size limits.
- :mod:`relaynet.ag2.wire`: one inbound frame in, the frames to send out (domain-free dispatch).
- :mod:`relaynet.ag2.ops`: the request ops over Relaynet's identities and channels.
- :mod:`relaynet.ag2.post`: postToConnection (API Gateway's management API; the local stack
  serves the same API).
"""
