"""The routing sweep, run on a schedule (PROTOCOL.md 7): see relaynet.sweep."""

from aws_lambda_powertools import Logger

from relaynet import sweep
from relaynet.store import table

logger = Logger(service="relaynet")

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
DYNAMODB_ACTIONS = ("Query", "PutItem", "UpdateItem", "DeleteItem")


@table.declares(DYNAMODB_ACTIONS, "sweep")
def handler(event, context):
    stats = sweep.run()
    if stats["seen"]:
        logger.info("sweep done", extra=stats)
    return stats
