"""say: post text in a channel when the adapter allows it (PROTOCOL.md 5.2)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.http.api import ToolApp
from relaynet.models.plugin import SayRequest
from relaynet.plugin_tools import channels as plugin

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("say", actions=DYNAMODB_ACTIONS)


@tool.route
def say(request: Annotated[SayRequest, Body()]) -> dict:
    return tool.once(request, lambda: plugin.say(tool.caller(), request))


handler = tool.handler
