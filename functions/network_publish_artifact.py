"""network_publish_artifact: record an artifact by URI (PROTOCOL.md 4.11)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import artifacts
from relaynet.http.api import ToolApp
from relaynet.models.worker import PublishArtifactRequest

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these,
# and relaynet.store.table refuses any other while the handler runs (UpdateItem covers the
# presence refresh; a tool taking an Idempotency-Key adds table.IDEMPOTENCY_ACTIONS).
DYNAMODB_ACTIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")

tool = ToolApp("network_publish_artifact", actions=DYNAMODB_ACTIONS)


@tool.route
def network_publish_artifact(request: Annotated[PublishArtifactRequest, Body()]) -> dict:
    return tool.once(request, lambda: artifacts.publish(tool.caller(), request))


handler = tool.handler
