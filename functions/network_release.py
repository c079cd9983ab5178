"""network_release: release a claim the caller holds (PROTOCOL.md 4.10)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims
from relaynet.http.api import ToolApp
from relaynet.models.worker import ReleaseRequest

tool = ToolApp("network_release")


@tool.route
def network_release(request: Annotated[ReleaseRequest, Body()]) -> dict:
    return claims.release(tool.caller(), request)


handler = tool.handler
