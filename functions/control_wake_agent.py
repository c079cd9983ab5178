"""control_wake_agent: a notice to an agent or instance (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import messages as control
from relaynet.http.api import ToolApp
from relaynet.models.control import WakeRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "PutItem")

tool = ToolApp("control_wake_agent", actions=DYNAMODB_ACTIONS)


@tool.route
def control_wake_agent(request: Annotated[WakeRequest, Body()]) -> dict:
    return control.wake(tool.caller(), request)


handler = tool.handler
