"""The AG2 wire's functions import no ``ag2`` (AG2's package, whose ``ag2/__init__`` loads its
whole agent stack: about 1.5 s of a cold start) and no ``mcp`` (issue 30 part 2): each handler
file, imported in a fresh interpreter, leaves neither in ``sys.modules``; and with both made
unimportable, the handlers still import and the wire still answers frames (relaynet.ag2.protocol
models the protocol)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

FUNCTIONS = ("ag2_frames", "ag2_keepalive", "ag2_notifier", "ag2_connection")

PROBE = r"""
import importlib, json, os, sys
sys.path[:0] = [os.path.join(sys.argv[1], "functions"), os.path.join(sys.argv[1], "shared")]
importlib.import_module(sys.argv[2])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("ag2", "mcp"))))
"""

# ag2 and mcp unimportable (tests/e2e/without_ag2/sitecustomize.py), then every handler imported and
# the dispatch driven with the frames that need no table: what each gets back, as JSON
SERVE = r"""
import importlib, json, os, sys
sys.path[:0] = [os.path.join(sys.argv[1], d) for d in ("functions", "shared", "infra")]
for name in %r:
    importlib.import_module(name)
import ag2_frames
from relaynet.ag2 import frames, ops
session = ops.Session(connection_id="c1", connection={"connection_id": "c1", "bindings": {}})
for message in ('{"kind": "ping"}', '{"kind": "request", "request_id": 7, "op": "x", "params": {}}',
                '{"kind": "request", "request_id": "r1", "op": "nope", "params": {}}',
                '{"kind": "request", "request_id": "r2", "op": "get_rule", "params": {"agent_id": "a"}}',
                '{"kind": "request", "request_id": "r3", "op": "list_agents", "params": {}}', 'not json'):
    ag2_frames.wire.handle(session, message)
print(json.dumps([json.loads(frames.encode(frame)) for _, frame in session.outbox]))
from relaynet_local.ag2_ws import wire_installed
print(json.dumps(wire_installed()))  # the local hub serves the wire without ag2
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("ag2", "mcp"))))
""" % (FUNCTIONS,)


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


@pytest.mark.parametrize("function", FUNCTIONS)
def test_an_ag2_wire_function_imports_neither_ag2_nor_mcp(function):
    proc = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), function], capture_output=True, text=True,
                          timeout=120, env=_env(), cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [], f"functions/{function}.py imports them"


def test_the_wire_answers_with_ag2_and_mcp_not_installed():
    proc = subprocess.run([sys.executable, "-c", SERVE, str(ROOT)], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHONPATH=str(ROOT / "tests" / "e2e" / "without_ag2")), cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers, installed, loaded = (json.loads(line) for line in proc.stdout.strip().splitlines()[-3:])
    assert loaded == [] and installed is True
    assert answers == [
        {"kind": "pong"},
        {"code": "protocol_error", "message": "malformed request frame: request_id", "envelope_id": None,
         "kind": "error"},
        {"request_id": "r1", "ok": False, "result": None, "error_code": "protocol_error",
         "error_message": "unknown control-plane op: 'nope'", "kind": "response"},
        {"request_id": "r2", "ok": True, "result": {"version": 1, "access": {
            "inbound_from": ["*"], "outbound_to": ["*"], "channel_types": {"initiate": ["*"], "accept": ["*"]}},
            "limits": {"max_concurrent_channels": 0, "max_concurrent_tasks": 0, "channel_ttl_default": "2h",
                       "task_ttl_default": "15m", "rate": {"per_minute": 0, "burst": 0}, "delegation_depth": 5,
                       "inbox": {"max_pending": 1000, "overflow": "reject", "high_water": None}}},
         "error_code": "", "error_message": "", "kind": "response"},
        {"request_id": "r3", "ok": False, "result": None, "error_code": "access_denied",
         "error_message": "register or attach first: this connection is not in a network yet", "kind": "response"},
    ]


def test_the_block_works():
    """The SERVE probe's premise: with tests/e2e/without_ag2 on PYTHONPATH, ag2 does not import."""
    proc = subprocess.run([sys.executable, "-c", "import ag2.network"], capture_output=True, text=True, timeout=60,
                          env=_env(PYTHONPATH=str(ROOT / "tests" / "e2e" / "without_ag2")), cwd=str(ROOT))
    assert proc.returncode != 0 and "blocked" in proc.stderr
