"""The scale simulation (issue 16): the sharded routing index and the sweep over 1,000 networks, on
DynamoDB Local. Prints figures; asserts nothing about time.

Run: ``.venv/bin/python benchmarks/bench_scale.py [--networks 1000] [--instances 10]
[--pending 1000,10000,100000] [--offered 10] [--batch 500] [--runs 2]`` (``make bench-scale``).

It starts its own DynamoDB Local (as ``relaynet serve`` does, relaynet_local.dynamodb_local) on a
loopback port with a data directory of its own, removed afterwards (``--data-root``: /dev/shm, a
tmpfs, where there is one, else /tmp: on this machine's disk DynamoDB Local's SQLite syncs each
item, 63 items/s measured against 312 on tmpfs, which would make the 100,000-task step take half
an hour), and creates the table from template.yaml. It seeds with BatchWriteItem, exactly as the hub stores them: ``--networks``
networks, each with a ``boss`` agent and a ``worker`` agent of ``--instances`` live instances;
``--offered`` tasks per network offered to a worker and not yet expired (in the routing index, not
due); then pending tasks for ``worker``, due now, spread evenly over the networks, grown step by
step to each count of ``--pending`` (due times interleave the networks, so the oldest tasks are
every network's). At each step ``relaynet.sweep.run(batch=...)`` runs ``--runs`` times.

Printed, per step and run: tasks offered; DynamoDB requests and items read (ScannedCount of each
Query) per offered task, hooked on the process's client (``before-call`` / ``after-call``);
wall time (this shared machine's DynamoDB Local, not DynamoDB's). Then, over everything written:
the largest item written (DynamoDB's item-size rules: attribute names plus values), and the
routing writes (writes of items carrying a GSI1 routing key: ``ROUTE#<n>``, ``WAITING#<n>``,
``WAIT#...``) per GSI1 partition: the busiest partition's share, with the 16 shards, and what it
would be with 1 (before issue 16), 8 and 32 shards for the same writes (the same hash, another
modulus).

``--claim-agents N`` (issue 25) adds the claims step: one network of N instances claiming across a
tree of ``--claim-dirs`` directories (``d<i>/s<j>``, 10 subdirectories per top directory), on
``--claim-threads`` threads, ``--claim-rounds`` rounds each: a claim of a random directory
(``d3/s7/**``) or of a file in it (``d3/s7/f12.py``), then its release. Printed: claims granted
and refused, the writes (Put, Update, Delete, transactional or not, cancelled attempts included)
per item, and the busiest item's share of them. Before issue 25 every claim attempt wrote the
network's claims HEAD: 1,000 x 3 over 200 directories, it took 12,606 of 46,602 writes (0.27);
after, the busiest item is one directory's mark (0.001). ``--skip-sweep`` runs only this step.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
sys.path.insert(0, str(ROOT / "infra"))

os.environ.update(
    AWS_ACCESS_KEY_ID="local", AWS_SECRET_ACCESS_KEY="local", AWS_DEFAULT_REGION="us-east-1",
    RELAYNET_TABLE="relaynet-bench-scale", POWERTOOLS_LOG_LEVEL="ERROR",
)
os.environ.pop("AWS_SESSION_TOKEN", None)

import boto3  # noqa: E402

from relaynet import clock, ids, sweep  # noqa: E402
from relaynet.config import settings  # noqa: E402
from relaynet.store import keys as k  # noqa: E402
from relaynet.store import table as t  # noqa: E402

TEMPLATE = ROOT / "template.yaml"
OBJECTIVE = ("Add a /health endpoint to the API service that answers 200 with the build version, "
             "wire it into the load balancer's health check, and cover it with a test.")
ROUTING_PREFIXES = ("ROUTE", "WAITING", "WAIT#")


# --------------------------------------------------------------------------- sizes

def _value_size(v: dict[str, Any]) -> int:
    """DynamoDB's size of one attribute value (its published rules, approximately for numbers)."""
    (kind, x), = v.items()
    if kind == "S":
        return len(x.encode())
    if kind == "N":
        return (len(x.lstrip("-").replace(".", "")) + 1) // 2 + 1
    if kind == "B":
        return len(x)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in x)
    if kind == "NS":
        return sum((len(n) + 1) // 2 + 1 for n in x)
    if kind == "L":
        return 3 + sum(1 + _value_size(e) for e in x)
    if kind == "M":
        return 3 + sum(len(name.encode()) + 1 + _value_size(e) for name, e in x.items())
    return len(str(x))


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size of an item in its wire format (attribute names plus values)."""
    return sum(len(name.encode()) + _value_size(v) for name, v in item.items())


# --------------------------------------------------------------------------- meters

class Meter:
    """Requests, items read, routing writes per GSI1 partition, writes per item and the largest
    item written, from hooks on the process's DynamoDB client (the sweep's threads share it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.item_writes: Counter[tuple[str, str]] = Counter()  # (PK, SK) -> writes
        self.requests: Counter[str] = Counter()
        self.items_read = 0
        self.routing: Counter[str] = Counter()  # GSI1PK -> writes
        self.routing_ids: list[tuple[str, str, str]] = []  # (kind, net, id) of each routing write
        self.largest = (0, "")

    def before(self, model, **_: Any) -> None:
        with self.lock:
            self.requests[model.name] += 1

    def build(self, params, model, **_: Any) -> None:
        self._count_item_writes(params, model.name)
        writes = []
        if model.name == "TransactWriteItems":
            for action in params["TransactItems"]:
                if "Put" in action:
                    writes.append(action["Put"]["Item"])
                elif "Update" in action:
                    writes += _marker(action["Update"])
        elif model.name == "PutItem":
            writes.append(params["Item"])
        elif model.name == "UpdateItem":
            writes += _marker(params)
        elif model.name == "BatchWriteItem":
            for reqs in params["RequestItems"].values():
                writes += [r["PutRequest"]["Item"] for r in reqs if "PutRequest" in r]
        with self.lock:
            for item in writes:
                self.note(item)

    def _count_item_writes(self, params: dict[str, Any], name: str) -> None:
        keys = []
        if name == "TransactWriteItems":
            for action in params["TransactItems"]:
                for kind in ("Put", "Update", "Delete"):
                    if kind in action:
                        body = action[kind]
                        keys.append(body["Item"] if kind == "Put" else body["Key"])
        elif name == "PutItem":
            keys.append(params["Item"])
        elif name in ("UpdateItem", "DeleteItem"):
            keys.append(params["Key"])
        with self.lock:
            for key in keys:
                self.item_writes[(key["PK"]["S"], key["SK"]["S"])] += 1

    def note(self, item: dict[str, Any]) -> None:
        size = item_size(item)
        if size > self.largest[0]:
            self.largest = (size, item["PK"]["S"] + " / " + item["SK"]["S"])
        gpk = (item.get("GSI1PK") or {}).get("S", "")
        if gpk.startswith(ROUTING_PREFIXES):
            self.routing[gpk] += 1
            if gpk.startswith("ROUTE"):
                sk = item["GSI1SK"]["S"].split("#")  # <due>#<net>#<task>
                self.routing_ids.append(("ROUTE", sk[1], sk[2]))
            elif gpk.startswith("WAITING"):
                self.routing_ids.append(("WAITING", item["networkId"]["S"], item["waitKey"]["S"]))

    def after(self, parsed, model, **_: Any) -> None:
        if model.name in ("Query", "Scan"):
            with self.lock:
                self.items_read += int(parsed.get("ScannedCount", parsed.get("Count", 0)))

    def attach(self, client) -> None:
        events = client.meta.events
        events.register("before-call.dynamodb.*", self.before)
        events.register("before-parameter-build.dynamodb.*", self.build)
        events.register("after-call.dynamodb.*", self.after)

    def detach(self, client) -> None:
        events = client.meta.events
        events.unregister("before-call.dynamodb.*", self.before)
        events.unregister("before-parameter-build.dynamodb.*", self.build)
        events.unregister("after-call.dynamodb.*", self.after)


def _marker(update: dict[str, Any]) -> list[dict[str, Any]]:
    """A wait-group marker's refresh (relaynet.tasks.touch_marker sets its GSI1 key) as the item
    fields the meter reads; nothing for other updates."""
    vals = update.get("ExpressionAttributeValues") or {}
    if ":gpk" not in vals:
        return []
    return [{**update["Key"], "GSI1PK": vals[":gpk"], "networkId": vals[":net"], "waitKey": vals[":wk"]}]


def busiest_share(meter: Meter, shards: int) -> float:
    """The busiest routing partition's share of ``meter``'s routing writes had the index
    ``shards`` shards (keys.shard's hash, another modulus; 1 = the single ``ROUTE`` of before)."""
    counts: Counter[str] = Counter()
    for kind, net, ident in meter.routing_ids:
        n = int.from_bytes(hashlib.sha256(f"{net}#{ident}".encode()).digest()[:4], "big") % shards
        counts[f"{kind}#{n}"] += 1
    for gpk, n in meter.routing.items():  # parked tasks: one partition per wait group, whatever the shards
        if gpk.startswith("WAIT#"):
            counts[gpk] += n
    total = sum(counts.values())
    return max(counts.values()) / total if total else 0.0


# --------------------------------------------------------------------------- seeding

class Seeder:
    """BatchWriteItem through a client of its own, on a few threads (25 items a request)."""

    def __init__(self, meter: Meter) -> None:
        self.client = boto3.client("dynamodb")
        meter.attach(self.client)  # seeded tasks are the hub's delegations: their routing writes count
        self.meter = meter

    def put(self, items: list[dict[str, Any]]) -> None:
        chunks = [items[i:i + 25] for i in range(0, len(items), 25)]

        def write(chunk: list[dict[str, Any]]) -> None:
            req = {t.table_name(): [{"PutRequest": {"Item": t.encode(i)}} for i in chunk]}
            while req:
                req = self.client.batch_write_item(RequestItems=req).get("UnprocessedItems") or None

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, chunks))


def seed_networks(seeder: Seeder, networks: int, instances: int, now: int) -> list[dict[str, Any]]:
    nets, items = [], []
    for n in range(networks):
        net = ids.new_id("net")
        pk = k.net(net)
        items += [{"PK": pk, "SK": k.META, "id": net, "name": f"net{n}", "createdAt": clock.iso(now)},
                  {"PK": k.network_name(f"net{n}")[0], "SK": k.network_name(f"net{n}")[1], "networkId": net}]
        for name in ("boss", "worker"):
            items.append({"PK": pk, "SK": f"AGENT#{name}", "name": name, "description": f"the {name}",
                          "capabilities": [], "groups": [], "responsibilities": []})
        workers = []
        for _ in range(instances):
            inst_id = ids.new_id("inst")
            workers.append(inst_id)
            items.append({"PK": pk, "SK": f"INST#{inst_id}", "type": "instance", "id": inst_id, "agent": "worker",
                          "status": "available", "capabilities": [], "createdAt": clock.iso(now),
                          "lastSeenAt": now + 3_600_000})  # live for the whole benchmark
        nets.append({"id": net, "creator": {"agent": "boss", "instanceId": ids.new_id("inst")}, "workers": workers})
    seeder.put(items)
    return nets


def task_item(net: dict[str, Any], n: int, state: str, due: int, now: int) -> dict[str, Any]:
    task_id = ids.new_id("task")
    at = clock.iso(now)
    task = {"id": task_id, "networkId": net["id"], "title": f"Task {n}", "objective": OBJECTIVE,
            "acceptanceCriteria": ["GET /health answers 200"], "state": state, "creator": net["creator"],
            "target": {"agent": "worker"}, "createdAt": at, "updatedAt": at, "attempts": 0,
            "history": [{"state": "pending", "actor": net["creator"], "at": at}], "progress": [],
            "threadId": ids.new_id("thr"), "version": 1}
    pk, sk = k.task(net["id"], task_id)
    item = {**task, "PK": pk, "SK": sk, "GSI2PK": k.tasks_index(net["id"]), "GSI2SK": task_id,
            "GSI1PK": k.route_pk(net["id"], task_id), "GSI1SK": k.route_sk(due, net["id"], task_id)}
    if state == "offered":
        inst = net["workers"][n % len(net["workers"])]
        item.update(assignee=inst, offerExpiresAt=due, attempts=1,
                    history=[*task["history"], {"state": "offered", "actor": {"system": "router"}, "at": at,
                                                "reason": f"offered to {inst}"}])
    else:
        item["dueAt"] = due
    return item


def seed_pending(seeder: Seeder, nets: list[dict[str, Any]], start: int, count: int, due0: int, now: int) -> None:
    """Pending tasks ``start`` .. ``start + count - 1``, task i of network i % networks, due in
    that order (1 ms apart) from ``due0``."""
    items = [task_item(nets[i % len(nets)], i, "pending", due0 + i, now) for i in range(start, start + count)]
    seeder.put(items)


# --------------------------------------------------------------------------- the runs

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", type=int, default=1000)
    parser.add_argument("--instances", type=int, default=10, help="worker instances per network")
    parser.add_argument("--pending", default="1000,10000,100000", help="pending-task counts to grow through")
    parser.add_argument("--offered", type=int, default=10, help="offered (not yet due) tasks per network")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--runs", type=int, default=2, help="sweep runs per step")
    parser.add_argument("--claim-agents", type=int, default=0, help="instances of the claims step (0: no step)")
    parser.add_argument("--claim-dirs", type=int, default=200, help="directories of the claims step's tree")
    parser.add_argument("--claim-rounds", type=int, default=3, help="claims (and releases) per instance")
    parser.add_argument("--claim-threads", type=int, default=16, help="threads making the claims")
    parser.add_argument("--skip-sweep", action="store_true", help="run only the claims step")
    parser.add_argument("--data-root", default="/dev/shm" if os.path.isdir("/dev/shm") else "/tmp",
                        help="where DynamoDB Local's data directory is made (and removed)")
    args = parser.parse_args()

    from relaynet_local.dynamodb_local import DynamoDBLocal
    from relaynet_local.template import create_table

    data_dir = tempfile.mkdtemp(prefix="relaynet-bench-scale-", dir=args.data_root)
    try:
        with DynamoDBLocal(data_dir) as store:
            os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = store.endpoint
            settings.cache_clear()
            t.reset()
            create_table(boto3.client("dynamodb"), TEMPLATE, t.table_name())
            if not args.skip_sweep:
                run_steps(args)
            if args.claim_agents:
                run_claims(args)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def run_steps(args: argparse.Namespace) -> None:
    meter = Meter()
    seeder = Seeder(meter)
    now = clock.now_ms()
    began = time.perf_counter()
    nets = seed_networks(seeder, args.networks, args.instances, now)
    offered = [task_item(net, i, "offered", now + 300_000 + i, now) for i, net in enumerate(nets)
               for _ in range(args.offered)]
    seeder.put(offered)
    print(f"DynamoDB Local, {k.ROUTE_SHARDS} routing shards: {args.networks:,} networks x {args.instances} "
          f"worker instances, {len(offered):,} offered tasks not yet due (seeded in {time.perf_counter() - began:.0f} s); "
          f"sweep batch {args.batch}, {sweep.WORKERS} threads")
    print(f"{'pending':>9} {'run':>3} {'offered':>7} {'requests':>8} {'items read':>10} "
          f"{'req/offer':>9} {'read/offer':>10} {'wall s':>7}")
    seeded = 0
    due0 = now - 3_600_000
    client = t.client()
    meter.attach(client)
    rows = []
    for target in (int(s) for s in args.pending.split(",")):
        began = time.perf_counter()
        seed_pending(seeder, nets, seeded, target - seeded, due0, now)
        seeded = target
        seed_s = time.perf_counter() - began
        for run in range(1, args.runs + 1):
            before_req, before_read = sum(meter.requests.values()), meter.items_read
            began = time.perf_counter()
            stats = sweep.run(now_ms=now, batch=args.batch, time_budget_s=3600)
            wall = time.perf_counter() - began
            reqs = sum(meter.requests.values()) - before_req
            read = meter.items_read - before_read
            off = stats["offered"] or 1
            rows.append((target, reqs / off, read / off))
            print(f"{target:>9,} {run:>3} {stats['offered']:>7} {reqs:>8} {read:>10} {reqs / off:>9.2f} "
                  f"{read / off:>10.2f} {wall:>7.1f}" + (f"   (seeded in {seed_s:.0f} s)" if run == 1 else ""))
    meter.detach(client)
    lo, hi = rows[0], rows[-1]
    print(f"per offered task from {lo[0]:,} to {hi[0]:,} pending: requests {lo[1]:.2f} -> {hi[1]:.2f}, "
          f"items read {lo[2]:.2f} -> {hi[2]:.2f}")
    print(f"largest item written: {meter.largest[0]:,} bytes ({meter.largest[1]})")
    total = sum(meter.routing.values())
    top = meter.routing.most_common(1)[0]
    print(f"routing writes: {total:,} over {len(meter.routing)} GSI1 partitions; busiest {top[0]} "
          f"{top[1]:,} = {top[1] / total:.4f} of them (1/8 = 0.125)")
    print("busiest routing partition's share with other shard counts, same writes: "
          + ", ".join(f"{s} shards {busiest_share(meter, s):.4f}" for s in (1, 8, k.ROUTE_SHARDS, 32)))



def run_claims(args: argparse.Namespace) -> None:
    """The claims step (module docstring): writes per item while N instances claim across the tree."""
    import random

    from relaynet import claims
    from relaynet.errors import ClaimConflict
    from relaynet.identity import Principal
    from relaynet.models.worker import ClaimRequest, ReleaseRequest

    meter = Meter()
    seeder = Seeder(meter)
    now = clock.now_ms()
    (net,) = seed_networks(seeder, 1, args.claim_agents, now)
    principals = [Principal(kind="instance", network_id=net["id"], instance_id=i, agent="worker")
                  for i in net["workers"]]
    dirs = [f"d{n // 10}/s{n % 10}" for n in range(args.claim_dirs)]
    meter.item_writes.clear()
    meter.attach(t.client())
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def agent(n: int) -> None:
        rng = random.Random(n)
        p = principals[n]
        for _ in range(args.claim_rounds):
            d = rng.choice(dirs)
            scope = f"{d}/**" if rng.random() < 0.5 else f"{d}/f{rng.randrange(20)}.py"
            try:
                got = claims.claim(p, ClaimRequest(scope=scope, ttlSeconds=600))
            except ClaimConflict:
                with lock:
                    outcomes["refused"] += 1
                continue
            with lock:
                outcomes["granted"] += 1
            claims.release(p, ReleaseRequest(claimId=got["claimId"]))

    began = time.perf_counter()
    with ThreadPoolExecutor(args.claim_threads) as pool:
        list(pool.map(agent, range(args.claim_agents)))
    wall = time.perf_counter() - began
    meter.detach(t.client())
    total = sum(meter.item_writes.values())
    (busiest, most), = meter.item_writes.most_common(1) or [(("-", "-"), 0)]
    print(f"\nclaims: {args.claim_agents:,} instances x {args.claim_rounds} rounds over {args.claim_dirs} directories, "
          f"{args.claim_threads} threads, {wall:.0f} s: {outcomes['granted']:,} granted, {outcomes['refused']:,} refused")
    print(f"writes {total:,} over {len(meter.item_writes):,} items; the busiest item took {most} "
          f"({most / total if total else 0:.4f} of them; target at most 1/8 = 0.125): {busiest[0]} / {busiest[1]}")
    for (pk, sk), n in meter.item_writes.most_common(5)[1:]:
        print(f"   next: {n} writes ({n / total:.4f}) {pk} / {sk}")


if __name__ == "__main__":
    main()
