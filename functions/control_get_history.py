"""control_get_history: recent events, newest first (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import observe as control
from relaynet.http.api import ToolApp
from relaynet.models.control import HistoryRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_get_history", actions=DYNAMODB_ACTIONS)


@tool.route
def control_get_history(request: Annotated[HistoryRequest, Body()]) -> dict:
    return control.history(tool.caller(), request.networkId, request.limit, request.cursor)


handler = tool.handler
