"""botocore's client-side CPU per DynamoDB request: botocore's default configuration against
relaynet.store.table.client_config (issue 31: botocore was two thirds of a loaded hub's GIL time).

Run: ``.venv/bin/python benchmarks/probe_botocore.py [--requests 800] [--rounds 3]``.
Starts DynamoDB Local as ``relaynet serve`` does (a throwaway data directory), then for each
configuration and round sends ``--requests`` consistent GetItems and ``--requests``
TransactWriteItems of two actions (a put and an update) one after another, and prints the
client's CPU ms per request (this process's ``time.process_time``: signing, the User-Agent,
parameter validation, serialisation, urllib3, parsing) and the round trip's mean wall ms. The
store's own CPU is benchmarks/probe_store_cost.py's. Loopback only.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import boto3
from botocore.config import Config

from relaynet.store.table import client_config
from relaynet_local.dynamodb_local import DynamoDBLocal

TABLE = "probe"
KEY = {"PK": {"S": "P"}, "SK": {"S": "S"}}
ITEM = {**KEY, "body": {"S": "x" * 200}, "n": {"N": "3"},
        "m": {"M": {"a": {"S": "b"}, "l": {"L": [{"S": "q"}] * 5}}}}


def _client(endpoint: str, config: Config):
    return boto3.session.Session().client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                                          aws_access_key_id="local", aws_secret_access_key="local", config=config)


def _run(c, op: str, n: int, tag: str) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(n):
        if op == "GetItem":
            c.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True)
        else:
            c.transact_write_items(TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**ITEM, "SK": {"S": f"{tag}-{i}"}}}},
                {"Update": {"TableName": TABLE, "Key": KEY, "UpdateExpression": "SET n = n + :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
    return (time.process_time() - cpu0) / n * 1000, (time.perf_counter() - wall0) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    store = DynamoDBLocal(tempfile.mkdtemp(prefix="probe-botocore-")).start()
    try:
        configs = {"botocore default": Config(max_pool_connections=50), "client_config()": client_config()}
        setup = _client(store.endpoint, configs["botocore default"])
        setup.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                           KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                                      {"AttributeName": "SK", "KeyType": "RANGE"}],
                           AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                                 {"AttributeName": "SK", "AttributeType": "S"}])
        setup.put_item(TableName=TABLE, Item=ITEM)
        clients = {name: _client(store.endpoint, cfg) for name, cfg in configs.items()}
        for c in clients.values():
            _run(c, "GetItem", 100, "warm")  # the first requests load models and open connections
        print(f"client CPU ms per request ({args.requests} requests per cell; wall = mean round trip)")
        for rnd in range(args.rounds):
            for name, c in clients.items():
                cells = []
                for op in ("GetItem", "TransactWriteItems"):
                    cpu, wall = _run(c, op, args.requests, f"{rnd}-{name}")
                    cells.append(f"{op} {cpu:.3f} (wall {wall:.2f})")
                print(f"round {rnd}  {name:17s} " + "   ".join(cells), flush=True)
    finally:
        store.stop()


if __name__ == "__main__":
    main()
