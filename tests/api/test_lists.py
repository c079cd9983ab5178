"""Lists (PROTOCOL.md 2): every list tool takes ``limit`` (its default, at most 100) and
``cursor``, answers ``nextCursor`` (null at the end), and a walk over every page returns each
item exactly once; cursors are opaque and tamper-evident (a bad one is 400 on field ``cursor``).
Written as a client of the HTTP API would check it, through the real handlers."""

from __future__ import annotations

import base64
import json

import pytest

from tests.conftest import apply

N_AGENTS = 25  # more than a default page of peers (20) and of tasks (20)
N_CHANNELS = 23  # more than a default page of channels (20) and of context results (10)

PEERS = [f"peer{chr(ord('a') + n)}" for n in range(N_AGENTS - 1)]
SPEC = "network: big\nagents:\n  - {name: me, instances: 1}\n" + "".join(
    f"  - {{name: {name}, description: 'agent {name}'}}\n" for name in PEERS) + """\
representatives:
  - {name: ops, grants: {big: observe, n1: observe, n2: observe, n3: observe}}
---
network: n1
---
network: n2
---
network: n3
agents:
  - {name: solo, instances: 1}
"""


@pytest.fixture(scope="module")
def big():
    """One network with 25 agents, 25 tasks, 23 channels (each with a seed message) and the
    events they made; five asks; a representative on it and three more networks."""
    import boto3
    from moto import mock_aws

    from relaynet.store import table as t
    from relaynet_local.template import create_table
    from tests.api.conftest import call
    from tests.conftest import TEMPLATE

    with mock_aws():
        t.reset()
        create_table(boto3.client("dynamodb"), TEMPLATE, "relaynet-test")
        net = apply(SPEC)
        me = net.token("me")
        for n in range(N_AGENTS):
            assert call("network_delegate", {"objective": f"task {n}", "toAgent": "peera"}, me)[0] == 200
        for n in range(N_CHANNELS):
            assert call("channels", {"action": "open", "type": "conversation", "target": PEERS[n],
                                     "message": f"needle {n}"}, me)[0] == 200
        for n in range(5):  # 25 + 23 + 5 events: more than control_get_history's default page
            assert call("network_ask", {"body": f"ask {n}", "toAgent": "peera"}, me)[0] == 200
        yield net
        t.reset()


def walk(api, tool, body, token, key, limit):
    """Every page of a list, following nextCursor; returns (items, number of pages)."""
    items, cursor, pages = [], None, 0
    while True:
        status, out, _ = api(tool, {**body, "limit": limit, **({"cursor": cursor} if cursor else {})}, token)
        assert status == 200, out
        assert len(out[key]) <= limit
        items += out[key]
        pages += 1
        cursor = out["nextCursor"]
        if cursor is None:
            return items, pages
        assert pages < 100


def ops(big):
    return big.tokens["representatives"]["ops"]


LISTS = {  # tool, body, result key, item id, the caller (me or the representative)
    "tasks list": ("tasks", {"action": "list"}, "tasks", "id", "me"),
    "channels list": ("channels", {"action": "list"}, "channels", "channel_id", "me"),
    "peers find": ("peers", {"action": "find"}, "peers", "name", "me"),
    "context search": ("context", {"action": "search", "query": "needle"}, "results", "id", "me"),
    "control_list_agents": ("control_list_agents", {}, "agents", "name", "ops"),
    "control_list_networks": ("control_list_networks", {}, "networks", "networkId", "ops"),
    "control_list_tasks": ("control_list_tasks", {}, "tasks", "id", "ops"),
    "control_get_history": ("control_get_history", {}, "events", "id", "ops"),
    "control_channel_history": ("control_channel_history", {}, "messages", "id", "ops"),
}
EXPECTED = {"tasks list": N_AGENTS, "channels list": N_CHANNELS, "peers find": N_AGENTS - 1,
            "context search": N_CHANNELS, "control_list_agents": N_AGENTS, "control_list_networks": 4,
            "control_list_tasks": N_AGENTS}


def token_of(big, who):
    return ops(big) if who == "ops" else big.token(who)


@pytest.mark.parametrize("name", LISTS)
@pytest.mark.parametrize("limit", [1, 3, 7])
def test_walking_every_page_returns_each_item_exactly_once(api, big, name, limit):
    tool, body, key, ident, who = LISTS[name]
    if name == "control_channel_history" and limit == 1:
        for n in range(5):
            api("control_channel_send", {"body": f"note {n}"}, ops(big))
    whole = api(tool, {**body, "limit": 100}, token_of(big, who))[1]
    assert whole["nextCursor"] is None, "one page of 100 holds the whole list"
    items, pages = walk(api, tool, body, token_of(big, who), key, limit)
    ids = [i[ident] for i in items]
    assert len(ids) == len(set(ids)), f"{name}: repeated items in the walk"
    if name == "control_channel_history":  # pages go back in time, each page oldest first
        assert sorted(ids) == sorted(i[ident] for i in whole[key])
    else:
        assert ids == [i[ident] for i in whole[key]], f"{name}: the walk and the whole list differ"
    if name in EXPECTED:
        assert len(ids) == EXPECTED[name]
    assert pages == max(1, -(-len(ids) // limit))  # no empty last page: nextCursor is null at the end


DEFAULTS = {"peers find": 20, "context search": 10, "tasks list": 20, "channels list": 20}


@pytest.mark.parametrize("name", DEFAULTS)
def test_a_default_page_of_a_longer_list_ends_with_a_cursor(api, big, name):
    tool, body, key, _, who = LISTS[name]
    status, out, _ = api(tool, body, token_of(big, who))
    assert status == 200
    assert len(out[key]) == DEFAULTS[name] and out["nextCursor"]


def test_control_lists_default_to_50(api, big):
    # control_list_tasks and control_get_history default to 50 (PROTOCOL.md 6): the events of
    # 25 delegations and 23 channels are more than that
    out = api("control_get_history", {}, ops(big))[1]
    assert len(out["events"]) == 50 and out["nextCursor"]
    out = api("control_list_tasks", {}, ops(big))[1]
    assert len(out["tasks"]) == N_AGENTS and out["nextCursor"] is None


@pytest.mark.parametrize("name", LISTS)
@pytest.mark.parametrize("limit", [0, 101, -1])
def test_a_limit_out_of_range_is_400_naming_limit(api, big, name, limit):
    tool, body, _, _, who = LISTS[name]
    status, out, _ = api(tool, {**body, "limit": limit}, token_of(big, who))
    assert status == 400 and out["error"]["code"] == "invalid_argument"
    assert [f["field"] for f in out["error"]["details"]["fields"]] == ["limit"]


def _tampered(cursor: str) -> str:
    body, mac = cursor.split(".")
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    data["p"] = "zzzz" if isinstance(data["p"], str) else data["p"]
    data["c"] = "someone-else"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{forged}.{mac}"


@pytest.mark.parametrize("name", LISTS)
def test_a_bad_cursor_is_400_naming_cursor(api, big, name):
    tool, body, key, _, who = LISTS[name]
    token = token_of(big, who)
    if name == "control_channel_history":
        for n in range(3):
            api("control_channel_send", {"body": f"more {n}"}, token)
    good = api(tool, {**body, "limit": 1}, token)[1]["nextCursor"]
    assert good
    other_list = "channels" if tool != "channels" else "tasks"
    foreign = api(other_list, {"action": "list", "limit": 1}, big.token("me"))[1]["nextCursor"]
    for bad in ("nonsense", "a.b", good[:-2] + ("AA" if not good.endswith("AA") else "BB"), _tampered(good),
                good + ".x", foreign, "x" * 5000):
        status, out, _ = api(tool, {**body, "cursor": bad}, token)
        assert status == 400, (bad, out)
        assert out["error"]["code"] == "invalid_argument"
        assert [f["field"] for f in out["error"]["details"]["fields"]] == ["cursor"]


def test_a_cursor_is_valid_only_with_the_arguments_that_made_it(api, big):
    me = big.token("me")
    cursor = api("tasks", {"action": "list", "state": "all", "limit": 2}, me)[1]["nextCursor"]
    assert api("tasks", {"action": "list", "state": "all", "limit": 5, "cursor": cursor}, me)[0] == 200  # limit may change
    status, out, _ = api("tasks", {"action": "list", "scope": "all", "cursor": cursor}, me)
    assert status == 400 and out["error"]["details"]["fields"][0]["field"] == "cursor"


def test_a_cursor_does_not_cross_networks_or_callers(api, big):
    cursor = api("peers", {"action": "find", "limit": 1}, big.token("me"))[1]["nextCursor"]
    solo = big.tokens["networks"]["n3"]["instances"]["solo"][0]["token"]
    status, out, _ = api("peers", {"action": "find", "cursor": cursor}, solo)
    assert status == 400 and out["error"]["details"]["fields"][0]["field"] == "cursor"


def test_items_created_during_a_walk_never_repeat_one_already_read(api, big):
    me = big.token("me")
    before = [t["id"] for t in api("tasks", {"action": "list", "limit": 100}, me)[1]["tasks"]]
    first = api("tasks", {"action": "list", "limit": 5}, me)[1]
    api("network_delegate", {"objective": "a late task", "toAgent": "peera"}, me)
    rest, cursor = [], first["nextCursor"]
    while cursor:
        page = api("tasks", {"action": "list", "limit": 5, "cursor": cursor}, me)[1]
        rest += page["tasks"]
        cursor = page["nextCursor"]
    ids = [t["id"] for t in first["tasks"] + rest]
    assert ids == before  # the new task is newer than the walk's position: not in it, nothing repeated
