"""AG2 wire, ``$connect`` and ``$disconnect`` of the WebSocket API (docs/protocol.md 12): a new
connection is recorded bound to nobody (the handshake is authorizer-free: AG2 authenticates in
its ``register`` and ``hello`` frames); a closed one is forgotten with its bindings."""

from relaynet import clock, observability
from relaynet.store import ag2 as store
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# PutItem records a connection, GetItem and DeleteItem forget it and its bindings.
DYNAMODB_ACTIONS = ("PutItem", "GetItem", "DeleteItem", "Query", "BatchWriteItem")


def run(event, context):
    ctx = event["requestContext"]
    if ctx.get("eventType") == "CONNECT":
        store.put_connection(ctx["connectionId"], clock.now_ms())
    elif ctx.get("eventType") == "DISCONNECT":
        store.delete_connection(ctx["connectionId"])
    return {"statusCode": 200}


handler = table.declares(DYNAMODB_ACTIONS, "ag2_connection")(
    observability.instrument(run, name="ag2_connection", source="websocket"))
