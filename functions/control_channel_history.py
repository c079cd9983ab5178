"""control_channel_history: read the owner conversation (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import conversation as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ChannelHistoryRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_channel_history", actions=DYNAMODB_ACTIONS)


@tool.route
def control_channel_history(request: Annotated[ChannelHistoryRequest, Body()]) -> dict:
    return control.channel_history(tool.caller(), request.conversationId, request.limit, request.cursor)


handler = tool.handler
