"""network_whoami: who the calling instance is (PROTOCOL.md 4.1)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import directory
from relaynet.http.api import ToolApp
from relaynet.models.worker import WhoamiRequest

tool = ToolApp("network_whoami")


@tool.route
def network_whoami(request: Annotated[WhoamiRequest, Body()]) -> dict:
    return directory.whoami(tool.caller())


handler = tool.handler
