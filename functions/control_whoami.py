"""control_whoami: who the representative is (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet.control import grants as control
from relaynet.http.api import ToolApp
from relaynet.models.control import NoArgs

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem")

tool = ToolApp("control_whoami", actions=DYNAMODB_ACTIONS)


@tool.route
def control_whoami(request: Annotated[NoArgs, Body()]) -> dict:
    return control.whoami(tool.caller())


handler = tool.handler
