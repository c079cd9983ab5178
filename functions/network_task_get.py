"""network_task_get: read one task in full (PROTOCOL.md 4.7)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims, tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import TaskGetRequest

tool = ToolApp("network_task_get")


@tool.route
def network_task_get(request: Annotated[TaskGetRequest, Body()]) -> dict:
    return tasks.get(tool.caller(), request, claims.active_for_task)


handler = tool.handler
