"""The routing sweep (PROTOCOL.md 7) over a backlog: wall time, DynamoDB requests, items read.

Run: ``.venv/bin/python benchmarks/bench_sweep.py [--sizes 1000,10000] [--instances 200]
[--batch 500] [--runs 2]`` (``--runs 21`` drains a 10,000 backlog; runs stop early when one offers nothing). Not a test: it prints figures, it asserts nothing about time.

Each scenario seeds a fresh moto table (in-process) with one network: one ``boss`` instance,
an agent ``worker`` with ``--instances`` live instances, and an agent ``idle`` with none. Tasks
are written with BatchWriteItem exactly as the hub stores them (task item, its thread), then
``relaynet.sweep.run(batch=...)`` runs ``--runs`` times. Two hooks on the process's DynamoDB
client count, per run, the requests by operation (``before-call.dynamodb.*``), the items read
(``after-call``: ScannedCount of each Query/Scan, 1 per GetItem hit, BatchGetItem responses), and
the items written in transactions (``before-parameter-build``).

Scenarios, for each backlog size N:

- ``due``: N pending tasks for ``worker`` in the routing index's due range (tasks handed back
  by a stopped instance, or offers that all expired at once).
- ``parked``: N pending tasks for ``worker`` created while it had no live instance (parked in
  their wait group), and then the instances came up.
- ``stuck+due``: N tasks for ``idle`` (nobody will ever be eligible: parked) and 1,000 due
  tasks for ``worker``: what the stuck backlog costs the run (it should cost nothing).

Moto's TransactWriteItems deep-copies the whole table before every transaction (to roll back),
which makes it O(table) per call and would measure moto, not the sweep: unless ``--stock-moto``,
the backup is narrowed to the items the transaction touches (same all-or-nothing result).
Wall times are moto's in-process speed on this machine, not DynamoDB's; requests and items read
are what DynamoDB would see.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# --code DIR: measure another copy of the package (e.g. `git archive HEAD shared | tar -x -C /tmp/x`)
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv else ROOT / "shared"
sys.path.insert(0, str(CODE))
sys.path.insert(0, str(ROOT / "infra"))

os.environ.update(
    AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1", RELAYNET_TABLE="relaynet-bench", POWERTOOLS_LOG_LEVEL="ERROR",
)
os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from relaynet import clock, ids, routing, sweep  # noqa: E402
from relaynet.store import keys as k  # noqa: E402
from relaynet.store import table as t  # noqa: E402

TEMPLATE = ROOT / "template.yaml"
LEGACY = not hasattr(k, "wait_pk")


def route_pk(net: str, task_id: str) -> str:
    """The task's routing partition in the code measured (one ``ROUTE`` before the shards)."""
    return k.route_pk(net, task_id) if hasattr(k, "route_pk") else k.ROUTE


def waiting_pk(net: str, wait: str) -> str:
    return k.waiting_pk(net, wait) if hasattr(k, "waiting_pk") else k.WAITING
OBJECTIVE = ("Add a /health endpoint to the API service that answers 200 with the build version, "
             "wire it into the load balancer's health check, and cover it with a test. " * 2)


# --------------------------------------------------------------------------- moto, narrowed

def narrow_moto_transactions() -> None:
    """Back up only the touched items in moto's TransactWriteItems (see the module docstring)."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        saved = []
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = self.get_table(op["TableName"])
            attrs = op.get("Item") or op["Key"]
            keys = {a: attrs[a] for a in (table.hash_key_attr, table.range_key_attr) if a}
            hash_key, range_key = self.get_keys_value(table, keys)
            saved.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
        real = copy.deepcopy
        copy.deepcopy = lambda x, memo=None, _nil=[]: x if isinstance(x, Table) else real(x, memo)  # noqa: B006
        try:
            return original(self, transact_items)
        except Exception:
            for table, hash_key, range_key, before in reversed(saved):
                if before is None:
                    table.items.get(hash_key, {}).pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = before
            raise
        finally:
            copy.deepcopy = real

    DynamoDBBackend.transact_write_items = transact_write_items


# --------------------------------------------------------------------------- seeding

def batch_write(items: list[dict[str, Any]]) -> None:
    """BatchWriteItem, 25 at a time, straight through a client the meters do not see."""
    client = boto3.client("dynamodb")
    for start in range(0, len(items), 25):
        req = {t.table_name(): [{"PutRequest": {"Item": t.encode(i)}} for i in items[start:start + 25]]}
        while req:
            req = client.batch_write_item(RequestItems=req).get("UnprocessedItems") or None


def seed_network(instances: int) -> tuple[str, dict[str, Any]]:
    net = ids.new_id("net")
    now = clock.now_ms()
    pk = k.net(net)
    items: list[dict[str, Any]] = [
        {"PK": pk, "SK": k.META, "id": net, "name": "bench", "createdAt": clock.iso(now)},
        {"PK": k.network_name("bench")[0], "SK": k.network_name("bench")[1], "networkId": net},
    ]
    for name in ("boss", "worker", "idle"):
        items.append({"PK": pk, "SK": f"AGENT#{name}", "name": name, "description": f"the {name}",
                      "capabilities": [], "groups": [], "responsibilities": []})

    def inst(agent: str) -> dict[str, Any]:
        inst_id = ids.new_id("inst")
        return {"PK": pk, "SK": f"INST#{inst_id}", "type": "instance", "id": inst_id, "agent": agent,
                "status": "available", "capabilities": [], "createdAt": clock.iso(now), "lastSeenAt": now}

    boss = inst("boss")
    items += [boss] + [inst("worker") for _ in range(instances)]
    batch_write(items)
    return net, {"agent": "boss", "instanceId": boss["id"]}


def seed_tasks(net: str, creator: dict[str, Any], agent: str, n: int, parked: bool, start_ms: int) -> None:
    items = []
    wait = None
    for i in range(n):
        task_id, thread_id = ids.new_id("task"), ids.new_id("thr")
        at = clock.iso(start_ms + i)
        task = {"id": task_id, "networkId": net, "title": f"Task {i}", "objective": OBJECTIVE,
                "acceptanceCriteria": ["GET /health answers 200"], "state": "pending", "creator": creator,
                "target": {"agent": agent}, "createdAt": at, "updatedAt": at, "attempts": 0,
                "history": [{"state": "pending", "actor": creator, "at": at}], "progress": [],
                "threadId": thread_id, "version": 1}
        pk, sk = k.task(net, task_id)
        item = {**task, "PK": pk, "SK": sk, "GSI2PK": k.tasks_index(net), "GSI2SK": task_id}
        if parked and LEGACY:  # the sweep before wait groups: every pending task sits in the due range
            item.update(dueAt=start_ms + i, GSI1PK=route_pk(net, task_id), GSI1SK=k.route_sk(start_ms + i, net, task_id))
        elif parked:
            wait = routing.wait_key(task)
            item.update(wait=wait, parkedAt=start_ms + i, GSI1PK=k.wait_pk(net, wait),
                        GSI1SK=k.wait_sk(start_ms + i, task_id))
        else:
            item.update(dueAt=start_ms + i, GSI1PK=route_pk(net, task_id), GSI1SK=k.route_sk(start_ms + i, net, task_id))
        tpk, tsk = k.thread(net, thread_id)
        items += [item, {"PK": tpk, "SK": tsk, "id": thread_id, "subject": task["title"], "participants": {"boss"},
                         "taskId": task_id, "createdAt": at, "version": 0, "lastPoster": "boss"}]
    if parked and not LEGACY:
        mpk, msk = k.wait_marker(net, wait)
        probe_task = {"target": {"agent": agent}, "creator": creator}
        items.append({"PK": mpk, "SK": msk, "probe": routing.probe(probe_task), "networkId": net, "waitKey": wait,
                      "GSI1PK": waiting_pk(net, wait), "GSI1SK": k.waiting_sk(net, wait), "lastParkedAt": start_ms + n,
                      "gen": n})
    batch_write(items)


# --------------------------------------------------------------------------- meters

class Meter:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.items_read = 0
        self.items_written = 0

    def before(self, model, **_: Any) -> None:
        self.requests[model.name] += 1

    def build(self, params, model, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            self.items_written += len(params["TransactItems"])

    def after(self, http_response, parsed, model, **_: Any) -> None:
        if model.name in ("Query", "Scan"):
            self.items_read += int(parsed.get("ScannedCount", parsed.get("Count", 0)))
        elif model.name == "GetItem":
            self.items_read += 1 if parsed.get("Item") else 0
        elif model.name == "BatchGetItem":
            self.items_read += sum(len(v) for v in (parsed.get("Responses") or {}).values())

    def __enter__(self) -> "Meter":
        events = t.client().meta.events
        events.register("before-call.dynamodb.*", self.before)
        events.register("before-parameter-build.dynamodb.*", self.build)
        events.register("after-call.dynamodb.*", self.after)
        return self

    def __exit__(self, *exc: Any) -> None:
        events = t.client().meta.events
        events.unregister("before-call.dynamodb.*", self.before)
        events.unregister("before-parameter-build.dynamodb.*", self.build)
        events.unregister("after-call.dynamodb.*", self.after)


def scenario(name: str, n: int, instances: int, batch: int, runs: int) -> None:
    from relaynet_local.template import create_table

    with mock_aws():
        t.reset()
        create_table(boto3.client("dynamodb"), TEMPLATE, t.table_name())
        net, creator = seed_network(instances)
        start = clock.now_ms() - 10 * 60_000
        seeded = time.perf_counter()
        if name == "due":
            seed_tasks(net, creator, "worker", n, parked=False, start_ms=start)
        elif name == "parked":
            seed_tasks(net, creator, "worker", n, parked=True, start_ms=start)
        else:  # stuck+due: the stuck backlog is older than the due work
            seed_tasks(net, creator, "idle", n, parked=True, start_ms=start)
            seed_tasks(net, creator, "worker", 1000, parked=False, start_ms=start + n)
        seeded = time.perf_counter() - seeded
        print(f"\n{name}: {n:,} {'stuck (idle) tasks + 1,000 due worker tasks' if name == 'stuck+due' else name + ' tasks'}, "
              f"{instances} live instances, batch {batch} (seeded in {seeded:.1f} s)")
        totals = Meter()
        total_wall = total_offered = 0
        for run in range(1, runs + 1):
            with Meter() as m:
                began = time.perf_counter()
                stats = sweep.run(batch=batch, **({} if LEGACY else {"time_budget_s": 3600}))
                wall = time.perf_counter() - began
            offered = stats["offered"]
            per = (lambda x: f"{x / offered:.2f}") if offered else (lambda x: "-")
            reqs = ", ".join(f"{op} {c}" for op, c in sorted(m.requests.items()))
            moved = ", ".join(f"{key} {stats[key]}" for key in ("parked", "requeued", "lost_races") if key in stats)
            print(f"  run {run}: {wall:6.2f} s wall; offered {offered}, {moved}; "
                  f"{sum(m.requests.values())} requests ({reqs}); "
                  f"{m.items_read} items read; per offered task: {per(sum(m.requests.values()))} requests, "
                  f"{per(m.items_read)} items read, {per(m.items_written)} items written")
            totals.requests.update(m.requests)
            totals.items_read += m.items_read
            totals.items_written += m.items_written
            total_wall += wall
            total_offered += offered
            if not offered and not stats.get("expired"):
                break
        if run > 2 and total_offered:
            print(f"  all {run} runs: {total_wall:.2f} s wall; offered {total_offered}; per offered task: "
                  f"{sum(totals.requests.values()) / total_offered:.3f} requests, "
                  f"{totals.items_read / total_offered:.2f} items read, {totals.items_written / total_offered:.2f} items written")
        t.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="backlog sizes, comma-separated")
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--runs", type=int, default=2, help="sweep runs per scenario")
    parser.add_argument("--scenarios", default="due,parked,stuck+due")
    parser.add_argument("--stock-moto", action="store_true", help="keep moto's whole-table copy per transaction")
    parser.add_argument("--code", help="the shared/ directory whose relaynet to measure (default: this checkout)")
    args = parser.parse_args()
    print(f"relaynet from {CODE}{' (no wait groups: stuck tasks stay in the due range)' if LEGACY else ''}")
    if not args.stock_moto:
        narrow_moto_transactions()
    for n in (int(s) for s in args.sizes.split(",")):
        for name in args.scenarios.split(","):
            scenario(name, n, args.instances, args.batch, args.runs)


if __name__ == "__main__":
    main()
