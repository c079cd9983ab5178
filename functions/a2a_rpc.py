"""POST /a2a/{network}/{agent} (behind the authorizer): A2A 1.0's JSON-RPC binding for one
agent definition (docs/protocol.md 13.2; relaynet.http.a2a)."""

from relaynet import observability
from relaynet.http import a2a
# at init, so a SnapStart snapshot holds them (relaynet.http.a2a names them, imports them lazily)
from relaynet.a2a import push, service  # noqa: F401
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# delegate, ask and cancel as the worker tools do, and the idempotency record of SendMessage.
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")

handler = table.declares(DYNAMODB_ACTIONS, "a2a_rpc")(observability.instrument(a2a.rpc, name="a2a_rpc", source="http"))
