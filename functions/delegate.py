"""delegate: a one-shot consult that waits for the reply (PROTOCOL.md 5.4)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.http.api import ToolApp
from relaynet.models.plugin import ConsultRequest
from relaynet.plugin_tools import consult as plugin

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem")

tool = ToolApp("delegate", actions=DYNAMODB_ACTIONS)


@tool.route
def delegate(request: Annotated[ConsultRequest, Body()]) -> dict:
    return tool.once(request, lambda: plugin.delegate(tool.caller(), request))


handler = tool.handler
