"""The admin CLI exactly as PROTOCOL.md 9 spells it: ``relaynet admin apply FILE --local``,
``relaynet admin launch NETWORK AGENT --local``, ``--table NAME`` (and ``--endpoint-url URL``)
likewise after the verb, and the same options before the verb. Run as a subprocess against a
real DynamoDB endpoint (DynamoDB Local, a fresh table per test), as an operator would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO_SPEC

RELAYNET = str(Path(sys.executable).with_name("relaynet"))


def run(args: list[str], cwd: Path, endpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ}
    env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    env.pop("RELAYNET_TABLE", None)
    return subprocess.run([RELAYNET, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def operator_dir(tmp_path, server_table):
    """A working directory with the spec and the ``.relaynet/local.json`` a running ``relaynet
    serve`` records there, pointing at the endpoint and the test's table; ``(dir, endpoint, table)``."""
    (tmp_path / "net.yaml").write_text(DEMO_SPEC)
    (tmp_path / ".relaynet").mkdir()
    table = os.environ["RELAYNET_TABLE"]  # server_table's fresh table
    (tmp_path / ".relaynet" / "local.json").write_text(json.dumps(
        {"url": "http://127.0.0.1:1", "dynamodbEndpoint": server_table, "table": table, "pid": os.getpid()}))
    return tmp_path, server_table, table


@pytest.mark.parametrize("spelling", ["after", "before"])
def test_apply_and_launch_with_local(operator_dir, spelling):
    cwd, _, _ = operator_dir
    opts = ["--local"]
    apply = ["admin", "apply", "net.yaml", *opts] if spelling == "after" else ["admin", *opts, "apply", "net.yaml"]
    out = run(apply, cwd)
    assert out.returncode == 0, out.stderr
    tokens = json.loads(out.stdout)
    assert [i["token"][:8] for i in tokens["networks"]["demo"]["instances"]["coder"]] == ["rn_inst_"] * 2
    again = run(apply, cwd)  # idempotent: nothing new
    assert again.returncode == 0 and json.loads(again.stdout)["networks"]["demo"]["instances"] == {}
    launch = ["admin", "launch", "demo", "coder", *opts] if spelling == "after" else ["admin", *opts, "launch", "demo", "coder"]
    out = run(launch, cwd)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["token"].startswith("rn_inst_")


@pytest.mark.parametrize("spelling", ["after", "before"])
def test_apply_and_launch_with_table_and_endpoint(operator_dir, spelling):
    cwd, endpoint, table = operator_dir
    (cwd / ".relaynet" / "local.json").unlink()  # --table needs no local stack
    opts = ["--table", table, "--endpoint-url", endpoint]
    apply = ["admin", "apply", "net.yaml", *opts] if spelling == "after" else ["admin", *opts, "apply", "net.yaml"]
    out = run(apply, cwd)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["representatives"]["ops"].startswith("rn_rep_")
    launch = ["admin", "launch", "demo", "planner", *opts] if spelling == "after" else ["admin", *opts, "launch", "demo", "planner"]
    out = run(launch, cwd)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["instanceId"].startswith("inst_")


def test_without_a_table_or_local_it_says_what_to_give(operator_dir):
    cwd, _, _ = operator_dir
    out = run(["admin", "apply", "net.yaml"], cwd)
    assert out.returncode != 0 and "--table NAME" in out.stderr and "--local" in out.stderr and out.stdout == ""


def test_an_unknown_network_in_launch_is_a_json_error_on_stderr(operator_dir):
    cwd, _, _ = operator_dir
    out = run(["admin", "launch", "nowhere", "coder", "--local"], cwd)
    assert out.returncode == 2 and out.stdout == ""
    assert json.loads(out.stderr)["error"]["code"] == "not_found"
