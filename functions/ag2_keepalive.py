"""AG2 wire, the keepalive, on a schedule: a ``ping`` frame to every connection silent for 4
minutes, so API Gateway's 10-minute idle timeout never ends a quiet agent's connection (the
2-hour cap still does), and channels whose invite handshake has waited over 30 s closed with
``invite_timeout`` (docs/protocol.md 12)."""

from aws_lambda_powertools import Logger

from relaynet import clock
from relaynet.ag2 import ops, post
from relaynet.store import table

logger = Logger()  # the service from POWERTOOLS_SERVICE_NAME (the template sets relaynet)

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# Query lists idle connections and stale handshakes (GSI1), UpdateItem marks connections pinged and
# ends handshakes, GetItem/PutItem/UpdateItem close a timed-out channel (relaynet.channels.close),
# GetItem/DeleteItem forget gone connections.
DYNAMODB_ACTIONS = ("Query", "UpdateItem", "GetItem", "PutItem", "DeleteItem", "BatchWriteItem")
IDLE_MS = 4 * 60_000


@table.declares(DYNAMODB_ACTIONS, "ag2_keepalive")
def handler(event, context):
    now = clock.now_ms()
    timed_out = ops.expire_handshakes(now, post.endpoint())
    sent = ops.keepalive(now, IDLE_MS, post.endpoint())
    if sent or timed_out:
        logger.info("AG2 keepalive", extra={"pinged": sent, "invite_timeouts": timed_out})
    return {"pinged": sent, "invite_timeouts": timed_out}
