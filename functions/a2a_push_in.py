"""POST /a2a/{network}/push/{instance}/{task} (no auth: the notification's token proves it): a
remote A2A agent's push notification about a task the A2A bridge sent it (docs/protocol.md 13.4;
relaynet.http.a2a.push_in, relaynet.a2a.bridge.receive_push)."""

from relaynet import observability
from relaynet.http import a2a
# at init, so a SnapStart snapshot holds them (relaynet.http.a2a names them, imports them lazily)
from relaynet.a2a import bridge  # noqa: F401
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# the remote record (GetItem) and the push receipt (PutItem).
DYNAMODB_ACTIONS = ("GetItem", "PutItem")

handler = table.declares(DYNAMODB_ACTIONS, "a2a_push_in")(observability.instrument(a2a.push_in, name="a2a_push_in", source="http"))
