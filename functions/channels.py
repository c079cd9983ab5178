"""channels: list, open, inspect and close channels (PROTOCOL.md 5.6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.http.api import ToolApp
from relaynet.models.plugin import ChannelsRequest
from relaynet.plugin_tools import channels as plugin

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("channels", actions=DYNAMODB_ACTIONS)


@tool.route
def channels(request: Annotated[ChannelsRequest, Body()]) -> dict:
    if request.action == "open":  # only opening creates something: it alone takes an Idempotency-Key
        return tool.once(request, lambda: plugin.channels_tool(tool.caller(), request))
    return plugin.channels_tool(tool.caller(), request)


handler = tool.handler
