"""control_list_agents: definitions with instances (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import observe as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ListAgentsRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_list_agents", actions=DYNAMODB_ACTIONS)


@tool.route
def control_list_agents(request: Annotated[ListAgentsRequest, Body()]) -> dict:
    return control.list_agents(tool.caller(), request.networkId, request.limit, request.cursor)


handler = tool.handler
