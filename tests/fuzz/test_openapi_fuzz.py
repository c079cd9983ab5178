"""Property-based fuzzing of every operation of docs/openapi.json (schemathesis) against the local
stack over real HTTP (`relaynet serve` on a loopback port), with a valid token of each surface:
worker and plugin operations as an instance, control operations as a representative.

For every generated request, valid (``positive``) and schema-violating (``negative``):
- no 5xx, and an answer within :data:`MAX_SECONDS` (no hang);
- the status is one the operation documents, with the documented content type and schema;
  a negative case is refused (schemathesis' ``negative_data_rejection``);
- every 4xx carries the protocol's envelope with the code its status stands for (PROTOCOL.md 2);
- a refused call (4xx) wrote nothing: a scan of the whole table before and after is equal
  (presence, ``lastSeenAt``, is the one write any authenticated call makes).

Run with ``make fuzz`` (bounded: ``FUZZ_EXAMPLES`` examples per operation and mode, default 25;
the make target also bounds the time). The figures go to ``.relaynet/fuzz-report.json`` and are
printed at the end. Not part of ``make test`` (marker ``fuzz``).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks, openapi

from tests.conftest import ROOT
from tests.e2e.conftest import start_hub, stop_hub

pytestmark = pytest.mark.fuzz

SCHEMA = openapi.from_path(ROOT / "docs" / "openapi.json")
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
MAX_SECONDS = 25.0
CODE_OF_STATUS = {400: {"invalid_argument"}, 401: {"unauthenticated"}, 403: {"permission_denied"},
                  404: {"not_found"}, 409: {"conflict"}, 413: {"payload_too_large"}, 429: {"rate_limited"}}
CONFLICT_REASONS = {"claim_conflict", "invalid_transition", "already_exists", "in_progress", "channel_closed",
                    "not_your_turn", "wrong_tool", "seed_failed"}
REPORT = ROOT / ".relaynet" / "fuzz-report.json"
FIGURES: dict = {"operations": 0, "examples": 0, "by_status": Counter(), "by_mode": Counter(), "failures": []}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The demo network on `relaynet serve`: waits held to 1 s, the stage throttle out of the way
    (it is tested on its own), no sweep timer (its writes would show in the scans)."""
    h = start_hub(tmp_path_factory.mktemp("fuzz"), "--sweep-interval", "0",
                  env={"RELAYNET_MAX_WAIT_SECONDS": "1", "RELAYNET_THROTTLE_BURST": "1000000",
                       "RELAYNET_THROTTLE_RATE": "1000000"})
    state = json.loads((h.cwd / ".relaynet" / "local.json").read_text())
    h.dynamodb = boto3.client("dynamodb", endpoint_url=state["dynamodbEndpoint"], region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
    h.table = state["table"]
    yield h
    stop_hub(h)
    REPORT.parent.mkdir(exist_ok=True)
    figures = {**FIGURES, "by_status": dict(FIGURES["by_status"]), "by_mode": dict(FIGURES["by_mode"]),
               "examples_per_operation_and_mode": EXAMPLES}
    REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nfuzz: {figures['operations']} operations, {figures['examples']} requests "
          f"{figures['by_mode']}, statuses {figures['by_status']}, {len(figures['failures'])} failures; "
          f"report {REPORT}")


def snapshot(hub) -> list:
    """Every item of the table, sorted, without the presence timestamp of instances."""
    items = []
    for page in hub.dynamodb.get_paginator("scan").paginate(TableName=hub.table, ConsistentRead=True):
        for item in page["Items"]:
            if item["SK"]["S"].startswith("INST#"):
                item = {k: v for k, v in item.items() if k != "lastSeenAt"}
            items.append(json.dumps(item, sort_keys=True))
    return sorted(items)


def token_for(hub, operation) -> str:
    if operation.tags and operation.tags[0] == "control":
        return hub.tokens["representatives"]["ops"]
    return hub.token("planner")


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label.rsplit("/", 1)[-1])
def test_no_input_gets_past_the_door(hub, operation, mode):
    token = token_for(hub, operation)
    FIGURES["operations"] += mode == GenerationMode.POSITIVE
    state = {"last": snapshot(hub)}  # nothing else writes (no sweep timer): the table as the next call finds it

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        before = state["last"]
        started = time.monotonic()
        response = case.call(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}, timeout=MAX_SECONDS + 5)
        took = time.monotonic() - started
        FIGURES["examples"] += 1
        FIGURES["by_status"][f"{mode.value} {response.status_code}"] += 1
        FIGURES["by_mode"][mode.value] += 1
        state["last"] = after = snapshot(hub)
        try:
            assert took < MAX_SECONDS, f"{operation.label} took {took:.1f} s"
            # 413 is the documented refusal of a body over 64 KiB, which schemathesis' negative
            # check does not list among refusals
            refusal_check = mode == GenerationMode.NEGATIVE and response.status_code != 413
            case.validate_response(response, checks=[
                checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
                checks.response_schema_conformance, *([checks.negative_data_rejection] if refusal_check else [])])
            if 400 <= response.status_code < 500:
                error = response.json()["error"]
                assert error["code"] in CODE_OF_STATUS[response.status_code], (response.status_code, error)
                assert isinstance(error["message"], str) and error["message"]
                if response.status_code == 409:
                    assert error["details"]["reason"] in CONFLICT_REASONS, error
                if response.status_code == 400:
                    assert error["details"]["fields"], error
                assert after == before, f"{operation.label} answered {response.status_code} but wrote"
        except Exception as exc:
            FIGURES["failures"].append({"operation": operation.label, "mode": mode.value,
                                        "body": case.body if not isinstance(case.body, bytes) else repr(case.body),
                                        "status": response.status_code, "error": str(exc)[:500]})
            raise

    run()
