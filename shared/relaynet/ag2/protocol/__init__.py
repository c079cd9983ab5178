"""Relaynet's own models of AG2 1.2.1's network protocol: exactly the parts the AG2 wire
(relaynet.ag2) reads and writes, so serving the wire never imports the ``ag2`` package (whose
``ag2/__init__`` loads AG2's whole agent stack, about 1.5 s of a cold start; issue 30 part 2).

One module per concern, each reproducing an AG2 module's field names, defaults, enum values and
serialisation (``to_dict`` is AG2's ``dataclasses.asdict``: every field, ``None`` included, enums
as their values):

- :mod:`.errors`: the error family and its wire codes (``ag2/network/errors.py``,
  ``ag2/network/hub/core.py`` ``_ERROR_CODE_MAP``).
- :mod:`.envelope`: the event-type names and ``Envelope`` (``ag2/network/envelope.py``).
- :mod:`.identity`: ``Passport``, ``AuthBlock``, ``CostProfile``, ``Resume``, ``ObservedStat``
  (``ag2/network/identity.py``).
- :mod:`.rule`: ``Rule`` and ``parse_duration`` (``ag2/network/rule.py``).
- :mod:`.channel`: ``ChannelMetadata``, its manifest, participants and states, and the manifests
  of AG2's four built-in adapters (``ag2/network/channel.py``, ``ag2/network/adapters/*.py``).
- :mod:`.task`: ``TaskMetadata``, ``TaskState`` (``ag2/task.py``).
- :mod:`.frames`: the frames and their codec (``ag2/network/transport/frames.py``).

They are kept honest by tests/unit/test_ag2_protocol_oracle.py, which imports AG2 1.2.1 (a test
dependency only) and checks, for generated instances, that both sides serialise to the same JSON
and parse each other's.
"""
