"""The A2A bridge, run on a schedule (docs/protocol.md 13.4, issue 28 part 3): tasks offered to a
remote A2A agent that is a member of a network are sent to it with SendMessage, followed with
GetTask, mirrored into the Relaynet task, and cancelled there when their creator cancels them
(relaynet.a2a.bridge)."""

from relaynet import observability
from relaynet.a2a import bridge
from relaynet.observability import logger
from relaynet.store import mailboxes as mail_store
from relaynet.store import table

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these).
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")


def run(event, context):
    """One bridge run; its outcomes are logged (when it did anything) and counted as EMF metrics
    ``A2aBridge<Outcome>`` (A2aBridgeSent, A2aBridgeMoved, A2aBridgeUnreachable, ...).

    Two event sources (template.yaml): the schedule (every member; returns the counts) and the
    table's stream, filtered to new mailbox entries marked ``bridge: "a2a"`` (a task offered to a
    member) and to push receipts (``a2aPushed``: a remote's notification the token proved), which
    runs only the members those are for, so an offer is sent at its write and a notified change
    followed at once rather than at the next minute. A stream batch returns
    ``{"batchItemFailures": []}``: an error is counted and the schedule's next run retries it
    (the remote record is the lease; a receipt's task is polled anyway)."""
    records = event.get("Records") if isinstance(event, dict) else None
    if records is None:
        stats = bridge.run()
    else:
        images = [table.decode(r["dynamodb"]["NewImage"]) for r in records]
        stats = bridge.run(mailboxes={mail_store.mailbox_key(i) for i in images if not i.get("a2aPushed")},
                           pushed=[i for i in images if i.get("a2aPushed")])
    observability.count_outcomes("A2aBridge", stats)
    if any(stats[k] for k in ("sent", "moved", "cancelled", "pushed", "errors", "unreachable")):
        logger.info("a2a bridge done", extra=stats)
    return stats if records is None else {"batchItemFailures": []}


handler = table.declares(DYNAMODB_ACTIONS, "a2a_bridge")(observability.instrument(run, name="a2a_bridge", source="schedule"))
