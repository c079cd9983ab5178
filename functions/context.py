"""context: search and quote what the caller may see (PROTOCOL.md 5.8)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.http.api import ToolApp
from relaynet.models.plugin import ContextRequest
from relaynet.plugin_tools import context as plugin

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "UpdateItem")

tool = ToolApp("context", actions=DYNAMODB_ACTIONS)


@tool.route
def context(request: Annotated[ContextRequest, Body()]) -> dict:
    return plugin.context_tool(tool.caller(), request)


handler = tool.handler
