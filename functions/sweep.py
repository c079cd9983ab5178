"""The routing sweep, run on a schedule (PROTOCOL.md 7): task offers and re-offers
(relaynet.sweep), then channel TTL expiry and the consulting reply window (relaynet.channels)."""

from relaynet import channels, observability, sweep
from relaynet.observability import logger
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
DYNAMODB_ACTIONS = ("Query", "PutItem", "UpdateItem", "DeleteItem")


def run(event, context):
    """One sweep run; its outcomes are logged (when it did anything) and counted as EMF metrics
    ``Sweep<Outcome>`` (SweepOffered, SweepExpired, SweepChannelsExpired, ...)."""
    stats = sweep.run()
    stats.update({f"channels_{key}": n for key, n in channels.sweep().items()})
    observability.count_outcomes("Sweep", stats)
    if stats["seen"] or stats["channels_expired"] or stats["channels_reply_within"]:
        logger.info("sweep done", extra=stats)
    return stats


handler = table.declares(DYNAMODB_ACTIONS, "sweep")(observability.instrument(run, name="sweep", source="schedule"))
