"""network_task_get: read one task in full (PROTOCOL.md 4.7)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims, tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import TaskGetRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("Query", "UpdateItem")

tool = ToolApp("network_task_get", actions=DYNAMODB_ACTIONS)


@tool.route
def network_task_get(request: Annotated[TaskGetRequest, Body()]) -> dict:
    return tasks.get(tool.caller(), request, claims.active_for_task)


handler = tool.handler
