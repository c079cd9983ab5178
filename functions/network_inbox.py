"""network_inbox: fetch undelivered messages, each exactly once (PROTOCOL.md 4.4)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import messaging
from relaynet.http.api import ToolApp
from relaynet.models.worker import InboxRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("Query", "BatchGetItem", "UpdateItem", "DeleteItem", "PutItem")

tool = ToolApp("network_inbox", actions=DYNAMODB_ACTIONS)


@tool.route
def network_inbox(request: Annotated[InboxRequest, Body()]) -> dict:
    return messaging.inbox(tool.caller())


handler = tool.handler
