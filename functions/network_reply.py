"""network_reply: reply to a thread's most recent other participant (PROTOCOL.md 4.5)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import messaging
from relaynet.http.api import ToolApp
from relaynet.models.worker import ReplyRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("network_reply", actions=DYNAMODB_ACTIONS)


@tool.route
def network_reply(request: Annotated[ReplyRequest, Body()]) -> dict:
    return tool.once(request, lambda: messaging.reply(tool.caller(), request))


handler = tool.handler
