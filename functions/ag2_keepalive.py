"""AG2 wire, the keepalive, on a schedule: a ``ping`` frame to every connection silent for 4
minutes, so API Gateway's 10-minute idle timeout never ends a quiet agent's connection (the
2-hour cap still does), and channels whose invite handshake has waited longer than
``RELAYNET_AG2_INVITE_TIMEOUT_SECONDS`` (30 s) closed with
``invite_timeout`` (docs/protocol.md 12)."""

from relaynet import clock, observability
from relaynet.ag2 import ops, post
from relaynet.observability import logger
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# Query lists idle connections and stale handshakes (GSI1), UpdateItem marks connections pinged and
# ends handshakes, GetItem/PutItem/UpdateItem close a timed-out channel (relaynet.channels.close),
# GetItem/DeleteItem forget gone connections.
DYNAMODB_ACTIONS = ("Query", "UpdateItem", "GetItem", "PutItem", "DeleteItem", "BatchWriteItem")
IDLE_MS = 4 * 60_000


def run(event, context):
    now = clock.now_ms()
    timed_out = ops.expire_handshakes(now, post.endpoint())
    sent = ops.keepalive(now, IDLE_MS, post.endpoint())
    if sent or timed_out:
        logger.info("AG2 keepalive", extra={"pinged": sent, "invite_timeouts": timed_out})
    return {"pinged": sent, "invite_timeouts": timed_out}


handler = table.declares(DYNAMODB_ACTIONS, "ag2_keepalive")(
    observability.instrument(run, name="ag2_keepalive", source="schedule"))
