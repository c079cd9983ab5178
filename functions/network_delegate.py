"""network_delegate: create a task and offer it (PROTOCOL.md 4.6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import DelegateRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("network_delegate", actions=DYNAMODB_ACTIONS)


@tool.route
def network_delegate(request: Annotated[DelegateRequest, Body()]) -> dict:
    return tool.once(request, lambda: tasks.delegate(tool.caller(), request))


handler = tool.handler
