"""AG2 wire, every frame of the WebSocket API (routes ``hello``, ``request``, ``receipt``,
``ping`` by ``$request.body.kind``, and ``$default``): relaynet.ag2.wire decodes and dispatches
it to relaynet.ag2.ops, and the answers leave by postToConnection (docs/protocol.md 12)."""

from relaynet import clock, observability
from relaynet.ag2 import ops, post
from relaynet.ag2.wire import Wire
from relaynet.store import ag2 as store
from relaynet.store import table

wire = Wire(ops.OPS, ops.hello, ops.receipt, ops.DEFERRED)

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
# GetItem/Query/BatchGetItem read connections, tokens, the directory, channels and bindings;
# PutItem/UpdateItem write bindings, identities, cursors, handshakes and sends (transactions);
# DeleteItem forgets a connection whose postToConnection answered Gone.
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
TOUCH_INTERVAL_MS = 60_000  # a connection's last activity is written at most once a minute


def run(event, context):
    ctx = event["requestContext"]
    connection_id = ctx["connectionId"]
    body = event.get("body") or ""
    session = ops.load_session(connection_id, body)  # a post reads its channel in the same request
    conn, now = session.connection, clock.now_ms()
    if now - int(conn.get("last_ms") or 0) >= TOUCH_INTERVAL_MS and "last_ms" in conn:
        store.touch_connection(connection_id, now)
    wire.handle(session, body)
    observability.bind(network=session.network_id)  # on the closing line, once a hello bound it
    ops.flush(session, post.endpoint(ctx))
    return {"statusCode": 200}


handler = table.declares(DYNAMODB_ACTIONS, "ag2_frames")(observability.instrument(run, name="ag2_frames", source="websocket"))
