"""DynamoDB Local's own cost per request kind: the store's share of a local hub's CPU per call
(issue 31's profile), measured on the hub's real table (template.yaml's keys and indexes).

Run: ``.venv/bin/python benchmarks/probe_store_cost.py [--requests 400] [--items 2000]``.
Starts DynamoDB Local as ``relaynet serve`` does (same options, a throwaway data directory),
creates the table, puts ``--items`` items spread over 16 partitions, then for each request kind
sends ``--requests`` requests one after another from one client and prints, per request: the
store's CPU ms (from /proc, its utime + stime over the run) and the round trip's p50 and p99
(ms). The kinds are the ones a tool call makes (benchmarks/requests_per_tool.py): a consistent
GetItem, the barrier's GetItem of a key nothing uses, DescribeLimits (no table), a BatchGetItem of 3 keys, a Query of one partition (Limit 10), a conditional PutItem,
an UpdateItem, and TransactWriteItems of 2 and of 4 actions. Loopback only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import boto3

from relaynet_local.dynamodb_local import DynamoDBLocal
from relaynet_local.template import create_table

ROOT = Path(__file__).resolve().parents[1]
TABLE = "probe"
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


def _key(pk: str, sk: str) -> dict:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def _kinds(c, n: int) -> dict:
    """Request kind -> a callable sending the i-th request of that kind."""
    def put(i: int) -> None:
        c.put_item(TableName=TABLE, Item={**_key(f"P#{i % 16}", f"new#{i}"), "v": {"S": "x" * 200}},
                   ConditionExpression="attribute_not_exists(PK)")

    def tx(width: int):
        def go(i: int) -> None:
            c.transact_write_items(TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key(f"P#{(i + j) % 16}", f"tx{width}#{i}#{j}"),
                                                       "v": {"S": "x" * 200}},
                         "ConditionExpression": "attribute_not_exists(PK)"}} for j in range(width)])
        return go

    return {
        "GetItem (consistent)": lambda i: c.get_item(TableName=TABLE, Key=_key(f"P#{i % 16}", f"item#{i % n:06d}"),
                                                     ConsistentRead=True),
        "GetItem (absent key: the barrier)": lambda i: c.get_item(
            TableName=TABLE, Key=_key("LOCAL#BARRIER", "LOCAL#BARRIER"), ConsistentRead=True),
        "DescribeLimits": lambda i: c.describe_limits(),
        "BatchGetItem (3 keys)": lambda i: c.batch_get_item(RequestItems={TABLE: {"Keys": [
            _key(f"P#{(i + j) % 16}", f"item#{(i + j) % n:06d}") for j in range(3)]}}),
        "Query (one partition, Limit 10)": lambda i: c.query(
            TableName=TABLE, KeyConditionExpression="PK = :p AND begins_with(SK, :s)", Limit=10,
            ExpressionAttributeValues={":p": {"S": f"P#{i % 16}"}, ":s": {"S": "item#"}}),
        "PutItem (conditional)": put,
        "UpdateItem": lambda i: c.update_item(TableName=TABLE, Key=_key(f"P#{i % 16}", f"item#{i % n:06d}"),
                                              UpdateExpression="SET n = if_not_exists(n, :z) + :one",
                                              ExpressionAttributeValues={":z": {"N": "0"}, ":one": {"N": "1"}}),
        "TransactWriteItems (2 puts)": tx(2),
        "TransactWriteItems (4 puts)": tx(4),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=400, help="requests per kind (default 400)")
    p.add_argument("--items", type=int, default=2000, help="items put first (default 2000)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-store-cost-") as tmp, DynamoDBLocal(tmp) as store:
        c = boto3.client("dynamodb", endpoint_url=store.endpoint, region_name="us-east-1",
                         aws_access_key_id="local", aws_secret_access_key="local")
        create_table(c, ROOT / "template.yaml", TABLE)
        for start in range(0, args.items, 25):
            c.batch_write_item(RequestItems={TABLE: [
                {"PutRequest": {"Item": {**_key(f"P#{i % 16}", f"item#{i:06d}"), "v": {"S": "x" * 200}}}}
                for i in range(start, min(start + 25, args.items))]})
        print(f"DynamoDB Local pid {store.pid}, {args.items} items; {args.requests} requests per kind, one client\n")
        print(f"{'request':<34} {'store CPU ms/req':>17} {'p50 ms':>8} {'p99 ms':>8}")
        for name, send in _kinds(c, args.items).items():
            for i in range(20):  # warm the JIT for this path
                send(10_000_000 + i)
            before, took = _cpu_ms(store.pid), []
            for i in range(args.requests):
                started = time.perf_counter()
                send(i)
                took.append((time.perf_counter() - started) * 1000)
            cpu = (_cpu_ms(store.pid) - before) / args.requests
            took.sort()
            print(f"{name:<34} {cpu:>17.2f} {statistics.median(took):>8.2f} {took[int(0.99 * len(took))]:>8.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
