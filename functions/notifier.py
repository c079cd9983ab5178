"""The webhook notifier (docs/protocol.md 10.3, 13.6): the table's DynamoDB stream, filtered to
new mailbox entries (instances' webhooks) and to the transitions of tasks with A2A push configs
(relaynet.a2a.push), in batches; each record's deliveries are attempted once (relaynet.push.notify)
and a failed attempt is left to the scheduled push-retry function, so no record waits for a
receiver. A record whose processing raises (a DynamoDB error) is reported with powertools'
batch utility as a partial-batch failure and retried by Lambda, then sent to the DLQ."""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from relaynet import observability, push
from relaynet.a2a import push as a2a_push
from relaynet.observability import logger
from relaynet.store import table

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# Query reads the directory, PutItem writes a delivery to retry, UpdateItem the push status.
DYNAMODB_ACTIONS = ("GetItem", "Query", "PutItem", "UpdateItem")


def record_handler(record: DynamoDBRecord) -> None:
    image = (record.raw_event.get("dynamodb") or {}).get("NewImage")
    if record.raw_event.get("eventName") != "INSERT" or not image:
        return
    entry = table.decode(image)
    outcomes = push.notify(entry)
    if outcomes:
        logger.info("webhook deliveries", extra={"outcomes": outcomes})
    a2a = a2a_push.notify(entry)
    if a2a:
        logger.info("a2a push notifications", extra={"outcomes": a2a})


def run(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)


handler = table.declares(DYNAMODB_ACTIONS, "notifier")(observability.instrument(run, name="notifier", source="stream"))
