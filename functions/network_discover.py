"""network_discover: agents, groups, resources, candidates (PROTOCOL.md 4.2)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import directory, tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import DiscoverRequest

tool = ToolApp("network_discover")


@tool.route
def network_discover(request: Annotated[DiscoverRequest, Body()]) -> dict:
    return directory.discover(tool.caller(), request, tasks.recent(tool.caller().network_id))


handler = tool.handler
