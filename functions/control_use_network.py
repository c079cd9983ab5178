"""control_use_network: set the active network (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import grants as control
from relaynet.http.api import ToolApp
from relaynet.models.control import UseNetworkRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "UpdateItem")

tool = ToolApp("control_use_network", actions=DYNAMODB_ACTIONS)


@tool.route
def control_use_network(request: Annotated[UseNetworkRequest, Body()]) -> dict:
    return control.use_network(tool.caller(), request.networkId)


handler = tool.handler
