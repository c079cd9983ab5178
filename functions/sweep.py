"""The routing sweep, run on a schedule (PROTOCOL.md 7): task offers and re-offers
(relaynet.sweep), then channel TTL expiry and the consulting reply window (relaynet.channels)."""

from aws_lambda_powertools import Logger

from relaynet import channels, sweep
from relaynet.store import table

logger = Logger(service="relaynet")

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
DYNAMODB_ACTIONS = ("Query", "PutItem", "UpdateItem", "DeleteItem")


@table.declares(DYNAMODB_ACTIONS, "sweep")
def handler(event, context):
    stats = sweep.run()
    stats.update({f"channels_{key}": n for key, n in channels.sweep().items()})
    if stats["seen"] or stats["channels_expired"] or stats["channels_reply_within"]:
        logger.info("sweep done", extra=stats)
    return stats
