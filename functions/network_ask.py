"""network_ask: send an ask into a thread (PROTOCOL.md 4.3)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import messaging
from relaynet.http.api import ToolApp
from relaynet.models.worker import AskRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("network_ask", actions=DYNAMODB_ACTIONS)


@tool.route
def network_ask(request: Annotated[AskRequest, Body()]) -> dict:
    return tool.once(request, lambda: messaging.ask(tool.caller(), request))


handler = tool.handler
