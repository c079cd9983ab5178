"""AG2's turn rules served by Relaynet's adapters (relaynet.ag2.turns over relaynet.adapters)
against AG2 1.2.1's own adapters, the oracle (a test dependency): on generated channels and
sequences of sends, the same accept/reject decision for every kind of envelope from every
participant and an outsider, the same expected next speaker and triggering envelope, and the
channel closing on the same send."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("ag2.network")

from ag2.network.adapters.consulting import ConsultingAdapter  # noqa: E402
from ag2.network.adapters.conversation import ConversationAdapter  # noqa: E402
from ag2.network.adapters.discussion import DiscussionAdapter  # noqa: E402
from ag2.network.adapters.workflow import WorkflowAdapter  # noqa: E402
from ag2.network.channel import ChannelMetadata, ChannelState, Participant, ParticipantRole  # noqa: E402
from ag2.network.envelope import Envelope  # noqa: E402
from ag2.network.errors import NetworkError  # noqa: E402

from relaynet import adapters  # noqa: E402
from relaynet.ag2 import turns  # noqa: E402
from relaynet.ag2.protocol import envelope as ev  # noqa: E402
from relaynet.ag2.protocol.errors import ProtocolError  # noqa: E402

AG2 = {"consulting": ConsultingAdapter(), "conversation": ConversationAdapter(), "discussion": DiscussionAdapter(),
       "workflow": WorkflowAdapter()}
NAMES = ["ann", "bob", "cyd", "dee"]
OUTSIDER = "zed"
TOOLS = ["route_a", "route_b"]
VALUES = [None, 1, "x"]
PROBES = [ev.EV_CONTEXT_SET, ev.EV_TASK_CANCEL_REQUEST, ev.EV_CHANNEL_OPENED, ev.EV_CHANNEL_INVITE_ACK,
          "custom.event", ev.EV_PACKET, ev.EV_TEXT]


@st.composite
def graphs(draw, members: list[str]) -> dict[str, Any]:
    """A TransitionGraph.to_dict() both sides accept (Relaynet's validate_graph, AG2's loads)."""
    condition = st.one_of(
        st.just({"name": "always", "args": {}}),
        st.sampled_from(members + [OUTSIDER]).map(lambda a: {"name": "from_speaker", "args": {"agent_id": a}}),
        st.sampled_from(TOOLS).map(lambda t: {"name": "tool_called", "args": {"tool_name": t}}),
        st.sampled_from(VALUES).map(lambda v: {"name": "context_equals", "args": {"key": "k", "value": v}}))
    target = st.one_of(
        st.sampled_from(members).map(lambda a: {"name": "agent", "args": {"agent_id": a}}),
        st.sampled_from(["round_robin", "stay", "revert_to_initiator"]).map(lambda n: {"name": n, "args": {}}),
        st.sampled_from([{}, {"reason": "done"}]).map(lambda a: {"name": "terminate", "args": a}))
    transitions = draw(st.lists(st.fixed_dictionaries({"when": condition, "then": target,
                                                       "priority": st.integers(-2, 2)}), max_size=4))
    return {"initial_speaker": draw(st.sampled_from(members)), "transitions": transitions,
            "default_target": draw(target | st.none()), "max_turns": draw(st.none() | st.integers(1, 6))}


@st.composite
def channels(draw) -> tuple[str, list[str], dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(AG2)))
    n = 2 if kind in ("consulting", "conversation") else draw(st.integers(2, 4))
    members = NAMES[:n]
    knobs: dict[str, Any] = {}
    if kind == "workflow":
        knobs["graph"] = draw(graphs(members))
        if draw(st.booleans()):
            knobs["context_vars"] = {"k": draw(st.sampled_from(VALUES))}
    return kind, members, knobs


def packet_data(members: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """An AG2 packet's event_data as AG2's workflow client builds it (a handoff to a participant,
    a finish, a text round), with an optional routing tool and context set."""
    routing = st.one_of(
        st.just({}),
        st.fixed_dictionaries({"kind": st.just("handoff")}, optional={"target": st.sampled_from(members),
                                                                       "tool": st.sampled_from(TOOLS)}),
        st.fixed_dictionaries({"kind": st.just("finish")}, optional={"reason": st.sampled_from(["ok", ""])}),
        st.fixed_dictionaries({"kind": st.just("text")}, optional={"tool": st.sampled_from(TOOLS)}))
    return st.fixed_dictionaries({"routing": routing, "body": st.sampled_from(["", "done"])},
                                 optional={"context_updates": st.fixed_dictionaries(
                                     {"set": st.fixed_dictionaries({"k": st.sampled_from(VALUES)})})})


def ag2_metadata(kind: str, members: list[str], knobs: dict[str, Any]) -> ChannelMetadata:
    roles = [ParticipantRole.INITIATOR] + [ParticipantRole.RESPONDENT if len(members) == 2
                                           else ParticipantRole.PARTICIPANT] * (len(members) - 1)
    return ChannelMetadata(channel_id="ch_1", manifest=AG2[kind].manifest, creator_id=members[0],
                           participants=[Participant(agent_id=a, role=r, order=i)
                                         for i, (a, r) in enumerate(zip(members, roles))],
                           state=ChannelState.ACTIVE, created_at="", knobs=knobs)


def ag2_accepts(adapter, meta, env: Envelope, state) -> bool:
    try:
        adapter.validate_send(meta, env, state)
    except NetworkError:
        return False
    return True


def ours_accepts(kind: str, members: list[str], state: dict[str, Any], env: Envelope):
    try:
        return True, turns.check(kind, members, state, "ch_1", env.sender_id, env.event_type, env.event_data)
    except ProtocolError:
        return False, None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_our_adapters_decide_every_send_as_ag2s_adapters_do(data):
    kind, members, knobs = data.draw(channels())
    adapter, meta = AG2[kind], ag2_metadata(kind, members, knobs)
    theirs = adapter.initial_state(meta)
    ours = adapters.adapter(kind).initial_state(members, knobs)
    log: list[dict[str, Any]] = [{"envelope_id": "env_0", "event_type": "opened"}]
    for step in range(data.draw(st.integers(1, 12))):
        expected = adapter.expected_next(meta, theirs)
        got = turns.expected_next(kind, ours, log)
        assert (got and (got.agent_id, got.triggering_envelope_id)) == \
            (expected and (expected.agent_id, expected.triggering_envelope_id)), (kind, knobs, log)
        for sender in members + [OUTSIDER]:  # can_send: every kind of envelope from everyone
            for event_type in PROBES:
                probe = Envelope(channel_id="ch_1", sender_id=sender, audience=None, event_type=event_type,
                                 event_data={"text": ""})
                assert ours_accepts(kind, members, ours, probe)[0] == ag2_accepts(adapter, meta, probe, theirs), \
                    (kind, knobs, log, sender, event_type)
        sender = data.draw(st.sampled_from(members + [OUTSIDER]), label=f"sender {step}")
        if kind == "workflow" and data.draw(st.booleans(), label=f"packet {step}"):
            env = Envelope(channel_id="ch_1", sender_id=sender, audience=None, event_type=ev.EV_PACKET,
                           event_data=data.draw(packet_data(members), label=f"packet data {step}"))
        else:
            env = Envelope(channel_id="ch_1", sender_id=sender, audience=None, event_type=ev.EV_TEXT,
                           event_data={"text": f"turn {step}"})
        env.envelope_id = f"env_{step + 1}"
        accepted, checked = ours_accepts(kind, members, ours, env)
        assert accepted == ag2_accepts(adapter, meta, env, theirs), (kind, knobs, log, env)
        if not accepted:
            continue
        _, decision = checked  # a text, or a packet in a workflow: always a turn
        theirs = adapter.fold(env, theirs)
        closes = adapter.on_accepted(meta, env, theirs).next_state == ChannelState.CLOSED
        ours = decision.state
        log.append({"envelope_id": env.envelope_id, "event_type": "text" if env.event_type == ev.EV_TEXT else "packet"})
        assert (decision.close_reason is not None) == closes, (kind, knobs, log)
        if closes:
            return


def test_a_packet_that_deletes_a_context_variable_is_refused_not_half_applied():
    """Relaynet's handoff only sets context variables; AG2's packet may delete them."""
    members = ["ann", "bob"]
    knobs = {"graph": {"initial_speaker": "ann", "transitions": [], "default_target": {"name": "round_robin",
                                                                                         "args": {}}}}
    state = adapters.adapter("workflow").initial_state(members, knobs)
    with pytest.raises(ProtocolError, match="does not delete"):
        turns.check("workflow", members, state, "ch_1", "ann", ev.EV_PACKET,
                    {"routing": {}, "context_updates": {"delete": ["k"]}})


def test_a_text_in_a_workflow_is_a_handoff_the_graph_routes():
    members = ["ann", "bob", "cyd"]
    graph = {"initial_speaker": "ann", "transitions": [{"when": {"name": "from_speaker", "args": {"agent_id": "ann"}},
                                                        "then": {"name": "agent", "args": {"agent_id": "cyd"}}}]}
    state = adapters.adapter("workflow").initial_state(members, {"graph": graph})
    send, decision = turns.check("workflow", members, state, "ch_1", "ann", ev.EV_TEXT, {"text": "hi"})
    assert send.tool == "handoff" and send.target is None
    assert turns.expected_next("workflow", decision.state, [{"envelope_id": "e1", "event_type": "text"}]) == \
        turns.ExpectedTurn("cyd", "e1")
    with pytest.raises(ProtocolError, match="cyd"):
        turns.check("workflow", members, decision.state, "ch_1", "bob", ev.EV_TEXT, {"text": "me?"})


# -- the ops on DynamoDB Local: one channel, both surfaces, one set of rules ----------------------

SPEC = "network: turns\nagents:\n  - {name: ann, instances: 1}\n  - {name: bob, instances: 1}\n  - {name: cyd, instances: 1}\n"


def _session(net, agent: str):
    from relaynet import clock
    from relaynet.ag2 import ops
    from relaynet.identity import hash_token
    from relaynet.store import ag2 as ag2_store

    conn, p = f"conn-{agent}", net.principals[f"{agent}0"]
    ag2_store.put_connection(conn, clock.now_ms())
    assert ag2_store.bind(conn, net.network_id, agent, p.instance_id, hash_token(net.token(f"{agent}0")),
                          clock.now_ms())
    return ops.Session(connection_id=conn, connection=ag2_store.get_connection(conn))


def test_a_plugin_handoff_and_an_ag2_text_take_turns_by_the_same_rules(server_table):
    """A workflow opened on the plugin surface: ann's handoff names cyd, which the graph alone
    would not pick (AG2's adapters ignored a Relaynet packet's target); the AG2 wire then expects
    cyd, refuses bob, and cyd's AG2 text is routed by the graph back to ann."""
    from relaynet import channels
    from relaynet.ag2 import ops
    from relaynet.models import plugin as m
    from relaynet.plugin_tools import channels as plugin
    from tests.conftest import apply

    net = apply(SPEC)
    graph = {"initial_speaker": "ann", "transitions": [
        {"when": {"name": "from_speaker", "args": {"agent_id": "ann"}}, "then": {"name": "agent", "args": {"agent_id": "bob"}}},
        {"when": {"name": "from_speaker", "args": {"agent_id": "cyd"}}, "then": {"name": "revert_to_initiator", "args": {}}}]}
    ch = channels.open_channel(net.principals["ann0"], "workflow", ["bob", "cyd"], {"graph": graph}, None, None,
                               None)["channel_id"]
    ann, bob, cyd = (_session(net, a) for a in ("ann", "bob", "cyd"))
    assert [t["channel_id"] for t in ops.op_pending_turns_for(ann, {"agent_id": "ann"})] == [ch]
    handed = plugin.handoff(net.principals["ann0"], m.HandoffRequest(channel_id=ch, content="yours", target="cyd"))
    assert handed["next_speaker"] == "cyd"
    assert ops.op_pending_turns_for(bob, {"agent_id": "bob"}) == []
    [turn] = ops.op_pending_turns_for(cyd, {"agent_id": "cyd"})
    assert turn["triggering_envelope_id"] == handed["envelope_id"]
    assert (ops.op_can_send(bob, {"channel_id": ch, "sender_id": "bob"}),
            ops.op_can_send(cyd, {"channel_id": ch, "sender_id": "cyd"})) == (False, True)
    text = {"channel_id": ch, "sender_id": "bob", "audience": None, "event_type": ev.EV_TEXT,
            "event_data": {"text": "me?"}}
    with pytest.raises(ProtocolError, match="cyd"):
        ops.op_post_envelope(bob, {"envelope": text})
    sent = ops.op_post_envelope(cyd, {"envelope": {**text, "sender_id": "cyd", "event_data": {"text": "done"}}})
    assert channels.load_channel(net.network_id, ch)["adapter_state"]["expected"] == "ann"
    [turn] = ops.op_pending_turns_for(ann, {"agent_id": "ann"})
    assert turn["triggering_envelope_id"] == sent


def test_malformed_envelopes_are_still_protocol_errors(server_table):
    from relaynet.ag2 import ops
    from tests.conftest import apply

    net = apply(SPEC)
    ann = _session(net, "ann")
    for bad in ("not an object", {"channel_id": "c", "sender_id": "ann"},
                {"channel_id": "c", "sender_id": "ann", "audience": None, "event_type": "t", "event_data": {}, "x": 1}):
        with pytest.raises(ProtocolError, match="malformed envelope"):
            ops.op_post_envelope(ann, {"envelope": bad})
