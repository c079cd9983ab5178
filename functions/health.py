"""GET /v1/health, no auth (PROTOCOL.md 2): ``{"status": "ok", "version": ..., "store": ...}``.

``store`` says what the table lives on: ``dynamodb`` in AWS; locally ``dynamodb-local``,
``memory`` (moto, throwaway) or ``external`` (``--dynamodb-endpoint``), as the local stack sets
``RELAYNET_STORE``.
"""

import json
import os

from relaynet import observability
from relaynet.version import __version__

# No DynamoDB access: its function has no policy in template.yaml.
DYNAMODB_ACTIONS = ()


def run(event, context):
    body = {"status": "ok", "version": __version__, "store": os.environ.get("RELAYNET_STORE", "dynamodb")}
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}


# trace=False: no store call to trace, and no settings to load (relaynet.observability.instrument)
handler = observability.instrument(run, name="health", source="http", trace=False)
