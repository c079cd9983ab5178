"""Races between threads against DynamoDB Local: conditional writes make one winner."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from relaynet import claims, messaging
from relaynet.errors import ClaimConflict
from relaynet.models import worker as w
from tests.conftest import apply

SPEC = "network: race\nagents:\n  - {name: coder, instances: 8}\n  - {name: boss, instances: 1}\n"


def test_concurrent_overlapping_claims_have_exactly_one_winner(server_table):
    net = apply(SPEC)
    coders = [net.principals[f"coder{i}"] for i in range(8)]

    def attempt(p):
        try:
            return claims.claim(p, w.ClaimRequest(scope="src/**"))
        except ClaimConflict as exc:
            return exc

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, coders))
    wins = [r for r in results if isinstance(r, dict)]
    assert len(wins) == 1
    for r in results:
        if not isinstance(r, dict):
            assert r.details["conflicts"][0]["claimId"] == wins[0]["claimId"]


def test_two_instances_fetching_at_once_never_both_get_a_message(server_table):
    net = apply("network: race\nagents:\n  - {name: coder, instances: 2}\n  - {name: boss, instances: 1}\n")
    sent = [messaging.ask(net.principals["boss0"], w.AskRequest(body=f"m{i}", toAgent="coder"))["messageId"]
            for i in range(30)]
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda p: [m["id"] for _ in range(3) for m in messaging.inbox(p)["messages"]],
                            [net.principals["coder0"], net.principals["coder1"]]))
    assert sorted(got[0] + got[1]) == sorted(sent)
    assert not set(got[0]) & set(got[1])
