"""Channels, envelopes and the plugin tools' domain (PROTOCOL.md 5) on moto."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from relaynet import channels, consult, context, messaging, peers
from relaynet.adapters import Send
from relaynet.errors import Conflict, InvalidArgument, NotFound, PermissionDenied
from relaynet.models.plugin import ConsultRequest
from tests.conftest import apply

SPEC = """
network: chat
agents:
  - {name: alice, instances: 1, resume: {summary: Writes the docs, claimed_capabilities: [docs]},
     passport: {cost: {input_per_mtok: 3, output_per_mtok: 15}}}
  - {name: bob, instances: 1, resume: {summary: Reviews code}, capabilities: [{id: review, name: Review}],
     passport: {cost: {input_per_mtok: 1, output_per_mtok: 5}}}
  - {name: carol, instances: 1, resume: {summary: Plans releases}}
  - {name: hermit, instances: 1, inbound_from: ["carol"]}
"""


@pytest.fixture
def net(table):
    return apply(SPEC)


def say(p, ch, text, audience=None):
    return channels.send(p, ch, Send(sender=p.agent, tool="say"), text, audience)


def test_a_conversation_opens_at_once_and_either_side_may_say(net):
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    ch = channels.open_channel(alice, "conversation", ["bob"], None, "chat", None, None)
    assert [p["role"] for p in ch["participants"]] == ["initiator", "respondent"]
    assert say(bob, ch["channel_id"], "hi")["seq"] == 2
    assert say(alice, ch["channel_id"], "hello")["seq"] == 3
    got = messaging.inbox(bob)["messages"]
    assert [m["kind"] for m in got] == ["channel", "channel"]
    assert got[0]["envelope"]["event_type"] == "opened" and got[1]["envelope"]["content"] == "hello"
    assert "say(channel_id=" in got[1]["instructions"]


def test_opening_names_existing_agents_and_never_your_own(net):
    alice = net.principals["alice0"]
    with pytest.raises(InvalidArgument):
        channels.open_channel(alice, "conversation", ["alice"], None, None, None, None)
    with pytest.raises(NotFound) as err:
        channels.open_channel(alice, "conversation", ["ghost"], None, None, None, None)
    assert "bob" in err.value.details["available"]


def test_an_agent_that_refuses_inbound_channels_is_403_and_nothing_is_stored(net):
    alice = net.principals["alice0"]
    with pytest.raises(PermissionDenied):
        channels.open_channel(alice, "conversation", ["hermit"], None, None, None, None)
    assert channels.list_channels(alice)["channels"] == []
    assert channels.open_channel(net.principals["carol0"], "conversation", ["hermit"], None, None, None, None)


def test_audience_names_must_be_participants(net):
    alice, bob, carol = (net.principals[n] for n in ("alice0", "bob0", "carol0"))
    ch = channels.open_channel(alice, "discussion", ["bob", "carol"], None, None, None, None)["channel_id"]
    with pytest.raises(InvalidArgument) as err:
        say(alice, ch, "psst", ["hermit"])
    assert err.value.details["fields"][0]["field"] == "audience"
    say(alice, ch, "for bob only", ["bob"])
    assert [e["content"] for e in channels.info(carol, ch)["envelopes"] if e["event_type"] == "text"] == []
    assert [e["content"] for e in channels.info(bob, ch)["envelopes"] if e["event_type"] == "text"] == ["for bob only"]


def test_a_discussion_refuses_out_of_turn_and_stores_nothing(net):
    alice, bob, carol = (net.principals[n] for n in ("alice0", "bob0", "carol0"))
    ch = channels.open_channel(alice, "discussion", ["bob", "carol"], {"ordering": "round_robin"}, None, None, None)["channel_id"]
    with pytest.raises(Conflict) as err:
        say(bob, ch, "me first")
    assert err.value.reason == "not_your_turn"
    info = channels.info(alice, ch)
    assert info["next_speaker"] == "alice" and info["your_tools"] == ["say"]
    assert [e["event_type"] for e in info["envelopes"]] == ["opened"]


def test_say_on_a_workflow_and_handoff_elsewhere_are_wrong_tool(net):
    alice = net.principals["alice0"]
    graph = {"initial_speaker": "alice", "transitions": [], "default_target": {"name": "terminate", "args": {"reason": "done"}},
             "max_turns": None}
    wf = channels.open_channel(alice, "workflow", ["bob"], {"graph": graph}, None, None, None)["channel_id"]
    with pytest.raises(Conflict) as err:
        say(alice, wf, "text")
    assert err.value.reason == "wrong_tool"
    conv = channels.open_channel(alice, "conversation", ["bob"], None, None, None, None)["channel_id"]
    with pytest.raises(Conflict) as err:
        channels.send(alice, conv, Send(sender="alice", tool="handoff"), "x", event_type="packet")
    assert err.value.reason == "wrong_tool"


def _transactions(run):
    """(run()'s result, how many TransactWriteItems it made)."""
    from relaynet.store import table as t

    made = []
    t.client().meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **kw: made.append(1),
                                    unique_id="count-channel-transactions")
    try:
        return run(), len(made)
    finally:
        t.client().meta.events.unregister("before-call.dynamodb.TransactWriteItems",
                                          unique_id="count-channel-transactions")


def test_an_accepted_seed_is_written_with_the_channel_in_one_transaction(net):
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    ch, made = _transactions(lambda: channels.open_channel(alice, "conversation", ["bob"], None, "chat", None, "hi bob"))
    assert made == 1
    info = channels.info(bob, ch["channel_id"])
    assert [(e["seq"], e["event_type"]) for e in info["envelopes"]] == [(1, "opened"), (2, "text")]
    assert info["envelopes"][1]["envelope_id"] == ch["seed_envelope_id"]
    assert [m["envelope"]["event_type"] for m in messaging.inbox(bob)["messages"]] == ["opened", "text"]
    assert say(bob, ch["channel_id"], "hello alice")["seq"] == 3  # the head was written at seq 2


def test_a_seed_past_one_transaction_is_sent_after_the_channel_is_created(table):
    many = apply("network: crowd\nagents:\n" + "".join(f"  - {{name: a{i:02d}, instances: 1}}\n" for i in range(33)))
    opener = many.principals["a000"]
    targets = [f"a{i:02d}" for i in range(1, 33)]  # 32 targets: the seed's 33 actions do not fit beside the rest
    ch, made = _transactions(lambda: channels.open_channel(opener, "discussion", targets, None, None, None, "hello all"))
    assert made == 2
    envs = channels.info(opener, ch["channel_id"])["envelopes"]
    assert [(e["seq"], e["event_type"]) for e in envs] == [(1, "opened"), (2, "text")]
    assert envs[1]["envelope_id"] == ch["seed_envelope_id"]


def test_a_refused_seed_closes_the_channel_with_seed_failed(net):
    alice = net.principals["alice0"]
    graph = {"initial_speaker": "bob", "transitions": [], "default_target": {"name": "terminate", "args": {}}}
    with pytest.raises(Conflict) as err:
        channels.open_channel(alice, "workflow", ["bob"], {"graph": graph}, None, None, "I go first")
    assert err.value.reason == "seed_failed"
    (listed,) = channels.list_channels(alice, "all")["channels"]
    assert listed["state"] == "closed" and listed["close_reason"] == "seed_failed"


def test_closing_twice_answers_the_first_reason_and_writes_one_closed_envelope(net):
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    ch = channels.open_channel(alice, "conversation", ["bob"], None, None, None, None)["channel_id"]
    assert channels.close(alice, ch) == {"channel_id": ch, "state": "closed", "close_reason": "closed_by_agent"}
    assert channels.close(bob, ch)["close_reason"] == "closed_by_agent"
    assert [e["event_type"] for e in channels.info(bob, ch)["envelopes"]] == ["opened", "closed"]
    with pytest.raises(Conflict) as err:
        say(bob, ch, "too late")
    assert err.value.reason == "channel_closed"
    with pytest.raises(PermissionDenied):
        channels.close(net.principals["carol0"], ch)


def test_a_send_past_the_ttl_is_refused_and_expires_the_channel_with_its_envelope(net):
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    ch = channels.open_channel(alice, "conversation", ["bob"], None, None, 1, None)["channel_id"]
    time.sleep(1.05)
    with pytest.raises(Conflict) as err:
        say(bob, ch, "hello?")
    assert err.value.reason == "channel_closed"
    info = channels.info(alice, ch)
    assert info["channel"]["state"] == "expired" and info["envelopes"][-1]["event_type"] == "expired"
    assert channels.sweep()["expired"] == 0  # the refused send wrote the expiry: nothing left to the sweep
    assert [e["event_type"] for e in channels.info(bob, ch)["envelopes"]] == ["opened", "expired"]


def test_a_silent_consultant_closes_the_consult_with_reply_within(net, monkeypatch):
    monkeypatch.setenv("RELAYNET_REPLY_WITHIN_SECONDS", "1")
    from relaynet.config import settings

    settings.cache_clear()
    alice = net.principals["alice0"]
    ch = channels.open_channel(alice, "consulting", ["bob"], None, None, None, "what is 2+2?")["channel_id"]
    assert channels.sweep()["reply_within"] == 0
    time.sleep(1.05)
    assert channels.sweep()["reply_within"] == 1
    assert channels.info(alice, ch)["channel"]["close_reason"] == "expectation_violated:reply_within"
    assert peers.describe(alice, "bob")["resume"]["observed"]["consults_expired"] == 1


def test_delegate_opens_a_consult_and_returns_the_reply(net):
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    first = consult.delegate(alice, ConsultRequest(target="bob", prompt="Is this safe?", timeout=0))
    assert first["state"] == "active" and first["reply"] is None
    offer = [m for m in messaging.inbox(bob)["messages"] if m["envelope"]["event_type"] == "text"]
    assert offer[0]["envelope"]["content"] == "Is this safe?" and "say(" in offer[0]["instructions"]
    say(bob, first["channel_id"], "Yes, ship it")
    state, reply = consult.wait_for_reply(alice.network_id, first["channel_id"], 1)
    assert (state, reply) == ("closed", "Yes, ship it")
    assert peers.describe(alice, "bob")["resume"]["observed"]["consults_answered"] == 1
    with pytest.raises(InvalidArgument):
        consult.delegate(alice, ConsultRequest(target="alice", prompt="me?"))
    with pytest.raises(NotFound) as err:
        consult.delegate(alice, ConsultRequest(target="ghost", prompt="?"))
    assert "bob" in err.value.details["available"]


def test_peers_find_filters_sorts_and_never_returns_the_caller(net):
    alice = net.principals["alice0"]
    found = peers.find(alice, None, None, "cost", 20)["peers"]
    assert [p["name"] for p in found] == ["bob", "carol", "hermit"]
    assert "alice" not in {p["name"] for p in peers.find(alice, None, None, None, 20)["peers"]}
    assert [p["name"] for p in peers.find(alice, "REVIEW", None, None, 20)["peers"]] == ["bob"]
    assert [p["name"] for p in peers.find(net.principals["bob0"], None, "docs", None, 20)["peers"]] == ["alice"]


def test_peers_describe_renders_a_skill_md_when_the_definition_has_none(net):
    out = peers.describe(net.principals["alice0"], "bob")
    assert out["skill_md"].startswith("# bob") and "Review" in out["skill_md"]
    assert out["resume"]["observed"] == {"tasks_total": 0, "tasks_completed": 0, "tasks_failed": 0,
                                         "consults_answered": 0, "consults_expired": 0}


def test_context_search_and_quote_see_only_the_callers_channels(net):
    alice, bob, carol = (net.principals[n] for n in ("alice0", "bob0", "carol0"))
    ch = channels.open_channel(alice, "conversation", ["bob"], None, None, None, None)["channel_id"]
    say(alice, ch, "the deploy key rotates on Friday")
    say(bob, ch, "noted: deploy freeze Thursday")
    say(alice, ch, "and the DEPLOY checklist is in docs/")
    hits = context.search(bob, "deploy", "channel", None, 10)["results"]
    assert len(hits) == 3 and all(len(h["excerpt"]) <= 240 for h in hits)
    assert context.search(carol, "deploy", "channel", None, 10)["results"] == []
    quotes = context.quote(bob, "alice", 2, ch, None)["quotes"]
    assert [q["text"] for q in quotes] == ["the deploy key rotates on Friday", "and the DEPLOY checklist is in docs/"]


def test_two_racing_says_on_one_discussion_turn_store_exactly_one(server_table):
    net = apply(SPEC)
    alice, bob = net.principals["alice0"], net.principals["bob0"]
    for _ in range(5):
        ch = channels.open_channel(alice, "discussion", ["bob"], None, None, None, None)["channel_id"]
        # alice's turn: two instances of alice's agent racing are modelled by two threads as alice

        def attempt(text):
            try:
                return say(alice, ch, text)
            except Conflict as exc:
                return exc

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(attempt, ["one", "two"]))
        assert sum(isinstance(r, dict) for r in results) == 1
        assert [r.reason for r in results if isinstance(r, Conflict)] == ["not_your_turn"]
        texts = [e for e in channels.info(bob, ch)["envelopes"] if e["event_type"] == "text"]
        assert len(texts) == 1


def test_a_workflow_made_by_ag2_runs_writer_then_reviewer_then_finish(net):
    from ag2.network.transitions import TransitionGraph

    from relaynet import plugin
    from relaynet.models.plugin import HandoffRequest

    alice, bob = net.principals["alice0"], net.principals["bob0"]
    graph = TransitionGraph.sequence(["alice", "bob"]).to_dict()
    ch = channels.open_channel(alice, "workflow", ["bob"], {"graph": graph}, "write then review", None, None)["channel_id"]
    assert channels.info(bob, ch)["your_tools"] == [] and channels.info(alice, ch)["your_tools"] == ["handoff"]
    with pytest.raises(Conflict) as err:
        plugin.handoff(bob, HandoffRequest(channel_id=ch, content="me first"))
    assert err.value.reason == "not_your_turn"
    first = plugin.handoff(alice, HandoffRequest(channel_id=ch, content="draft v1", context={"draft": "v1"}))
    assert first["next_speaker"] == "bob" and first["channel_state"] == "active"
    done = plugin.handoff(bob, HandoffRequest(channel_id=ch, finish="LGTM", reason="approved"))
    assert done["channel_state"] == "closed"
    info = channels.info(alice, ch)
    assert info["channel"]["close_reason"] == "approved"
    assert [e["event_type"] for e in info["envelopes"]] == ["opened", "packet", "packet", "closed"]


def test_a_workflow_without_max_turns_keeps_handing_off(net):
    """AG2's round_robin without a turn cap writes ``max_turns: null``; the stored graph drops the
    null, and handoffs must still route (a regression: it used to fail with a KeyError)."""
    from ag2.network.transitions import TransitionGraph

    from relaynet import plugin
    from relaynet.models.plugin import HandoffRequest

    alice, bob = net.principals["alice0"], net.principals["bob0"]
    graph = TransitionGraph.round_robin(["alice", "bob"]).to_dict()
    assert graph["max_turns"] is None
    ch = channels.open_channel(alice, "workflow", ["bob"], {"graph": graph}, None, None, None)["channel_id"]
    for who, nxt in ((alice, "bob"), (bob, "alice"), (alice, "bob")):
        assert plugin.handoff(who, HandoffRequest(channel_id=ch, content="turn"))["next_speaker"] == nxt
    assert plugin.handoff(bob, HandoffRequest(channel_id=ch, target="bob"))["next_speaker"] == "bob"
