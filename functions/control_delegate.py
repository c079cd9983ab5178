"""control_delegate: a task created by the representative (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import tasks as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ControlDelegateRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("control_delegate", actions=DYNAMODB_ACTIONS)


@tool.route
def control_delegate(request: Annotated[ControlDelegateRequest, Body()]) -> dict:
    return tool.once(request, lambda: control.delegate(tool.caller(), request))


handler = tool.handler
