"""Per-container caches (relaynet.cache; docs/architecture.md "request floors"): a cached read
makes no DynamoDB request, and a change another container commits (a revoked grant, a redefined
group) is seen once the bound (``RELAYNET_CACHE_SECONDS``, 5 s) has passed, through the real
handlers. The caches' clock is stepped instead of waited for, so a loaded machine cannot make a
call outlive the bound."""

from __future__ import annotations

from collections import Counter

import pytest

from relaynet import cache
from relaynet.config import settings
from relaynet.store import keys as k
from relaynet.store import table as t


class Clock:
    """The caches' monotonic clock, stepped by the test."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def bound(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(cache, "_now", clock)
    assert settings().cache_seconds == 5.0  # the product's default bound
    return clock


class Requests(Counter):
    """DynamoDB requests by operation, counted by a botocore hook on the hub's own client; the
    authorizer's token GetItem (API Gateway caches its answer) is left out."""

    def hook(self, params, model, **_):
        if model.name == "GetItem" and params.get("Key", {}).get("PK", {}).get("S", "").startswith("TOKEN#"):
            return
        self[model.name] += 1


@pytest.fixture
def requests():
    seen = Requests()
    t.client().meta.events.register("before-parameter-build.dynamodb", seen.hook, unique_id="test-cache-count")
    yield seen
    t.client().meta.events.unregister("before-parameter-build.dynamodb", unique_id="test-cache-count")


def _wait_out_the_bound(clock: Clock) -> None:
    clock.now += settings().cache_seconds


def test_a_cached_group_definition_makes_no_request_and_a_redefinition_is_seen_after_the_bound(
        api, demo, bound, requests):
    token = demo.token("planner0")
    first = api("network_ask", {"body": "review?", "toAgent": "reviewers"}, token)[1]
    assert [r["agent"] for r in first["recipients"]] == ["reviewer"]
    requests.clear()
    again = api("network_ask", {"body": "and this?", "toAgent": "reviewers"}, token)[1]
    assert [r["agent"] for r in again["recipients"]] == ["reviewer"]
    assert requests["BatchGetItem"] == 0  # the definition came from the cache
    # another container (an admin apply elsewhere) redefines the group
    t.update(*k.group(demo.network_id, "reviewers"), "SET members = :m", m=["reviewer", "coder"])
    stale = api("network_ask", {"body": "still?", "toAgent": "reviewers"}, token)[1]
    assert [r["agent"] for r in stale["recipients"]] == ["reviewer"]  # within the bound: the old members
    _wait_out_the_bound(bound)
    fresh = api("network_ask", {"body": "now?", "toAgent": "reviewers"}, token)[1]
    assert sorted(r["agent"] for r in fresh["recipients"]) == ["coder", "reviewer"]


def test_an_unknown_name_is_never_cached(api, demo, bound):
    token = demo.token("planner0")
    status, err, _ = api("network_ask", {"body": "hi", "toAgent": "auditor"}, token)
    assert status == 404 and err["error"]["code"] == "not_found"
    t.put({"PK": k.agent(demo.network_id, "auditor")[0], "SK": k.agent(demo.network_id, "auditor")[1],
           "type": "agent", "name": "auditor"})
    status, out, _ = api("network_ask", {"body": "hi", "toAgent": "auditor"}, token)
    assert status == 200 and [r["agent"] for r in out["recipients"]] == ["auditor"]  # at once, no bound


def test_a_revoked_grant_is_seen_after_the_bound_by_calls_naming_their_network(api, demo, bound, requests):
    token, net = demo.tokens["representatives"]["ops"], demo.network_id
    assert api("control_list_agents", {"networkId": net}, token)[0] == 200
    requests.clear()
    assert api("control_list_agents", {"networkId": net}, token)[0] == 200
    assert requests == Counter({"Query": 1})  # the directory only: the grants came from the cache
    t.update(*k.representative("ops"), "REMOVE grants.#n", names={"#n": net})  # revoked elsewhere
    assert api("control_list_agents", {"networkId": net}, token)[0] == 200  # within the bound
    _wait_out_the_bound(bound)
    status, err, _ = api("control_list_agents", {"networkId": net}, token)
    assert status == 404 and err["error"]["code"] == "not_found"


def test_a_call_in_the_active_network_reads_the_grants_fresh(api, demo, bound):
    token, net = demo.tokens["representatives"]["ops"], demo.network_id
    assert api("control_list_agents", {"networkId": net}, token)[0] == 200  # cached now
    t.update(*k.representative("ops"), "REMOVE grants.#n", names={"#n": net})
    status, err, _ = api("control_list_agents", {}, token)  # no networkId: activeNetwork, read fresh
    assert status == 404 and err["error"]["code"] == "not_found"


def test_whoami_is_one_request_once_the_grants_are_cached(api, demo, bound, requests):
    token = demo.tokens["representatives"]["ops"]
    first = api("control_whoami", {}, token)[1]
    requests.clear()
    assert api("control_whoami", {}, token)[1] == first
    assert requests == Counter({"BatchGetItem": 1})
    t.update(*k.representative("ops"), "SET activeNetwork = :n", n="net_elsewhere")  # another container
    assert api("control_whoami", {}, token)[1]["activeNetwork"] == "net_elsewhere"  # seen at once
