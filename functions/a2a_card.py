"""GET /a2a/{network}/{agent}/.well-known/agent-card.json and GET /a2a/{network} (no auth): the
A2A Agent Cards of a network's agent definitions (docs/protocol.md 13.1; relaynet.a2a.card)."""

from relaynet import observability
from relaynet.http import a2a
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# the network's name item and agent item (GetItem), the directory partition (Query).
DYNAMODB_ACTIONS = ("GetItem", "Query")

handler = table.declares(DYNAMODB_ACTIONS, "a2a_card")(observability.instrument(a2a.cards, name="a2a_card", source="http"))
