"""control_ask: an ask sent by the representative (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import messages as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ControlAskRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("control_ask", actions=DYNAMODB_ACTIONS)


@tool.route
def control_ask(request: Annotated[ControlAskRequest, Body()]) -> dict:
    return tool.once(request, lambda: control.ask(tool.caller(), request))


handler = tool.handler
