"""What an operator reads: EMF metrics of the calls that matter, settings that fail at load,
and no tracer code unless tracing is on (relaynet.observability, relaynet.config;
docs/architecture.md "Observability")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from relaynet.config import Settings, SettingsError, settings
from tests.conftest import ROOT


def emf_records(text: str) -> list[dict]:
    """The CloudWatch EMF records among the lines of ``text`` (powertools Metrics prints them)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"_aws"' in line:
            out.append(json.loads(line))
    return out


def metric_values(records: list[dict], name: str) -> list[float]:
    """Every value of metric ``name`` in ``records`` (EMF holds one value or a list of them)."""
    out: list[float] = []
    for r in records:
        if name in r:
            out += r[name] if isinstance(r[name], list) else [r[name]]
    return out


def test_a_claim_conflict_is_counted_in_the_invocations_emf_record(demo, api, capsys):
    assert api("network_claim", {"scope": "src/api/**"}, demo.token("coder0"))[0] == 200
    capsys.readouterr()
    status, body, _ = api("network_claim", {"scope": "src/api/users.py"}, demo.token("coder1"))
    assert status == 409 and body["error"]["details"]["reason"] == "claim_conflict"
    records = emf_records(capsys.readouterr().out)
    assert len(records) == 1, "one flush per invocation"
    record = records[0]
    assert metric_values(records, "ClaimConflict") == [1.0]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Relaynet")
    assert {"Name": "ClaimConflict", "Unit": "Count"} in directive["Metrics"]
    assert record["function"] == "network_claim"
    assert "function" in directive["Dimensions"][0]


def test_a_call_that_counts_nothing_writes_no_emf_record(demo, api, capsys):
    capsys.readouterr()
    assert api("network_whoami", {}, demo.token("coder0"))[0] == 200
    assert emf_records(capsys.readouterr().out) == []


def test_a_full_mailbox_429_is_counted_as_rate_limited(demo, api, capsys, monkeypatch):
    monkeypatch.setenv("RELAYNET_MAILBOX_CAP", "1")
    settings.cache_clear()
    assert api("network_ask", {"toAgent": "reviewer", "body": "one"}, demo.token("coder0"))[0] == 200
    capsys.readouterr()
    status, body, _ = api("network_ask", {"toAgent": "reviewer", "body": "two"}, demo.token("coder0"))
    assert status == 429 and body["error"]["code"] == "rate_limited"
    records = emf_records(capsys.readouterr().out)
    assert metric_values(records, "RateLimited") == [1.0]
    assert records[0]["rate_limit"] == "mailbox_cap"


def test_metrics_disabled_counts_nothing(demo, api, capsys, monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    settings.cache_clear()
    from relaynet import observability

    assert api("network_claim", {"scope": "docs/**"}, demo.token("coder0"))[0] == 200
    assert api("network_claim", {"scope": "docs/a.md"}, demo.token("coder1"))[0] == 409
    assert emf_records(capsys.readouterr().out) == []
    assert "ClaimConflict" not in observability.metrics.metric_set, "nothing piles up in memory"


def test_a_bad_setting_fails_at_load_naming_the_variable():
    with pytest.raises(SettingsError) as caught:
        Settings.from_environ({"RELAYNET_OFFER_TTL_SECONDS": "abc", "RELAYNET_MAX_WAIT_SECONDS": "60"})
    message = str(caught.value)
    assert "RELAYNET_OFFER_TTL_SECONDS='abc': must be a whole number" in message
    assert "RELAYNET_MAX_WAIT_SECONDS='60'" in message and "25" in message
    assert caught.value.variables == ["RELAYNET_OFFER_TTL_SECONDS", "RELAYNET_MAX_WAIT_SECONDS"]


@pytest.mark.parametrize("name, value", [
    ("RELAYNET_PUSH_ALLOW_LOOPBACK", "maybe"),
    ("RELAYNET_PUSH_TIMEOUT_SECONDS", "0"),
    ("RELAYNET_MAILBOX_CAP", "1.5"),
    ("RELAYNET_AG2_INVITE_TIMEOUT_SECONDS", "0"),
    ("RELAYNET_AG2_INVITE_TIMEOUT_SECONDS", "3601"),
    ("POWERTOOLS_METRICS_DISABLED", "sometimes"),
])
def test_each_bad_value_names_its_variable(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_environ({name: value})


def test_unset_and_empty_variables_take_the_defaults_the_template_documents():
    s = Settings.from_environ({"RELAYNET_OFFER_TTL_SECONDS": "", "RELAYNET_PUSH_ALLOW_LOOPBACK": "true"})
    assert (s.offer_ttl, s.max_wait, s.channel_ttl, s.push_allow_loopback, s.metrics, s.tracing) == (
        300, 20, 7200, True, True, False)


def test_a_handler_with_a_bad_setting_fails_its_cold_start(monkeypatch):
    """The container does not start (Lambda reports an init error naming the variable); no
    request is ever half-served with a bad value."""
    from relaynet_local import lambdas

    monkeypatch.setenv("RELAYNET_OFFER_TTL_SECONDS", "abc")
    settings.cache_clear()
    try:
        with pytest.raises(SettingsError, match="RELAYNET_OFFER_TTL_SECONDS='abc'"):
            lambdas._import(str(ROOT / "functions"), "network_delegate", ROOT / "functions" / "network_delegate.py")
    finally:
        settings.cache_clear()


def test_relaynet_serve_refuses_a_bad_setting_before_starting_anything(tmp_path):
    env = {**os.environ, "RELAYNET_OFFER_TTL_SECONDS": "abc"}
    env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    proc = subprocess.run([sys.executable, "-m", "relaynet.cli", "serve", "--port", "0",
                           "--template", str(ROOT / "template.yaml")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "RELAYNET_OFFER_TTL_SECONDS='abc': must be a whole number" in proc.stderr
    assert not (tmp_path / ".relaynet" / "dynamodb").exists(), "the store was not started"


_IMPORTS = """
import sys
sys.path.insert(0, {functions!r})
import network_claim, sweep
from relaynet import observability
from relaynet.store import table
assert observability.tracer() is None
print(sorted(m for m in sys.modules if m.startswith("aws_xray_sdk")))
"""


def test_without_tracing_no_xray_sdk_is_imported():
    env = {k: v for k, v in os.environ.items() if k != "AWS_LAMBDA_FUNCTION_NAME"}
    out = subprocess.run([sys.executable, "-c", _IMPORTS.format(functions=str(ROOT / "functions"))],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"


def test_tracing_disabled_in_lambda_imports_no_xray_sdk_either():
    env = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": "NetworkClaimFunction", "POWERTOOLS_TRACE_DISABLED": "true"}
    out = subprocess.run([sys.executable, "-c", _IMPORTS.format(functions=str(ROOT / "functions"))],
                         env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"


def test_tracing_on_without_the_tracer_extra_fails_at_start_naming_the_fix():
    """In Lambda with tracing on, a layer built without aws-lambda-powertools[tracer] must fail the
    cold start with what to do, not every store call with an ImportError. (The SDK is made
    unimportable in the child process, as in a layer without the extra.)"""
    env = {k: v for k, v in os.environ.items() if k != "POWERTOOLS_TRACE_DISABLED"}
    env["AWS_LAMBDA_FUNCTION_NAME"] = "NetworkClaimFunction"
    proc = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'functions')!r}); "
                           "sys.modules['aws_xray_sdk'] = None; import network_claim"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "aws-lambda-powertools[tracer]" in proc.stderr and "POWERTOOLS_TRACE_DISABLED=true" in proc.stderr


_TRACED_PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from aws_xray_sdk.core import xray_recorder

sent = []

class Recorder:
    # an X-Ray emitter that keeps what it would send to the daemon
    def send_entity(self, entity):
        sent.append(json.loads(entity.serialize()))
    def set_daemon_address(self, address):
        pass
    @property
    def ip(self): return "127.0.0.1"
    @property
    def port(self): return 2000

from relaynet import observability
tracer = observability.tracer()
assert tracer is not None
xray_recorder.configure(emitter=Recorder())
import boto3
from moto import mock_aws
from relaynet.store import table
from relaynet_local.template import create_table
with mock_aws():
    create_table(boto3.client("dynamodb"), sys.argv[2], "relaynet-test")
    table.put({"PK": "A", "SK": "B", "x": 1})
    assert table.get("A", "B")["x"] == 1
    # a whole tool call, traced: the handler's subsegment carries the tool annotation
    from relaynet import admin, identity
    from relaynet_local.events import http_event
    from relaynet_local.lambdas import LambdaContext
    tokens = admin.apply_spec(open(sys.argv[3]).read())
    token = tokens["networks"]["demo"]["instances"]["coder"][0]["token"]
    import network_whoami
    event = http_event("POST", "/v1/tools/network_whoami", route_key="POST /v1/tools/network_whoami",
                       body="{}", authorizer_context=identity.authorize(token).context())
    assert network_whoami.handler(event, LambdaContext("NetworkWhoamiFunction", 29.0, 512))["statusCode"] == 200
tools = sorted({(e.get("annotations") or {}).get("tool") for e in sent} - {None})
print(json.dumps({"names": sorted({e.get("name") for e in sent}), "tools": tools}))
"""


def test_with_tracing_on_each_store_call_is_a_subsegment(tmp_path):
    """In Lambda with tracing on (the X-Ray SDK's emitter option keeps what the daemon would get,
    the table is moto's): ``## store.put`` and ``## store.get`` around the patched DynamoDB calls,
    and a whole tool call answers 200 with its subsegment annotated ``tool``."""
    script = tmp_path / "probe.py"
    script.write_text(_TRACED_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("POWERTOOLS_TRACE_DISABLED", "AWS_ENDPOINT_URL_DYNAMODB")}
    env.update(AWS_LAMBDA_FUNCTION_NAME="NetworkClaimFunction", LAMBDA_TASK_ROOT=str(tmp_path),
               _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
    out = subprocess.run([sys.executable, str(script), str(ROOT / "functions"), str(ROOT / "template.yaml"),
                          str(ROOT / "examples" / "demo-network.yaml")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"## store.put", "## store.get", "dynamodb"} <= set(seen["names"])
    assert seen["tools"] == ["network_whoami"], "the traced tool call is annotated with its tool"


def test_outside_a_lambda_entry_point_nothing_is_counted(demo):
    """The admin CLI or a script calling the domain has no log_metrics to flush a metric, so none
    is kept (powertools would print its set to stdout once 100 values piled up)."""
    from relaynet import claims, observability
    from relaynet.errors import ClaimConflict
    from relaynet.models.worker import ClaimRequest

    claims.claim(demo.principals["coder0"], ClaimRequest(scope="lib/**"))
    with pytest.raises(ClaimConflict):
        claims.claim(demo.principals["coder1"], ClaimRequest(scope="lib/x.py"))
    assert "ClaimConflict" not in observability.metrics.metric_set


def test_concurrent_invocations_flush_their_own_counts_under_their_own_name(capsys):
    """The local stack runs every function in one process, one thread per request, and
    powertools keeps one metric set per process: each invocation's counts must still come out
    as its own record, named after its own function, and never fail the call."""
    import threading
    import time

    from relaynet import observability

    def work(event, context):
        for _ in range(3):
            observability.count("TransactionCancelled")
            time.sleep(0)  # let the other threads in between the counts
        return {"ok": True}

    entries = {name: observability.instrument(work, name=name, source="schedule") for name in ("fn_a", "fn_b")}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        for _ in range(40):
            try:
                assert entries[name]({}, None) == {"ok": True}
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
                errors.append(exc)

    capsys.readouterr()
    threads = [threading.Thread(target=run, args=("fn_a" if i % 2 else "fn_b",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = emf_records(capsys.readouterr().out)
    assert errors == []
    assert len(records) == 8 * 40  # one record per invocation
    assert all(metric_values([r], "TransactionCancelled") == [1.0, 1.0, 1.0] for r in records)
    assert sorted(r["function"] for r in records) == ["fn_a"] * 160 + ["fn_b"] * 160
