"""control_get_thread: a thread with its messages (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import messages as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ThreadRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_get_thread", actions=DYNAMODB_ACTIONS)


@tool.route
def control_get_thread(request: Annotated[ThreadRequest, Body()]) -> dict:
    return control.get_thread(tool.caller(), request.networkId, request.threadId)


handler = tool.handler
