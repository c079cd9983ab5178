"""network_claim: take a glob-aware exclusive claim (PROTOCOL.md 4.9, 8)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import claims
from relaynet.http.api import ToolApp
from relaynet.models.worker import ClaimRequest

tool = ToolApp("network_claim")


@tool.route
def network_claim(request: Annotated[ClaimRequest, Body()]) -> dict:
    return claims.claim(tool.caller(), request)


handler = tool.handler
