"""GET /v1/openapi.json, no auth (PROTOCOL.md 2): the OpenAPI 3 document of every tool."""

import json

from relaynet import observability
from relaynet.http.openapi import document

# No DynamoDB access: its function has no policy in template.yaml.
DYNAMODB_ACTIONS = ()


def run(event, context):
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(document())}


# trace=False: no store call to trace, and no settings to load (relaynet.observability.instrument)
handler = observability.instrument(run, name="openapi", source="http", trace=False)
