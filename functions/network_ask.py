"""network_ask: send an ask into a thread (PROTOCOL.md 4.3)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import messaging
from relaynet.http.api import ToolApp
from relaynet.models.worker import AskRequest

tool = ToolApp("network_ask")


@tool.route
def network_ask(request: Annotated[AskRequest, Body()]) -> dict:
    return tool.once(request, lambda: messaging.ask(tool.caller(), request))


handler = tool.handler
