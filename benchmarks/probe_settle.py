"""Which requests make DynamoDB Local's last transaction durable: the measurement behind
relaynet_local.dynamodb_local.TransactionBarrier (docs/architecture.md "transactions are settled
before the answer").

Run: ``.venv/bin/python benchmarks/probe_settle.py [--trials 21] [--after none,get,query,...]``.
For each kind of follow-up request (``get``, ``query``, ``update``, ``batchget``, ``cancelled``,
``describe-limits``, ``list-tables``, ``describe-table``; ``other-*``: sent by another client, on
its own connection), ``--trials`` times: one TransactWriteItems putting a new item,
then that request (``none``: nothing), then ``kill -9`` of the store at once; the supervisor
restarts it on the same data directory and the item is looked for. Prints how many were kept.
Loopback only; a throwaway data directory; about 3 s per trial.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time

import boto3

from relaynet_local.dynamodb_local import DynamoDBLocal

TABLE = "probe"


def _client(store: DynamoDBLocal):
    return boto3.client("dynamodb", endpoint_url=store.endpoint, region_name="us-east-1",
                        aws_access_key_id="local", aws_secret_access_key="local")


def _key(pk: str, sk: str) -> dict:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def _follow(c, after: str, sk: str, other=None) -> None:
    """The request sent after the transaction (``other-*``: by ``other``, another client on
    its own connection, as another thread of the hub sends it)."""
    if after.startswith("other-"):
        _follow(other, after[len("other-"):], sk)
    elif after == "get":
        c.get_item(TableName=TABLE, Key=_key("X", "X"), ConsistentRead=True)
    elif after == "query":
        c.query(TableName=TABLE, KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "Q"}})
    elif after == "update":
        c.update_item(TableName=TABLE, Key=_key("U", "U"), UpdateExpression="SET n = :n",
                      ExpressionAttributeValues={":n": {"N": "1"}})
    elif after == "batchget":
        c.batch_get_item(RequestItems={TABLE: {"Keys": [_key("X", "X")]}})
    elif after == "describe-limits":  # no table, no item: served without reading SQLite
        c.describe_limits()
    elif after == "list-tables":
        c.list_tables(Limit=1)
    elif after == "describe-table":
        c.describe_table(TableName=TABLE)
    elif after == "cancelled":
        try:
            c.transact_write_items(TransactItems=[{"ConditionCheck": {
                "TableName": TABLE, "Key": _key("P", sk), "ConditionExpression": "attribute_not_exists(PK)"}}])
        except c.exceptions.TransactionCanceledException:
            pass
    elif after != "none":
        raise SystemExit(f"unknown --after {after!r}")


def _kill_and_wait(store: DynamoDBLocal) -> None:
    old = store.pid
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while store.pid in (None, old):
        if time.monotonic() > deadline:
            raise SystemExit("the store was not restarted within 60 s")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=21)
    ap.add_argument("--after", default="none,get,query,update,batchget,cancelled,other-get,other-query")
    args = ap.parse_args()
    store = DynamoDBLocal(tempfile.mkdtemp(prefix="probe-settle-")).start()
    try:
        c = _client(store)
        c.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                       KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
                       AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                             {"AttributeName": "SK", "AttributeType": "S"}])
        for after in args.after.split(","):
            kept = 0
            for i in range(args.trials):
                sk = f"{after}-{i}"
                c.transact_write_items(TransactItems=[{"Put": {"TableName": TABLE, "Item": _key("P", sk)}}])
                _follow(c, after, sk, _client(store))
                _kill_and_wait(store)
                c = _client(store)
                for _ in range(200):
                    try:
                        found = "Item" in c.get_item(TableName=TABLE, Key=_key("P", sk), ConsistentRead=True)
                        break
                    except Exception:  # noqa: BLE001 - the restarted store is not answering yet
                        time.sleep(0.1)
                else:
                    raise SystemExit("the restarted store never answered")
                kept += found
            print(f"after {after:10} kept {kept} of {args.trials}", flush=True)
    finally:
        store.stop()


if __name__ == "__main__":
    main()
