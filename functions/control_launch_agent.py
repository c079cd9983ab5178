"""control_launch_agent: a new instance and its token (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import instances as control
from relaynet.http.api import ToolApp
from relaynet.models.control import LaunchRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "PutItem", "ConditionCheckItem")

tool = ToolApp("control_launch_agent", actions=DYNAMODB_ACTIONS)


@tool.route
def control_launch_agent(request: Annotated[LaunchRequest, Body()]) -> dict:
    return control.launch_agent(tool.caller(), request.networkId, request.agentName)


handler = tool.handler
