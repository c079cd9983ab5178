"""network_whoami: who the calling instance is (PROTOCOL.md 4.1)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import directory
from relaynet.http.api import ToolApp
from relaynet.models.worker import WhoamiRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("BatchGetItem", "UpdateItem")

tool = ToolApp("network_whoami", actions=DYNAMODB_ACTIONS)


@tool.route
def network_whoami(request: Annotated[WhoamiRequest, Body()]) -> dict:
    return directory.whoami(tool.caller())


handler = tool.handler
