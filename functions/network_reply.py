"""network_reply: reply to a thread's most recent other participant (PROTOCOL.md 4.5)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import messaging
from relaynet.http.api import ToolApp
from relaynet.models.worker import ReplyRequest

tool = ToolApp("network_reply")


@tool.route
def network_reply(request: Annotated[ReplyRequest, Body()]) -> dict:
    return tool.once(request, lambda: messaging.reply(tool.caller(), request))


handler = tool.handler
