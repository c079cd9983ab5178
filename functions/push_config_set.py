"""PUT /v1/push: set this instance's push endpoint (docs/protocol.md 10.3, relaynet.push)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from relaynet import push
from relaynet.http.api import ToolApp
from relaynet.models.worker import PushConfigRequest

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# UpdateItem sets the config on the instance item (and refreshes presence).
DYNAMODB_ACTIONS = ("UpdateItem",)

tool = ToolApp("push_config_set", actions=DYNAMODB_ACTIONS)


@tool.route
def push_config_set(request: Annotated[PushConfigRequest, Body()]) -> dict:
    return push.set_config(tool.caller(), request)


handler = tool.handler
