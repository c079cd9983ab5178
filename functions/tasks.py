"""tasks: progress, complete, list, status, wait, cancel (PROTOCOL.md 5.7)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims
from relaynet.http.api import ToolApp
from relaynet.models.plugin import TasksRequest
from relaynet.plugin_tools import tasks as plugin

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("tasks", actions=DYNAMODB_ACTIONS)


@tool.route
def tasks(request: Annotated[TasksRequest, Body()]) -> dict:
    return plugin.tasks_tool(tool.caller(), request, on_terminal=claims.release_for_task)


handler = tool.handler
