"""network_inbox: fetch undelivered messages, each exactly once (PROTOCOL.md 4.4)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import messaging
from relaynet.http.api import ToolApp
from relaynet.models.worker import InboxRequest

tool = ToolApp("network_inbox")


@tool.route
def network_inbox(request: Annotated[InboxRequest, Body()]) -> dict:
    return messaging.inbox(tool.caller())


handler = tool.handler
