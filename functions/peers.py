"""peers: find and describe peers (PROTOCOL.md 5.5)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.http.api import ToolApp
from relaynet.models.plugin import PeersRequest
from relaynet.plugin_tools import peers as plugin

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "UpdateItem")

tool = ToolApp("peers", actions=DYNAMODB_ACTIONS)


@tool.route
def peers(request: Annotated[PeersRequest, Body()]) -> dict:
    return plugin.peers_tool(tool.caller(), request)


handler = tool.handler
