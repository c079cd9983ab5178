"""What a claim costs (PROTOCOL.md 4.9): overlap checks per second, and one network_claim call
against networks holding 0, 100 and 1,000 active claims. Not a test.

Run: ``.venv/bin/python benchmarks/bench_claims.py [--calls 15] [--seconds 0.3]``.

Part 1 reuses bench_globs' typical pattern pairs (cold = parse + dynamic program, warm = memoised,
compiled = warm with pre-compiled patterns), then measures what one claim call does in memory:
one new scope against every active claim of its namespace.

Part 2 runs ``relaynet.claims.claim`` on moto in-process (``mock_aws``) and prints, per network
size, the median wall time of one call, the part of it spent inside DynamoDB requests (here:
botocore plus moto, whose response serialisation costs roughly a millisecond per item returned,
so it dominates at 1,000 claims; real DynamoDB answers a Query of this size in a few ms; and
moto deep-copies the whole table in every TransactWriteItems, so the transaction column grows
with everything in the table, which real DynamoDB does not), split into the Query and the
transaction, the rest (the hub's own work: decoding items, normalising, overlap), the DynamoDB requests per call
(counted with a botocore ``before-call`` hook) and how many items the claims Query read.
Active claims are seeded with BatchWriteItem in the exact shape ``claims.claim`` writes; every
measured call takes a fresh scope that overlaps none of them (the full path: Query, decide,
TransactWriteItems) and is released again (not timed), so the network size stays put. The row
"0 active, 1,000 ended" shows that released claims no longer cost a claim call anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT / "infra"), str(ROOT / "benchmarks")]

os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_SESSION_TOKEN="bench",
                  AWS_DEFAULT_REGION="us-east-1", RELAYNET_TABLE="relaynet-bench", POWERTOOLS_LOG_LEVEL="WARNING")
os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)

import bench_globs  # noqa: E402
from relaynet import claims, clock, globs, ids  # noqa: E402
from relaynet.models import worker as w  # noqa: E402
from relaynet.store import keys as k  # noqa: E402
from relaynet.store import table as t  # noqa: E402


def active_scope(i: int) -> str:
    """A realistic mix: directories, file globs, single files, braces, and some ``**/`` globs
    (which no first-segment bucketing can rule out)."""
    return [f"svc{i}/src/**", f"svc{i}/docs/*.md", f"svc{i}/src/app.py", f"{{lib,pkg}}{i}/*/mod.py",
            f"**/gen{i}/*.py"][i % 5]


def new_scope(j: int) -> str:
    return f"new{j}/cmd/main.go"


# --------------------------------------------------------------------------- part 1


def overlap_rates(seconds: float) -> None:
    print(f"== overlap checks per second (bench_globs pairs, {seconds:g} s per figure)")
    print(f"{'pair':<36}{'result':>7}{'cold/s':>12}{'warm/s':>13}{'compiled/s':>13}")
    for label, a, b in bench_globs.PAIRS:
        result = globs.overlaps(a, b)

        def cold(a=a, b=b):
            globs._clear_caches()
            globs.overlaps(a, b)

        cold_rate, _ = bench_globs.rate(cold, seconds)
        pa, pb = globs.compile_scope(a), globs.compile_scope(b)
        warm_rate, _ = bench_globs.rate(lambda: globs.overlaps(a, b), seconds)
        compiled_rate, _ = bench_globs.rate(lambda: globs.overlaps(pa, pb), seconds)
        print(f"{label:<36}{str(result):>7}{cold_rate:>12,.0f}{warm_rate:>13,.0f}{compiled_rate:>13,.0f}")

    print("\n== one claim's in-memory decision: a new scope against N active claims of its namespace")
    print(f"{'N':>6}{'first sight (ms)':>18}{'per claim (us)':>16}{'steady (ms)':>13}{'DP runs':>9}")
    for n in (100, 1000):
        active = [{"id": f"c{i}", "scopeType": "path", "scope": globs.normalise(active_scope(i)),
                   "resourceId": None, "holder": {"instanceId": "x"}} for i in range(n)]
        globs._clear_caches()
        claims._head_cached.cache_clear()
        runs = Counter()
        real = globs.overlaps

        def counting(a, b, real=real):
            runs["dp"] += 1
            return real(a, b)

        start = time.perf_counter()
        globs.overlaps = counting
        try:
            hit = claims._overlapping(active, "path", new_scope(0), None)
        finally:
            globs.overlaps = real
        first = time.perf_counter() - start
        assert hit == []
        reps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:  # a new scope each time, active ones compiled
            claims._overlapping(active, "path", new_scope(reps + 1), None)
            reps += 1
        steady = (time.perf_counter() - start) / reps
        print(f"{n:>6}{first * 1000:>18.2f}{first / n * 1e6:>16.1f}{steady * 1000:>13.2f}{runs['dp']:>9}")


# --------------------------------------------------------------------------- part 2


class Meter:
    """Counts DynamoDB requests and the time spent inside them (botocore event hooks)."""

    def __init__(self, client):
        self.ops: Counter = Counter()
        self.time: Counter = Counter()  # seconds inside requests, by operation
        self.inside = 0.0
        self.scanned: list[int] = []
        self._start = 0.0
        client.meta.events.register("before-call.dynamodb.*", self._before, unique_id="bench-before")
        client.meta.events.register("after-call.dynamodb.*", self._after, unique_id="bench-after")

    def _before(self, model, **_):
        self.ops[model.name] += 1
        self._start = time.perf_counter()

    def _after(self, model, parsed, **_):
        took = time.perf_counter() - self._start
        self.inside += took
        self.time[model.name] += took
        if model.name == "Query":
            self.scanned.append(parsed.get("ScannedCount", 0))

    def reset(self) -> None:
        self.ops.clear()
        self.time.clear()
        self.inside = 0.0
        self.scanned = []


def seed(net: str, holder: dict, active: int, ended: int) -> None:
    """``active`` live claims in the shape claims.claim writes (HEAD at counter ``active``) and
    ``ended`` released ones moved out of the hot partition as claims.release moves them."""
    now = clock.now_ms()
    expires = now + 3_600_000
    puts = []
    for i in range(active + ended):
        cid = ids.new_id("clm")
        pk, sk = k.claim(net, cid)
        item = {"PK": pk, "SK": sk, "kind": "claim", "id": cid, "scopeType": "path",
                "scope": globs.normalise(active_scope(i)), "holder": holder, "expiresAt": expires,
                "fencingToken": i + 1, "createdAt": clock.iso(now), "ttl": expires // 1000 + 86_400}
        if i < active:
            puts.append(t.encode(item))
        else:
            puts.append(claims._move(net, item, now, released=True)[1]["Put"]["Item"])
    if active + ended:
        puts.append(t.encode({"PK": k.claims_head(net)[0], "SK": k.claims_head(net)[1], "kind": "head",
                              "counter": active + ended}))
    for start in range(0, len(puts), 25):
        req = {t.table_name(): [{"PutRequest": {"Item": i}} for i in puts[start:start + 25]]}
        while req:
            req = t.client().batch_write_item(RequestItems=req).get("UnprocessedItems") or None


def measure(p, meter: Meter, calls: int, tag: str) -> dict:
    walls, insides, queries, txs, ops, scanned = [], [], [], [], Counter(), []
    for j in range(calls + 1):  # the first call warms caches and is not counted
        meter.reset()
        start = time.perf_counter()
        got = claims.claim(p, w.ClaimRequest(scope=f"{tag}/{new_scope(j)}"))
        wall = time.perf_counter() - start
        if j:
            walls.append(wall)
            insides.append(meter.inside)
            queries.append(meter.time["Query"])
            txs.append(meter.time["TransactWriteItems"])
            ops.update(meter.ops)
            scanned += meter.scanned
        claims.release(p, w.ReleaseRequest(claimId=got["claimId"]))
    return {"wall": statistics.median(walls), "inside": statistics.median(insides),
            "query": statistics.median(queries), "tx": statistics.median(txs),
            "hub": statistics.median(a - b for a, b in zip(walls, insides)),
            "ops": {op: n / calls for op, n in sorted(ops.items())}, "scanned": statistics.median(scanned)}


def claim_call_times(calls: int) -> None:
    import boto3
    from moto import mock_aws

    from relaynet_local.template import create_table
    from tests.conftest import apply  # the test helper: apply a spec and resolve principals

    print(f"\n== one network_claim call on moto in-process (median of {calls} calls)")
    print(f"{'network':<24}{'wall ms':>9}{'in DynamoDB ms':>16}{'(Query':>8}{'Transact)':>10}{'hub ms':>8}"
          f"{'requests/call':>30}{'items read':>11}")
    rows = [("0 active", 0, 0), ("100 active", 100, 0), ("1,000 active", 1000, 0), ("0 active, 1,000 ended", 0, 1000)]
    with mock_aws():
        ddb = boto3.client("dynamodb")
        for n_row, (label, active, ended) in enumerate(rows):
            # a table per row: moto copies the whole table in every transaction, so rows must
            # not pay for each other's items
            t.reset()
            create_table(ddb, ROOT / "template.yaml", t.table_name())
            meter = Meter(t.client())
            net = apply(f"network: bench{n_row}\nagents:\n  - {{name: coder, instances: 2}}\n")
            holder, caller = net.principals["coder0"], net.principals["coder1"]
            seed(net.network_id, holder.actor, active, ended)
            r = measure(caller, meter, calls, f"b{n_row}")
            ops = ", ".join(f"{n:g} {op}" for op, n in r["ops"].items())
            print(f"{label:<24}{r['wall'] * 1000:>9.1f}{r['inside'] * 1000:>16.1f}{r['query'] * 1000:>8.1f}"
                  f"{r['tx'] * 1000:>10.1f}{r['hub'] * 1000:>8.2f}{ops:>30}{r['scanned']:>11g}", flush=True)
            ddb.delete_table(TableName=t.table_name())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="time per overlap-rate figure")
    ap.add_argument("--calls", type=int, default=15, help="claim calls per network size (median)")
    args = ap.parse_args()
    print(f"Python {sys.version.split()[0]}")
    overlap_rates(args.seconds)
    claim_call_times(args.calls)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
