"""GET /v1/health, no auth (PROTOCOL.md 2): ``{"status": "ok", "version": ...}``."""

import json

from relaynet import __version__


def handler(event, context):
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"status": "ok", "version": __version__})}
