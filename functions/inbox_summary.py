"""GET /v1/inbox/summary: undelivered messages by kind, delivering nothing (docs/protocol.md,
"Inbox summary"); one Query of the mailbox view (relaynet.mailbox)."""

from relaynet import mailbox
from relaynet.http.api import ToolApp

# The DynamoDB actions this function may use: its policy in template.yaml names exactly these
# (Query: the mailbox view; UpdateItem: the presence refresh every instance call makes).
DYNAMODB_ACTIONS = ("Query", "UpdateItem")

tool = ToolApp("inbox_summary", actions=DYNAMODB_ACTIONS)


@tool.route
def inbox_summary() -> dict:
    return mailbox.summary(tool.caller())


handler = tool.handler
