"""Claims under real concurrency (PROTOCOL.md 4.9): threads, each its own instance, against
DynamoDB Local (every call a real DynamoDB API request over HTTP).

Bounded on purpose: 20 threads, 20 rounds, a barrier so the calls start together, no timing
assertions.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from relaynet import claims
from relaynet.errors import ClaimConflict
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import apply

THREADS = 20
ROUNDS = 20
SPEC = f"network: race\nagents:\n  - {{name: coder, instances: {THREADS}}}\n"

# Twenty different scopes that all match src/api/handlers.py, so every pair overlaps.
OVERLAPPING = [
    "src/api/handlers.py", "src/api/**", "src/**", "**", "src/", "src/api/*.py", "src/*/handlers.py",
    "**/handlers.py", "src/api/h*", "src/api/[g-i]andlers.py", "{src,lib}/api/handlers.py",
    "src/{api,web}/**", "src/api/handlers.?y", "*/api/handlers.py", "src/**/handlers.py",
    "src/api/*.{py,pyi}", "src/a*/**", "**/api/**", "./src//api/handlers.py", "src/api/[!x]*",
]


@pytest.fixture
def dynamodb(server_table):
    """DynamoDB Local: each request atomic and transactions serialisable, as in DynamoDB, with
    no lock of ours, so a double winner here is a bug in the claims code."""
    return server_table


def _at_once(fn, args):
    """Run ``fn(arg)`` for every arg in its own thread, released together; exceptions are results."""
    barrier = threading.Barrier(len(args))

    def run(arg):
        barrier.wait()
        try:
            return fn(arg)
        except ClaimConflict as exc:
            return exc

    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(run, args))


def test_of_concurrent_overlapping_claims_exactly_one_succeeds_and_every_other_gets_409_naming_it(dynamodb):
    net = apply(SPEC)
    coders = [net.principals[f"coder{i}"] for i in range(THREADS)]
    tokens = []
    for rnd in range(ROUNDS):
        # Each round a different thread gets each scope, so every scope wins now and then.
        jobs = [(p, OVERLAPPING[(i + rnd) % THREADS]) for i, p in enumerate(coders)]
        results = _at_once(lambda job: claims.claim(job[0], w.ClaimRequest(scope=job[1], ttlSeconds=600)), jobs)
        wins = [(job, r) for job, r in zip(jobs, results) if isinstance(r, dict)]
        assert len(wins) == 1, f"round {rnd}: {len(wins)} winners"
        (winner, won), = wins
        for job, r in zip(jobs, results):
            if r is won:
                continue
            assert isinstance(r, ClaimConflict) and r.status == 409, f"round {rnd}: {r!r}"
            (named,) = r.details["conflicts"]
            assert named["claimId"] == won["claimId"]
            assert named["holder"] == {"agent": "coder", "instanceId": winner[0].instance_id}
        tokens.append(won["fencingToken"])
        live = [i for i in t.query(k.claims_pk(net.network_id)) if i["SK"].startswith("CLAIM#")]
        assert [i["id"] for i in live] == [won["claimId"]]
        assert claims.release(winner[0], w.ReleaseRequest(claimId=won["claimId"]))["released"] is True
    assert all(x < y for x, y in zip(tokens, tokens[1:])), tokens


def test_concurrent_claims_that_do_not_overlap_all_succeed_with_distinct_increasing_tokens(dynamodb):
    net = apply(SPEC)
    coders = [net.principals[f"coder{i}"] for i in range(THREADS)]
    before = claims.claim(coders[0], w.ClaimRequest(scope="before/**"))["fencingToken"]
    results = _at_once(lambda ip: claims.claim(ip[1], w.ClaimRequest(scope=f"area{ip[0]}/**")),
                       list(enumerate(coders)))
    assert all(isinstance(r, dict) for r in results), [r for r in results if not isinstance(r, dict)]
    tokens = sorted(r["fencingToken"] for r in results)
    # every claim got its own token, each above every token issued before they started
    assert len(set(tokens)) == THREADS and tokens[0] > before
    live = [i for i in t.query(k.claims_pk(net.network_id)) if i["SK"].startswith("CLAIM#")]
    assert len(live) == THREADS + 1
    assert int(t.get(*k.claims_head(net.network_id))["counter"]) == tokens[-1]
