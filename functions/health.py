"""GET /v1/health, no auth (PROTOCOL.md 2): ``{"status": "ok", "version": ...}``."""

import json

from relaynet import __version__

# No DynamoDB access: its function has no policy in template.yaml.
DYNAMODB_ACTIONS = ()


def handler(event, context):
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"status": "ok", "version": __version__})}
