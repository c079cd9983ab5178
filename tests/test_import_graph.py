"""What a function's cold start imports (issue 16, "trim the import graph"): no handler file
loads the X-Ray SDK while tracing is off, nor the modules only the CLI, the SDK or the MCP bridge
use. One fresh interpreter imports every handler file in turn, so a module any of them pulls in
is caught (benchmarks/run.py measures what each one costs). The wall between the hub's and the client's distributions is tests/unit/test_distribution_wall.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

#: Never on a function's import path: module -> why.
NOT_AT_INIT = {
    "ag2": "AG2's package (its agent stack, 1.5 s): the AG2 wire serves Relaynet's models of it (relaynet.ag2.protocol)",
    "aws_xray_sdk": "the tracer's SDK: loaded only when tracing is on",
    "mcp": "the MCP bridge's SDK (relaynet.mcp_bridge, a client-side process)",
    "yaml": "spec files (relaynet.admin): the admin CLI and the local stack",
    "httpx": "webhook POSTs import it when they send (relaynet.push), the SDK always",
    "moto": "tests and the memory store only",
    "relaynet.admin": "the admin CLI",
    "relaynet.cli": "the admin CLI",
    "relaynet.client": "the SDK",
    "relaynet.mcp_bridge": "the MCP bridge",
}

PROBE = """
import importlib, json, os, sys
sys.path[:0] = [os.path.join(sys.argv[1], "functions"), os.path.join(sys.argv[1], "shared")]
found = {}
for name in sorted(f[:-3] for f in os.listdir(os.path.join(sys.argv[1], "functions")) if f.endswith(".py")):
    importlib.import_module(name)
    for module in json.loads(sys.argv[2]):
        if module in sys.modules:
            found.setdefault(module, name)
print(json.dumps(found))
"""


def test_no_function_imports_the_tracer_sdk_or_client_side_modules_at_init():
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), json.dumps(sorted(NOT_AT_INIT))],
                          capture_output=True, text=True, timeout=300, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {}, {module: f"first loaded by functions/{fn}.py: {NOT_AT_INIT[module]}" for module, fn in found.items()}
