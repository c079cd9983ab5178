"""control_stop_agent: two-step stop (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import instances as control
from relaynet.http.api import ToolApp
from relaynet.models.control import TwoStepRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("control_stop_agent", actions=DYNAMODB_ACTIONS)


@tool.route
def control_stop_agent(request: Annotated[TwoStepRequest, Body()]) -> dict:
    return control.stop_agent(tool.caller(), request.networkId, request.instanceId, request.confirmationId)


handler = tool.handler
