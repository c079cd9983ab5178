"""network_delegate: create a task and offer it (PROTOCOL.md 4.6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import DelegateRequest

tool = ToolApp("network_delegate")


@tool.route
def network_delegate(request: Annotated[DelegateRequest, Body()]) -> dict:
    return tool.once(request, lambda: tasks.delegate(tool.caller(), request))


handler = tool.handler
