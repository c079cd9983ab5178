"""network_publish_artifact: record an artifact by URI (PROTOCOL.md 4.11)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import artifacts
from relaynet.http.api import ToolApp
from relaynet.models.worker import PublishArtifactRequest

tool = ToolApp("network_publish_artifact")


@tool.route
def network_publish_artifact(request: Annotated[PublishArtifactRequest, Body()]) -> dict:
    return tool.once(request, lambda: artifacts.publish(tool.caller(), request))


handler = tool.handler
