"""network_register_capabilities: declare this instance's capabilities (PROTOCOL.md 4.12)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import directory
from relaynet.http.api import ToolApp
from relaynet.models.worker import RegisterCapabilitiesRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("UpdateItem",)

tool = ToolApp("network_register_capabilities", actions=DYNAMODB_ACTIONS)


@tool.route
def network_register_capabilities(request: Annotated[RegisterCapabilitiesRequest, Body()]) -> dict:
    return directory.register_capabilities(tool.caller(), request)


handler = tool.handler
