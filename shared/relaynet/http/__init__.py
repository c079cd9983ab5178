"""HTTP glue: API Gateway events in, the protocol's JSON and error envelope out (PROTOCOL.md 2)."""
