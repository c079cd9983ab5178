"""control_network_status: counts of the network (PROTOCOL.md 6)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import control
import relaynet.channels  # noqa: F401  (what control uses for this tool: loaded at init, not on the first call)
import relaynet.claims  # noqa: F401
from relaynet.http.api import ToolApp
from relaynet.models.control import NoArgs

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (a tool taking an
# Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "Query")

tool = ToolApp("control_network_status", actions=DYNAMODB_ACTIONS)


@tool.route
def control_network_status(request: Annotated[NoArgs, Body()]) -> dict:
    return control.network_status(tool.caller(), request.networkId)


handler = tool.handler
