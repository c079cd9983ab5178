"""AG2 wire, the notifier: the table's stream, filtered to new channel envelopes, in batches;
each envelope is sent as a ``notify`` frame to its recipients connected over AG2, whichever
surface wrote it (an AG2 client, ``say`` over HTTP, the MCP bridge, the sweep's closes)."""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from relaynet import observability
from relaynet.ag2 import ops, post
from relaynet.store import ag2 as store
from relaynet.store import table

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)

# The DynamoDB actions this function may use (its policy in template.yaml names exactly these):
# GetItem reads the channel head, BatchGetItem the bindings, PutItem takes an envelope's delivery marker
# (DeleteItem gives it back when a post fails); GetItem/DeleteItem/Query/BatchWriteItem forget a gone connection.
DYNAMODB_ACTIONS = ("GetItem", "BatchGetItem", "PutItem", "DeleteItem", "Query", "BatchWriteItem")


def record_handler(record: DynamoDBRecord) -> None:
    image = (record.raw_event.get("dynamodb") or {}).get("NewImage")
    if record.raw_event.get("eventName") != "INSERT" or not image:
        return
    item = table.decode(image)
    where = store.channel_of(item)
    if where is None or item.get("kind") != "envelope":
        return
    ops.deliver(where[0], where[1], item, post.endpoint())


def run(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)


handler = table.declares(DYNAMODB_ACTIONS, "ag2_notifier")(observability.instrument(run, name="ag2_notifier", source="stream"))
