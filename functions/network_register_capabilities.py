"""network_register_capabilities: declare this instance's capabilities (PROTOCOL.md 4.12)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import directory
from relaynet.http.api import ToolApp
from relaynet.models.worker import RegisterCapabilitiesRequest

tool = ToolApp("network_register_capabilities")


@tool.route
def network_register_capabilities(request: Annotated[RegisterCapabilitiesRequest, Body()]) -> dict:
    return directory.register_capabilities(tool.caller(), request)


handler = tool.handler
