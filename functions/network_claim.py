"""network_claim: take a glob-aware exclusive claim (PROTOCOL.md 4.9, 8)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims
from relaynet.http.api import ToolApp
from relaynet.models.worker import ClaimRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("network_claim", actions=DYNAMODB_ACTIONS)


@tool.route
def network_claim(request: Annotated[ClaimRequest, Body()]) -> dict:
    return claims.claim(tool.caller(), request)


handler = tool.handler
