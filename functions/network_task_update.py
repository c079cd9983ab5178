"""network_task_update: move a task through its state machine (PROTOCOL.md 4.8)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims, tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import TaskUpdateRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("network_task_update", actions=DYNAMODB_ACTIONS)


@tool.route
def network_task_update(request: Annotated[TaskUpdateRequest, Body()]) -> dict:
    return tasks.update(tool.caller(), request, on_terminal=claims.release_for_task)


handler = tool.handler
