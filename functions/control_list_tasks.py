"""control_list_tasks: tasks, newest first (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import tasks as control
from relaynet.http.api import ToolApp
from relaynet.models.control import ListTasksRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_list_tasks", actions=DYNAMODB_ACTIONS)


@tool.route
def control_list_tasks(request: Annotated[ListTasksRequest, Body()]) -> dict:
    return control.list_tasks(tool.caller(), request.networkId, request.status, request.limit, request.cursor)


handler = tool.handler
