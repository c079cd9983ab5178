"""GET /v1/openapi.json, no auth (PROTOCOL.md 2): the OpenAPI 3 document of every tool."""

import json

from relaynet.http.openapi import document

# No DynamoDB access: its function has no policy in template.yaml.
DYNAMODB_ACTIONS = ()


def handler(event, context):
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(document())}
