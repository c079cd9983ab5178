"""The admin CLI exactly as PROTOCOL.md 9 spells it: ``relaynet admin apply FILE --local``,
``relaynet admin launch NETWORK AGENT --local``, ``--table NAME`` (and ``--endpoint-url URL``)
likewise after the verb, and the same options before the verb. Run as a subprocess against a
real DynamoDB endpoint (DynamoDB Local, a fresh table per test), as an operator would."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

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



# --- `admin --local` writes behind the local stack's transaction barrier (issue 24, defect 5) ----

@contextlib.contextmanager
def recording_proxy(upstream: str):
    """A loopback HTTP proxy in front of the DynamoDB endpoint ``upstream`` that forwards every
    request unchanged and records it as ``(operation, JSON body)`` in order; yields ``(url, seen)``."""
    target = urlsplit(upstream)
    seen: list[tuple[str, dict]] = []

    class Forward(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.headers.get("X-Amz-Target", "").rpartition(".")[2], json.loads(body or b"{}")))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
            upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                upstream_conn.request("POST", self.path, body, headers)
                answer = upstream_conn.getresponse()
                data = answer.read()
            finally:
                upstream_conn.close()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("connection", "content-length", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize("verb", ["apply", "launch"])
def test_admin_local_settles_its_transactions_before_it_prints(operator_dir, verb):
    """`relaynet admin --local` on DynamoDB Local, like the local stack before it answers, sends
    the transaction barrier's strongly consistent GetItem after its last TransactWriteItems
    (DynamoDB Local acknowledges a transaction before it is on disk): the request the CLI makes
    last. With `--table`/`--endpoint-url` (DynamoDB in AWS) there is no barrier."""
    from relaynet_local.dynamodb_local import TransactionBarrier

    cwd, endpoint, table = operator_dir
    if verb == "launch":
        assert run(["admin", "apply", "net.yaml", "--local"], cwd).returncode == 0
    args = ["admin", "apply", "net.yaml"] if verb == "apply" else ["admin", "launch", "demo", "coder"]
    barrier = ("GetItem", {"TableName": table, "Key": TransactionBarrier.BARRIER_KEY, "ConsistentRead": True})
    state = cwd / ".relaynet" / "local.json"
    with recording_proxy(endpoint) as (url, seen):
        state.write_text(json.dumps({**json.loads(state.read_text()), "dynamodbEndpoint": url}))
        out = run([*args, "--local"], cwd)
        assert out.returncode == 0, out.stderr
        operations = [op for op, _ in seen]
        assert "TransactWriteItems" in operations and seen[-1] == barrier, operations
        seen.clear()
        out = run(["admin", "launch", "demo", "coder", "--table", table, "--endpoint-url", url], cwd)
        assert out.returncode == 0, out.stderr
        assert "TransactWriteItems" in [op for op, _ in seen] and barrier not in seen


# --- `relaynet serve --spec` refuses an invalid spec as `admin apply` does (issue 24, defect 4) --

#: Invalid specs, each as an operator might write it: a YAML flow mapping whose unquoted comma
#: made an extra key (``b``), a value of the wrong type, a group naming an agent that is not there,
#: and a file that is not YAML at all.
BAD_SPECS = {
    "flow-mapping-comma": "network: demo\nagents:\n  - {name: planner, description: a}\n  - {name: bob, description: a, b}\n",
    "wrong-type": "network: demo\nagents:\n  - {name: bob, instances: many}\n",
    "unknown-member": "network: demo\nagents:\n  - {name: bob}\ngroups:\n  - {slug: reviewers, members: [alice]}\n",
    "not-yaml": "network: demo\nagents: [\n",
    "bad-resource-keys": "network: demo\nagents:\n  - name: a\n    responsibilities: [{resource: nores, actions: [x]}]\n"
                         "resources: [{key: not a key}]\n",
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_serve_refuses_an_invalid_spec_as_admin_apply_does_before_the_store_starts(tmp_path, case):
    """`relaynet serve --spec FILE` prints exactly what `relaynet admin apply FILE` prints for
    the same invalid file (each field and its message, no traceback) and exits 2 before its
    store starts: no DynamoDB Local, no `.relaynet` (data directory, local.json) written."""
    (tmp_path / "bad.yaml").write_text(BAD_SPECS[case])
    applied = run(["admin", "apply", "bad.yaml", "--table", "relaynet-nowhere"], tmp_path)
    assert applied.returncode == 2 and applied.stdout == "", applied.stderr
    served = run(["serve", "--spec", "bad.yaml", "--port", "0", "--template", str(Path(__file__).parents[1] / "template.yaml")],
                 tmp_path)
    assert (served.returncode, served.stdout) == (2, ""), served.stderr
    assert "Traceback" not in served.stderr
    assert served.stderr == applied.stderr
    error = json.loads(served.stderr)["error"]
    assert error["code"] == "invalid_argument"
    if case == "flow-mapping-comma":
        assert error["details"]["fields"] == [{"field": "documents[0].agents.1.b",
                                               "message": "Extra inputs are not permitted"}]
    if case == "wrong-type":
        (field,) = error["details"]["fields"]
        assert field["field"] == "documents[0].agents.0.instances" and "integer" in field["message"]
    if case == "bad-resource-keys":  # checked by the parse, not first by the store's apply
        assert [f["field"] for f in error["details"]["fields"]] == [
            "documents[0].agents.0.responsibilities.0.resource", "documents[0].resources.0.key"]
        assert error["details"]["fields"][0]["message"] == "'nores' is not a resource key such as github.com/org/repo"
    assert not (tmp_path / ".relaynet").exists()  # no data directory, no local.json: no store ran


def test_serve_and_apply_say_when_the_spec_is_not_utf8_text(tmp_path):
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe\x00bad")
    applied = run(["admin", "apply", "bad.yaml", "--table", "relaynet-nowhere"], tmp_path)
    served = run(["serve", "--spec", "bad.yaml", "--port", "0"], tmp_path)
    assert served.returncode == applied.returncode == 2
    assert served.stderr == applied.stderr == "relaynet: cannot read bad.yaml: not UTF-8 text (byte 0)\n"
    assert not (tmp_path / ".relaynet").exists()


def test_serve_says_when_the_spec_cannot_be_read(tmp_path):
    """A missing spec file is named as `admin apply` names it, not as a port that cannot be served on."""
    applied = run(["admin", "apply", "missing.yaml", "--table", "relaynet-nowhere"], tmp_path)
    served = run(["serve", "--spec", "missing.yaml", "--port", "0"], tmp_path)
    assert served.returncode == applied.returncode == 2
    assert served.stderr == applied.stderr == "relaynet: cannot read missing.yaml: No such file or directory\n"
    assert not (tmp_path / ".relaynet").exists()
