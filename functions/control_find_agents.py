"""control_find_agents: candidates for a resource or action (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import observe as control
from relaynet.http.api import ToolApp
from relaynet.models.control import FindAgentsRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_find_agents", actions=DYNAMODB_ACTIONS)


@tool.route
def control_find_agents(request: Annotated[FindAgentsRequest, Body()]) -> dict:
    return control.find_agents(tool.caller(), request.networkId, request.resourceKey, request.action)


handler = tool.handler
