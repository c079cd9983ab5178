"""Claims under real concurrency (PROTOCOL.md 4.9): threads, each its own instance, against
DynamoDB Local (every call a real DynamoDB API request over HTTP).

Bounded on purpose: 20 threads, 20 rounds, a barrier so the calls start together, no timing
assertions.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from relaynet import claims, globs
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
        assert [i["id"] for i in _tree(net.network_id)] == [won["claimId"]]
        assert claims.release(winner[0], w.ReleaseRequest(claimId=won["claimId"]))["released"] is True
    assert all(x < y for x, y in zip(tokens, tokens[1:])), tokens


def _tree(net_id: str) -> list[dict]:
    return [i for i in t.query(k.claim_tree_pk(net_id, "path", None)) if i.get("kind") == "claim"]


def test_concurrent_claims_in_disjoint_subtrees_all_succeed_without_one_retry(dynamodb, monkeypatch):
    """Issue 25: claims in disjoint directory subtrees, at any depth, share no item, so none of
    them is ever cancelled and retried; each token is above the earlier overlapping one's."""
    from relaynet.store import unit_of_work as uow

    net = apply(SPEC)
    coders = [net.principals[f"coder{i}"] for i in range(THREADS)]
    before = claims.claim(coders[0], w.ClaimRequest(scope="soak/**"))
    claims.release(coders[0], w.ReleaseRequest(claimId=before["claimId"]))
    cancelled = []
    real = uow.commit

    def commit(actions):
        outcome = real(actions)
        if not outcome:
            cancelled.append(actions)
        return outcome

    monkeypatch.setattr(uow, "commit", commit)
    results = _at_once(lambda ip: claims.claim(ip[1], w.ClaimRequest(scope=f"soak/a{ip[0]}/deep/**")),
                       list(enumerate(coders)))
    assert all(isinstance(r, dict) for r in results), [r for r in results if not isinstance(r, dict)]
    assert cancelled == []
    assert all(r["fencingToken"] > before["fencingToken"] for r in results)  # soak/** was read: its mark
    assert {i["id"] for i in _tree(net.network_id)} == {r["claimId"] for r in results}
    assert all(i["state"] == "granted" for i in _tree(net.network_id))


# Nested and prefix-less scopes at several depths: some pairs overlap, some do not.
MIXED = [
    "soak/**", "soak/a/**", "soak/a/x.py", "soak/b/**", "soak/b/y.md", "**/*.md", "soak/*/x.py", "docs/**",
    "docs/a.md", "soak/{a,b}/z.py", "**/x.py", "soak/c/**", "lib/**", "soak/a/*.md", "*/b/**", "soak/",
    "lib/q.py", "soak/c/d/e.md", "{lib,docs}/**", "soak/a/x.pyc",
]


def test_concurrent_nested_and_prefix_less_claims_never_double_grant_and_every_loser_names_a_winner(dynamodb):
    """20 threads on the mix above, 10 rounds, a different thread on each scope every round: the
    winners never overlap each other (no double grant), and every loser got 409 naming only
    winners that overlap it, so the winners are a maximal set: nobody lost to nothing."""
    net = apply(SPEC)
    coders = [net.principals[f"coder{i}"] for i in range(THREADS)]
    for rnd in range(10):
        jobs = [(p, MIXED[(i + rnd) % THREADS]) for i, p in enumerate(coders)]
        results = _at_once(lambda job: claims.claim(job[0], w.ClaimRequest(scope=job[1], ttlSeconds=600)), jobs)
        wins = {r["claimId"]: (job, r) for job, r in zip(jobs, results) if isinstance(r, dict)}
        assert wins, f"round {rnd}: nobody won"
        scopes = [(cid, r["scope"]) for cid, (_, r) in wins.items()]
        for n, (x, sx) in enumerate(scopes):
            for y, sy in scopes[n + 1:]:
                assert not globs.overlaps(sx, sy), f"round {rnd}: {sx} and {sy} both granted"
        for job, r in zip(jobs, results):
            if isinstance(r, dict):
                continue
            assert isinstance(r, ClaimConflict), f"round {rnd}: {r!r}"
            named = [c["claimId"] for c in r.details["conflicts"]]
            assert named and all(c in wins for c in named), f"round {rnd}: {job[1]} named {named}"
            assert all(globs.overlaps(globs.normalise(job[1]), wins[c][1]["scope"]) for c in named)
        assert {i["id"] for i in _tree(net.network_id)} == set(wins)  # no announcement left behind
        for cid, (job, _) in wins.items():
            assert claims.release(job[0], w.ReleaseRequest(claimId=cid))["released"] is True
