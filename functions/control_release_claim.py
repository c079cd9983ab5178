"""control_release_claim: release any claim (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import claims as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ReleaseClaimRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "PutItem", "DeleteItem")

tool = ToolApp("control_release_claim", actions=DYNAMODB_ACTIONS)


@tool.route
def control_release_claim(request: Annotated[ReleaseClaimRequest, Body()]) -> dict:
    return control.release_claim(tool.caller(), request.networkId, request.claimId)


handler = tool.handler
