"""control_task_status: one task in full (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import control
import relaynet.claims, relaynet.tasks  # noqa: F401  (what control uses for this tool: loaded at init, not on the first call)
from relaynet.http.api import ToolApp
from relaynet.models.control import TaskRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_task_status", actions=DYNAMODB_ACTIONS)


@tool.route
def control_task_status(request: Annotated[TaskRequest, Body()]) -> dict:
    return control.task_status(tool.caller(), request.networkId, request.taskId)


handler = tool.handler
