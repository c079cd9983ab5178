"""network_discover: agents, groups, resources, candidates (PROTOCOL.md 4.2)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import directory, tasks
from relaynet.http.api import ToolApp
from relaynet.models.worker import DiscoverRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("Query", "UpdateItem")

tool = ToolApp("network_discover", actions=DYNAMODB_ACTIONS)


@tool.route
def network_discover(request: Annotated[DiscoverRequest, Body()]) -> dict:
    return directory.discover(tool.caller(), request, tasks.recent(tool.caller().network_id))


handler = tool.handler
