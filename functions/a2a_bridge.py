"""The A2A bridge, run on a schedule (docs/protocol.md 13.4, issue 28 part 3): tasks offered to a
remote A2A agent that is a member of a network are sent to it with SendMessage, followed with
GetTask, mirrored into the Relaynet task, and cancelled there when their creator cancels them
(relaynet.a2a.bridge)."""

from relaynet import observability
from relaynet.a2a import bridge
from relaynet.observability import logger
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")


def run(event, context):
    """One bridge run; its outcomes are logged (when it did anything) and counted as EMF metrics
    ``A2aBridge<Outcome>`` (A2aBridgeSent, A2aBridgeMoved, A2aBridgeUnreachable, ...).

    Two event sources (template.yaml): the schedule (every member; returns the counts) and the
    table's stream, filtered to new mailbox entries marked ``bridge: "a2a"`` (a task offered to a
    member), which runs only the members those entries are for, so an offer is sent at its write
    rather than at the next minute. A stream batch returns ``{"batchItemFailures": []}``: an
    error is counted and the schedule's next run retries it (the remote record is the lease)."""
    records = event.get("Records") if isinstance(event, dict) else None
    mailboxes = None if records is None else {r["dynamodb"]["NewImage"]["PK"]["S"] for r in records}
    stats = bridge.run(mailboxes=mailboxes)
    observability.count_outcomes("A2aBridge", stats)
    if stats["sent"] or stats["moved"] or stats["cancelled"] or stats["errors"] or stats["unreachable"]:
        logger.info("a2a bridge done", extra=stats)
    return stats if records is None else {"batchItemFailures": []}


handler = table.declares(DYNAMODB_ACTIONS, "a2a_bridge")(observability.instrument(run, name="a2a_bridge"))
