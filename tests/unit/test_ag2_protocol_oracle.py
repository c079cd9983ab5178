"""Relaynet's models of AG2's protocol (relaynet.ag2.protocol) against AG2 1.2.1's own, the
oracle (``ag2`` is a test dependency; the wire never imports it): for generated instances, both
serialise to the same JSON and each parses the other's to equal values; the same inputs are
refused; the manifests, error codes and durations are AG2's."""

from __future__ import annotations

import json
import string
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("ag2.network")

from ag2.network import channel as ag2_channel  # noqa: E402
from ag2.network import envelope as ag2_envelope  # noqa: E402
from ag2.network import errors as ag2_errors  # noqa: E402
from ag2.network import identity as ag2_identity  # noqa: E402
from ag2.network import rule as ag2_rule  # noqa: E402
from ag2.network.adapters.consulting import ConsultingAdapter  # noqa: E402
from ag2.network.adapters.conversation import ConversationAdapter  # noqa: E402
from ag2.network.adapters.discussion import DiscussionAdapter  # noqa: E402
from ag2.network.adapters.workflow import WorkflowAdapter  # noqa: E402
from ag2.network.client.hub_client import _ERROR_CLASSES  # noqa: E402
from ag2.network.hub.core import _ERROR_CODE_MAP  # noqa: E402
from ag2.network.transport import frames as ag2_frames  # noqa: E402
from ag2 import task as ag2_task  # noqa: E402

from relaynet.ag2.protocol import channel, envelope, errors, frames, identity, rule, task  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(alphabet=string.ascii_letters + string.digits + "_-. é", max_size=12)
opt_text = st.none() | text
json_scalar = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False,
                                                                                   allow_infinity=False) | text
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(text, inner, max_size=3), max_leaves=8)
json_object = st.dictionaries(text, json_value, max_size=4)
number = st.none() | st.integers(0, 1000) | st.floats(0, 1000, allow_nan=False)
small = st.integers(0, 10**6)


def same(ours_obj, theirs_obj) -> None:
    """Same dict, same JSON text (key order included), and each side parses the other's dict
    to an equal value."""
    mine, theirs = ours_obj.to_dict(), theirs_obj.to_dict()
    assert mine == theirs
    assert json.dumps(mine) == json.dumps(theirs)
    assert type(ours_obj).from_dict(theirs) == ours_obj
    assert type(theirs_obj).from_dict(mine) == theirs_obj


# -- envelope ---------------------------------------------------------------------------------------

ag2_envelopes = st.builds(
    ag2_envelope.Envelope, channel_id=text, sender_id=text, audience=st.none() | st.lists(text, max_size=3),
    event_type=st.sampled_from([envelope.EV_TEXT, envelope.EV_PACKET, envelope.EV_CHANNEL_OPENED]) | text,
    event_data=json_object, envelope_id=text, task_id=opt_text, causation_id=opt_text, trace_id=opt_text,
    priority=st.sampled_from(["background", "normal", "urgent"]), depth=small, idempotency_key=opt_text,
    created_at=text, ttl_seconds=st.none() | small)


@SETTINGS
@given(ag2_envelopes)
def test_envelopes_serialise_and_parse_as_ag2s(theirs):
    same(envelope.Envelope.from_dict(theirs.to_dict()), theirs)


def test_an_envelope_of_the_required_keys_gets_ag2s_defaults():
    required = {"channel_id": "c", "sender_id": "s", "audience": None, "event_type": "t", "event_data": {}}
    same(envelope.Envelope.from_dict(required), ag2_envelope.Envelope.from_dict(required))


def test_event_type_names_are_ag2s():
    for name in ag2_envelope.__all__:
        if name.startswith("EV_"):
            assert getattr(envelope, name) == getattr(ag2_envelope, name), name


# -- identity ---------------------------------------------------------------------------------------

ag2_auth = st.builds(ag2_identity.AuthBlock, scheme=text, issuer=opt_text, audience=opt_text,
                     key_fingerprint=opt_text, claim=json_object)
ag2_cost = st.builds(ag2_identity.CostProfile, input_per_mtok=number, output_per_mtok=number,
                     latency_tier=opt_text)
ag2_passports = st.builds(
    ag2_identity.Passport, name=text, owner=text, provider=opt_text, model=opt_text, cost=st.none() | ag2_cost,
    region=opt_text, auth=ag2_auth, kind=st.sampled_from([None, "agent", "human", "remote_agent"]),
    hub_id=opt_text, version=small, agent_id=opt_text, created_at=text)
ag2_stats = st.builds(ag2_identity.ObservedStat, n=small, completed=small, failed=small, expired=small,
                      p50_latency_ms=st.none() | small)
ag2_examples = st.builds(ag2_identity.ResumeExample, title=text, outcome=text, task_id=opt_text,
                         channel_id=opt_text, when=opt_text, note=text)
ag2_resumes = st.builds(
    ag2_identity.Resume, claimed_capabilities=st.lists(text, max_size=3), domains=st.lists(text, max_size=3),
    summary=text, examples=st.lists(ag2_examples, max_size=2), observed=st.dictionaries(text, ag2_stats, max_size=2),
    version=small, last_updated=text)


@SETTINGS
@given(ag2_passports, ag2_resumes)
def test_passports_and_resumes_serialise_and_parse_as_ag2s(passport, resume):
    ours = identity.Passport.from_dict(passport.to_dict())
    same(ours, passport)
    assert ours.effective_kind == passport.effective_kind
    same(identity.Resume.from_dict(resume.to_dict()), resume)


def test_identity_defaults_are_ag2s():
    same(identity.Passport(name="a"), ag2_identity.Passport(name="a"))
    same(identity.Resume(), ag2_identity.Resume())
    for ours_cls, theirs_cls in ((identity.ObservedStat, ag2_identity.ObservedStat),
                                 (identity.AuthBlock, ag2_identity.AuthBlock),
                                 (identity.CostProfile, ag2_identity.CostProfile)):
        assert ours_cls().to_dict() == asdict(theirs_cls())  # AG2 gives these no to_dict


# -- rule -------------------------------------------------------------------------------------------

globs = st.lists(st.sampled_from(["*", "a*", "bob"]), max_size=3)
ag2_rules = st.builds(ag2_rule.Rule, version=small, access=st.builds(
    ag2_rule.AccessBlock, inbound_from=globs, outbound_to=globs,
    channel_types=st.builds(ag2_rule.ChannelTypeAccess, initiate=globs, accept=globs)),
    limits=st.builds(ag2_rule.LimitsBlock, max_concurrent_channels=small, max_concurrent_tasks=small,
                     channel_ttl_default=st.sampled_from(["2h", "30m", "90"]) | small,
                     task_ttl_default=st.sampled_from(["15m", "1d"]),
                     rate=st.builds(ag2_rule.RateBlock, per_minute=small, burst=small), delegation_depth=small,
                     inbox=st.builds(ag2_rule.InboxBlock, max_pending=small, overflow=text,
                                     high_water=st.none() | small)))


@SETTINGS
@given(ag2_rules)
def test_rules_serialise_and_parse_as_ags2(theirs):
    same(rule.Rule.from_dict(theirs.to_dict()), theirs)


def test_a_partial_rule_fills_ag2s_defaults():
    partial = {"limits": {"rate": {"burst": 3}}, "access": {"channel_types": {"accept": ["consulting"]}}}
    same(rule.Rule.from_dict(partial), ag2_rule.Rule.from_dict(partial))
    same(rule.Rule(), ag2_rule.Rule())


@SETTINGS
@given(st.integers(-100, 10**6) | st.from_regex(r"\A-?[0-9]{0,4}[smhdxy ]?\Z") | st.text(max_size=4))
def test_durations_parse_as_ag2s_or_fail_the_same_way(value):
    try:
        expected = ag2_rule.parse_duration(value)
    except Exception as exc:  # noqa: BLE001 - the oracle's exception class is the expectation
        with pytest.raises(type(exc)):
            rule.parse_duration(value)
    else:
        assert rule.parse_duration(value) == expected


# -- channel ----------------------------------------------------------------------------------------

AG2_ADAPTERS = (ConsultingAdapter(), ConversationAdapter(), DiscussionAdapter(), WorkflowAdapter())


def test_the_manifests_are_ag2s_adapters():
    assert sorted(channel.CHANNEL_TYPES) == sorted(a.manifest.type for a in AG2_ADAPTERS)
    for adapter in AG2_ADAPTERS:
        same(channel.manifest(adapter.manifest.type), adapter.manifest)


ag2_participants = st.builds(ag2_channel.Participant, agent_id=text, role=st.sampled_from(ag2_channel.ParticipantRole),
                             order=small, joined_at=text)
ag2_metadata = st.builds(
    ag2_channel.ChannelMetadata, channel_id=text, manifest=st.sampled_from([a.manifest for a in AG2_ADAPTERS]),
    creator_id=text, participants=st.lists(ag2_participants, max_size=4), state=st.sampled_from(ag2_channel.ChannelState),
    created_at=text, expires_at=opt_text, closed_at=opt_text, close_reason=text, parent_channel_id=opt_text,
    knobs=json_object, labels=st.dictionaries(text, text, max_size=3), required_acks=st.none() | small,
    pending_acks=st.lists(text, max_size=3), rejected_by=st.lists(text, max_size=3))


@SETTINGS
@given(ag2_metadata)
def test_channel_metadata_serialises_and_parses_as_ag2s(theirs):
    ours = channel.ChannelMetadata.from_dict(theirs.to_dict())
    same(ours, theirs)
    assert ours.is_terminal() == theirs.is_terminal() and ours.participant_ids() == theirs.participant_ids()


def test_channel_enums_are_ag2s():
    assert [s.value for s in channel.ChannelState] == [s.value for s in ag2_channel.ChannelState]
    assert [r.value for r in channel.ParticipantRole] == [r.value for r in ag2_channel.ParticipantRole]


# -- task -------------------------------------------------------------------------------------------

ag2_tasks = st.builds(
    ag2_task.TaskMetadata, task_id=text, owner_id=text,
    spec=st.builds(ag2_task.TaskSpec, title=text, description=text, payload=json_object, capability=opt_text),
    state=st.sampled_from(ag2_task.TaskState), created_at=text, started_at=opt_text, completed_at=opt_text,
    expires_at=opt_text, last_progress_at=opt_text, progress=json_object, result=json_value, error=text,
    channel_id=opt_text)


@SETTINGS
@given(ag2_tasks)
def test_task_metadata_serialises_and_parses_as_ag2s(theirs):
    same(task.TaskMetadata.from_dict(theirs.to_dict()), theirs)


@pytest.mark.parametrize("partial", [
    {"task_id": "t", "owner_id": "o"},
    {"task_id": 7, "owner_id": "o", "spec": "legacy", "state": "running", "error": None, "created_at": 5},
    {"task_id": "t", "owner_id": "o", "spec": {"title": 3, "capability": 9}, "progress": None, "extra": 1},
])
def test_task_metadata_reads_partial_and_legacy_payloads_as_ag2_does(partial):
    assert task.TaskMetadata.from_dict(partial).to_dict() == ag2_task.TaskMetadata.from_dict(partial).to_dict()


def test_task_states_are_ag2s():
    assert [s.value for s in task.TaskState] == [s.value for s in ag2_task.TaskState]
    assert {s.value for s in task.TERMINAL_TASK_STATES} == {s.value for s in ag2_task.TERMINAL_TASK_STATES}


# -- frames -----------------------------------------------------------------------------------------

ag2_frame_values = st.one_of(
    st.builds(ag2_frames.HelloFrame, name=text, auth_scheme=text, auth_claim=json_object, since_envelope_id=opt_text),
    st.builds(ag2_frames.WelcomeFrame, endpoint_id=text, hub_time=text),
    st.just(ag2_frames.PingFrame()), st.just(ag2_frames.PongFrame()),
    st.builds(ag2_frames.RequestFrame, request_id=text, op=text, params=json_object),
    st.builds(ag2_frames.ResponseFrame, request_id=text, ok=st.booleans(), result=json_value, error_code=text,
              error_message=text),
    st.builds(ag2_frames.ErrorFrame, code=text, message=text, envelope_id=opt_text),
    st.builds(ag2_frames.NotifyFrame, envelope=ag2_envelopes, recipient_id=text),
    st.builds(ag2_frames.ReceiptFrame, envelope_id=text, status=st.sampled_from(["ack", "nack"]), recipient_id=text,
              channel_id=text, reason=text))


@SETTINGS
@given(ag2_frame_values)
def test_frames_encode_and_decode_as_ag2s(theirs):
    wire = json.loads(json.dumps(ag2_frames.encode_frame(theirs)))
    ours = frames.decode_frame(wire)
    assert type(ours).__name__ == type(theirs).__name__ and ours.kind == theirs.kind
    assert frames.encode_frame(ours) == ag2_frames.encode_frame(theirs)
    assert json.dumps(frames.encode_frame(ours)) == json.dumps(ag2_frames.encode_frame(theirs))
    assert ag2_frames.decode_frame(json.loads(json.dumps(frames.encode_frame(ours)))) == theirs


@pytest.mark.parametrize("data", [
    {"kind": "hello", "name": "a"}, {"kind": "request", "request_id": "r", "op": "x"},
    {"kind": "response", "request_id": "r", "ok": False}, {"kind": "error", "code": "c", "message": "m"},
    {"kind": "receipt", "envelope_id": "e", "status": "ack"},
    {"kind": "notify", "envelope": {"channel_id": "c", "sender_id": "s", "audience": None, "event_type": "t",
                                    "event_data": {}}},
])
def test_frames_of_the_required_keys_get_ag2s_defaults(data):
    assert frames.encode_frame(frames.decode_frame(data)) == ag2_frames.encode_frame(ag2_frames.decode_frame(data))


@pytest.mark.parametrize("data", [
    {"kind": "nope"}, {}, {"kind": "ping", "extra": 1}, {"kind": "request", "op": "x"},
    {"kind": "hello"}, {"kind": "receipt", "envelope_id": "e", "status": "ack", "more": ""},
    {"kind": "notify", "envelope": {"channel_id": "c"}},
])
def test_frames_ag2_cannot_decode_we_cannot_either(data):
    """The same exception class (relaynet.ag2.frames drops both alike), but for a notify's
    malformed envelope, which pydantic refuses with a ValueError where AG2's ``cls(**data)``
    raises a TypeError."""
    with pytest.raises((TypeError, ValueError)) as theirs:
        ag2_frames.decode_frame(data)
    expected = ValueError if "envelope" in data else type(theirs.value)
    with pytest.raises(expected):
        frames.decode_frame(data)


def test_decoding_takes_values_as_sent_as_ag2_does():
    """The hub checks the types of the fields it reads itself (relaynet.ag2.frames.malformed_field)."""
    data = {"kind": "request", "request_id": 7, "op": ["x"], "params": []}
    ours, theirs = frames.decode_frame(data), ag2_frames.decode_frame(data)
    assert (ours.request_id, ours.op, ours.params) == (theirs.request_id, theirs.op, theirs.params)


# -- what both refuse -------------------------------------------------------------------------------

@pytest.mark.parametrize("ours_cls, theirs_cls, data", [
    (envelope.Envelope, ag2_envelope.Envelope, {"channel_id": "c", "sender_id": "s", "audience": None,
                                                 "event_type": "t", "event_data": {}, "color": "red"}),
    (envelope.Envelope, ag2_envelope.Envelope, {"channel_id": "c", "sender_id": "s"}),
    (identity.Passport, ag2_identity.Passport, {"name": "a", "kind": "robot"}),
    (identity.Passport, ag2_identity.Passport, {"owner": "o"}),
    (identity.Passport, ag2_identity.Passport, {"name": "a", "auth": {"scheme": "x", "secret": 1}}),
    (identity.Resume, ag2_identity.Resume, {"observed": {"cap": {"n": 1, "p99": 2}}}),
    (rule.Rule, ag2_rule.Rule, {"limits": {"inbox": {"size": 3}}}),
    (channel.ChannelMetadata, ag2_channel.ChannelMetadata, {"channel_id": "c", "state": "active"}),
    (channel.ChannelMetadata, ag2_channel.ChannelMetadata, {
        "channel_id": "c", "manifest": {"type": "x"}, "creator_id": "a", "participants": [], "state": "gone",
        "created_at": ""}),
])
def test_what_ag2_refuses_to_parse_we_refuse(ours_cls, theirs_cls, data):
    with pytest.raises((TypeError, ValueError)):
        theirs_cls.from_dict(data)
    with pytest.raises(ValueError):  # pydantic's ValidationError: the wire answers both with code "error"
        ours_cls.from_dict(data)


def test_values_of_the_wrong_type_are_refused_where_ag2_would_store_them():
    """The one deliberate difference (relaynet.ag2.protocol.base): a typed record is typed."""
    data = {"channel_id": "c", "sender_id": "s", "audience": "everyone", "event_type": "t", "event_data": {}}
    assert ag2_envelope.Envelope.from_dict(data).audience == "everyone"
    with pytest.raises(ValueError):
        envelope.Envelope.from_dict(data)


# -- errors -----------------------------------------------------------------------------------------

def test_error_codes_are_ag2s_both_ways():
    assert {code: cls.__name__ for cls, code in errors.ERROR_CODES} == \
        {code: cls.__name__ for cls, code in _ERROR_CODE_MAP.items()}
    assert {code: cls.__name__ for code, cls in _ERROR_CLASSES.items()} == \
        {code: cls.__name__ for cls, code in errors.ERROR_CODES}
    for cls, code in errors.ERROR_CODES:
        assert errors.error_code(cls("x")) == code and issubclass(cls, errors.NetworkError)
    assert errors.error_code(ValueError("x")) == "error"
    assert {n for n in ag2_errors.__all__ if n != "InboxFull"} <= set(errors.__all__)
