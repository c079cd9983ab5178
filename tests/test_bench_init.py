"""benchmarks/run.py's own-share measure (issue 30) reads ``python -X importtime``: the parser
must match what this interpreter prints, or every share would read 0 and every target be "met".
run.py sets the benchmark's environment when imported (RELAYNET_TABLE among it), so it is
imported in a child interpreter, never in the test process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = """
import json, subprocess, sys
sys.path.insert(0, {bench!r})
import run
proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import json"], capture_output=True, text=True)
lines = proc.stderr.splitlines()
parsed = [m.group(4) for m in map(run.IMPORT_LINE.match, lines) if m]
expected = sum(1 for ln in lines if ln.startswith("import time:") and "self [us]" not in ln)
print(json.dumps({{"names": parsed, "expected": expected, "own": run.own_import_ms("authorizer"),
                  "init": run.run_init("authorizer")}}))
"""


def test_the_importtime_parser_reads_this_interpreters_lines_and_own_share_is_part_of_the_init():
    env = {**os.environ}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", PROBE.format(bench=str(ROOT / "benchmarks"))], capture_output=True,
                          text=True, timeout=300, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "json" in out["names"] and "json.decoder" in out["names"]
    assert len(out["names"]) == out["expected"]
    # the authorizer imports relaynet.identity and relaynet.store.table (ours) and boto3 (not)
    assert 0 < out["own"] < out["init"]
