"""The HTTP API Lambda authorizer (payload 2.0, simple responses; PROTOCOL.md 2, DESIGN.md auth).

It maps the bearer token's hash to its principal and hands it on in the request context. An
unknown token is still authorised with an anonymous context, so the tool handler answers 401 with
the protocol's error envelope (API Gateway's own 403 for ``isAuthorized: false`` would carry
neither the right status nor the envelope). Handlers trust only this context.

Each invocation logs one ``"authorize"`` line (relaynet.observability) with the correlation id of
the request it authorises and the caller's ``network``, ``caller`` and ``agent`` (none for an
unknown token); never the token.
"""

from relaynet import observability
from relaynet.identity import authorize, bearer
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# one GetItem of the token's hash.
DYNAMODB_ACTIONS = ("GetItem",)


def run(event, context):
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    token = bearer(headers.get("authorization") or next(iter(event.get("identitySource") or []), None))
    principal = authorize(token)
    observability.bind_caller(principal)
    return {"isAuthorized": True, "context": principal.context() if principal else {"kind": "anonymous"}}


handler = table.declares(DYNAMODB_ACTIONS, "authorizer")(observability.instrument(run, name="authorizer", source="authorizer"))
