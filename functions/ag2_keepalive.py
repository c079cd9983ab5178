"""AG2 wire, the keepalive, on a schedule: a ``ping`` frame to every connection silent for 4
minutes, so API Gateway's 10-minute idle timeout never ends a quiet agent's connection (the
2-hour cap still does; docs/protocol.md 12)."""

from aws_lambda_powertools import Logger

from relaynet import clock
from relaynet.ag2 import ops, post
from relaynet.store import table

logger = Logger(service="relaynet")

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# Query lists idle connections (GSI1), UpdateItem marks them pinged, GetItem/DeleteItem forget gone ones.
DYNAMODB_ACTIONS = ("Query", "UpdateItem", "GetItem", "DeleteItem")
IDLE_MS = 4 * 60_000


@table.declares(DYNAMODB_ACTIONS, "ag2_keepalive")
def handler(event, context):
    sent = ops.keepalive(clock.now_ms(), IDLE_MS, post.endpoint())
    if sent:
        logger.info("AG2 keepalive", extra={"pinged": sent})
    return {"pinged": sent}
