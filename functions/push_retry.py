"""Scheduled: retry the webhook deliveries that are due (relaynet.push.retry_due), with
exponential backoff for up to RELAYNET_PUSH_RETRY_WINDOW_SECONDS, then mark them failed."""

from aws_lambda_powertools import Logger

from relaynet import push
from relaynet.store import table

logger = Logger(service="relaynet")

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# Query the due deliveries and the directory; UpdateItem the lease and the push status; PutItem
# the rescheduled delivery; DeleteItem a delivered or dropped one.
DYNAMODB_ACTIONS = ("Query", "UpdateItem", "PutItem", "DeleteItem")


@table.declares(DYNAMODB_ACTIONS, "push_retry")
def handler(event, context):
    stats = push.retry_due()
    if stats["due"]:
        logger.info("push retries", extra=stats)
    return stats
