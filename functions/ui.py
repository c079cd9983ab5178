"""GET /v1/ui and GET /v1/ui/{asset}, no auth: the operator page and its files (issue 15).

The page holds no data; it calls the control tools with the representative token the operator
types in (relaynet.http.ui says why it can be public and which headers it sends).
"""

from relaynet import observability
from relaynet.http.ui import respond

# No DynamoDB access: its function has no policy in template.yaml.
DYNAMODB_ACTIONS = ()


def run(event, context):
    return respond(event)


# trace=False: no store call to trace, and no settings to load (relaynet.observability.instrument)
handler = observability.instrument(run, name="ui", source="http", trace=False)
