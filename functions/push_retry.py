"""Scheduled: retry the webhook deliveries that are due (relaynet.push.retry_due) and the A2A
push notification configs that are behind (relaynet.a2a.push.retry_due), with exponential backoff
for up to RELAYNET_PUSH_RETRY_WINDOW_SECONDS, then mark them failed."""

from relaynet import observability, push
from relaynet.a2a import push as a2a_push
from relaynet.observability import logger
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# Query the due deliveries and the directory; UpdateItem the lease and the push status; PutItem
# the rescheduled delivery or its delivered / failed marker; DeleteItem a dropped one (its
# instance is gone or stopped, or has no push config any more).
DYNAMODB_ACTIONS = ("Query", "UpdateItem", "PutItem", "DeleteItem")


def run(event, context):
    """Retry what is due; the outcomes are logged (when any was due) and counted as EMF metrics
    ``PushRetry<Outcome>``."""
    stats = push.retry_due()
    observability.count_outcomes("PushRetry", stats)
    if stats["due"]:
        logger.info("push retries", extra=stats)
    a2a = a2a_push.retry_due()
    observability.count_outcomes("A2aPushRetry", a2a)
    if a2a["due"]:
        logger.info("a2a push retries", extra=a2a)
    return {**stats, "a2a": a2a}


handler = table.declares(DYNAMODB_ACTIONS, "push_retry")(observability.instrument(run, name="push_retry", source="schedule"))
