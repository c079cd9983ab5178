"""The table: key shapes (:mod:`relaynet.store.keys`) and DynamoDB primitives
(:mod:`relaynet.store.table`). No other module talks to DynamoDB or spells a key."""
