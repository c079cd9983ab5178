"""network_release: release a claim the caller holds (PROTOCOL.md 4.10)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims
from relaynet.http.api import ToolApp
from relaynet.models.worker import ReleaseRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("network_release", actions=DYNAMODB_ACTIONS)


@tool.route
def network_release(request: Annotated[ReleaseRequest, Body()]) -> dict:
    return claims.release(tool.caller(), request)


handler = tool.handler
