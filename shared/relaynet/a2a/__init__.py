"""A2A 1.0 (``lf.a2a.v1``) for Relaynet agents (docs/protocol.md 13, issue 28).

Every agent definition is served as an A2A agent at ``/a2a/<network name>/<agent name>``: its
Agent Card (:mod:`relaynet.a2a.card`, public) and the JSON-RPC binding (:mod:`relaynet.a2a.rpc`)
whose methods are the worker surface's domain calls on Relaynet tasks. :mod:`relaynet.a2a.wire`
holds the protocol's shapes (our own pydantic models of the JSON the ProtoJSON mapping gives:
the Lambda path imports no protobuf) and the mapping of a Relaynet task to an A2A ``Task``.
"""
