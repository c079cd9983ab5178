"""DELETE /v1/push: remove this instance's own push endpoint (docs/protocol.md 10.3)."""

from relaynet import push
from relaynet.http.api import ToolApp

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
DYNAMODB_ACTIONS = ("UpdateItem",)

tool = ToolApp("push_config_delete", actions=DYNAMODB_ACTIONS)


@tool.route
def push_config_delete() -> dict:
    return push.delete_config(tool.caller())


handler = tool.handler
