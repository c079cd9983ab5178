"""control_channel_send: write to the owner conversation (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import conversation as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ChannelSendRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("PutItem",)

tool = ToolApp("control_channel_send", actions=DYNAMODB_ACTIONS)


@tool.route
def control_channel_send(request: Annotated[ChannelSendRequest, Body()]) -> dict:
    return control.channel_send(tool.caller(), request.body, request.conversationId)


handler = tool.handler
