"""The AWS push at the write (issue 26; relaynet.push_at_write): which stream functions a commit
is offered to, in what batches, what a bad target setting gets, and Lambda's Invoke API as the
local stack serves it (relaynet_local.lambda_api) answering a real boto3 client."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.config import Config
from hypothesis import given, settings
from hypothesis import strategies as st

from relaynet import push_at_write as paw
from relaynet.config import Settings, SettingsError
from relaynet.stream_targets import SOURCES
from relaynet_local.lambda_api import LambdaApi
from relaynet_local.template import Function


def _image(**attrs: str) -> dict:
    return {"PK": {"S": "NET#n#MBX#i"}, "SK": {"S": "MSG#1"}, **{k: {"S": v} for k, v in attrs.items()}}


def test_a_bad_targets_setting_is_refused_by_name_and_installs_nothing():
    for bad, why in (("NotifierFunction", "is not <logical id>=<function name or ARN>"),
                     ("HealthFunction=x", "is not a stream function of template.yaml")):
        with pytest.raises(SettingsError) as err:
            Settings.from_environ({paw.TARGETS_ENV: bad})
        assert paw.TARGETS_ENV in err.value.variables and why in str(err.value)
        with pytest.raises(ValueError, match=why):
            paw.install({paw.TARGETS_ENV: bad})
        assert paw.installed() is None
    assert paw.install({}) is None
    assert paw.install({paw.TARGETS_ENV: "NotifierFunction=n", "RELAYNET_PUSH_AT_WRITE": "false"}) is None


def test_a_commit_is_offered_to_exactly_the_functions_whose_filters_take_it_and_a_failure_never_raises():
    calls: list[tuple[str, dict]] = []

    def invoke(name: str, payload: bytes) -> None:
        calls.append((name, json.loads(payload)))
        if name == "down":
            raise ConnectionError("refused")

    pusher = paw.InvokeAtWrite({"NotifierFunction": "notifier:live", "Ag2NotifierFunction": "down"},
                               region="eu-west-1", invoke=invoke)
    entry = _image(GSI3PK="NET#n#BOX#i")  # a mailbox entry (the webhook notifier's filter)
    envelope = _image(kind="envelope")  # an AG2 envelope (the AG2 notifier's)
    pusher([entry, _image(kind="thread"), envelope])
    assert [name for name, _ in calls] == ["notifier:live", "down"]
    (_, to_notifier), (_, to_ag2) = calls
    assert [r["dynamodb"]["NewImage"] for r in to_notifier["Records"]] == [entry]
    assert [r["dynamodb"]["NewImage"] for r in to_ag2["Records"]] == [envelope]
    record = to_notifier["Records"][0]
    assert record["eventName"] == "INSERT" and record["awsRegion"] == "eu-west-1"
    assert record["dynamodb"]["Keys"] == {"PK": entry["PK"], "SK": entry["SK"]}
    assert (pusher.sent, pusher.failed, pusher.skipped) == (1, 1, 0)
    pusher([_image(kind="thread")])  # nothing any filter takes: no request
    assert len(calls) == 2
    pusher([entry])  # the failure opened the breaker: the stream carries this process's pushes for a while
    assert len(calls) == 2 and pusher.skipped == 1
    pusher._broken_until = 0.0  # BREAK_SECONDS later
    pusher([entry])
    assert [name for name, _ in calls[2:]] == ["notifier:live"] and pusher.sent == 2


records = st.lists(st.integers(min_value=0, max_value=300_000).map(
    lambda n: {"eventName": "INSERT", "dynamodb": {"NewImage": {"x": {"S": "a" * n}}}}), max_size=12)


@settings(max_examples=60, deadline=None)
@given(records, st.integers(min_value=1, max_value=10))
def test_batches_keep_the_order_and_both_limits_and_leave_only_a_too_large_record_to_the_stream(rs, size):
    payloads = paw.batches(rs, size)
    sent = [r for p in payloads for r in json.loads(p)["Records"]]
    alone = [r for r in rs if len(json.dumps(r, separators=(",", ":"))) + 20 <= paw.MAX_PAYLOAD_BYTES]
    assert sent == alone
    for p in payloads:
        assert len(p) <= paw.MAX_PAYLOAD_BYTES and 1 <= len(json.loads(p)["Records"]) <= size


def test_the_generated_targets_are_the_template_stream_functions():
    from relaynet_local.streams import stream_sources
    from relaynet_local.template import load_template
    from tests.conftest import ROOT

    sources = {s.function.logical_id: s for s in stream_sources(load_template(ROOT / "template.yaml"))}
    assert {lid: (s.batch_size, s.patterns) for lid, s in sources.items()} == {
        lid: (v["batchSize"], v["patterns"]) for lid, v in SOURCES.items()}


def test_the_local_invoke_api_answers_a_boto3_client_as_lambda_does(tmp_path):
    function = Function(logical_id="NotifierFunction", code_uri=str(tmp_path), handler="echo.handler")
    ran: list[dict] = []

    def invoke(fn, event):
        ran.append(event)
        return {"got": event}

    api = LambdaApi({"NotifierFunction": function}, invoke).start()
    try:
        client = boto3.client("lambda", endpoint_url=api.endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing",
                              config=Config(retries={"total_max_attempts": 1}))
        answer = client.invoke(FunctionName="arn:aws:lambda:us-east-1:1:function:NotifierFunction:live",
                               InvocationType="Event", Payload=b'{"Records": []}')
        assert answer["StatusCode"] == 202
        answer = client.invoke(FunctionName="NotifierFunction", Qualifier="live", InvocationType="Event",
                               Payload=b'{"Records": []}')
        assert answer["StatusCode"] == 202
        answer = client.invoke(FunctionName="NotifierFunction", Payload=b'{"a": 1}')
        assert answer["StatusCode"] == 200 and json.loads(answer["Payload"].read()) == {"got": {"a": 1}}
        with pytest.raises(client.exceptions.ResourceNotFoundException):
            client.invoke(FunctionName="Nope", InvocationType="Event", Payload=b"{}")
        with pytest.raises(client.exceptions.InvalidRequestContentException):
            client.invoke(FunctionName="NotifierFunction", InvocationType="Event", Payload=b"[1]")
        stranger = boto3.client("lambda", endpoint_url=api.endpoint.rsplit("/", 1)[0] + "/guess",
                                region_name="us-east-1", aws_access_key_id="testing",
                                aws_secret_access_key="testing", config=Config(retries={"total_max_attempts": 1}))
        with pytest.raises(Exception) as err:
            stranger.invoke(FunctionName="NotifierFunction", InvocationType="Event", Payload=b"{}")
        assert "AccessDenied" in str(err.value)
    finally:
        api.stop()  # the accepted invocation has run before its thread ends
    assert {"Records": []} in ran and api.accepted == {"NotifierFunction": 2} == api.finished
