"""The routing sweep, run on a schedule (PROTOCOL.md 7): see relaynet.sweep."""

from aws_lambda_powertools import Logger

from relaynet import sweep

logger = Logger(service="relaynet")


def handler(event, context):
    stats = sweep.run()
    if stats["seen"]:
        logger.info("sweep done", extra=stats)
    return stats
