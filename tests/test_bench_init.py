"""benchmarks/run.py's own-share measure (issue 30) reads ``python -X importtime``: the parser
must match what this interpreter prints, or every share would read 0 and every target be "met"."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import run  # noqa: E402


def test_the_importtime_parser_reads_this_interpreters_lines():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import json"], capture_output=True, text=True,
                          timeout=60)
    parsed = [run.IMPORT_LINE.match(line) for line in proc.stderr.splitlines()]
    names = {m.group(4) for m in parsed if m}
    assert "json" in names and "json.decoder" in names
    assert sum(1 for m in parsed if m) == sum(1 for line in proc.stderr.splitlines()
                                              if line.startswith("import time:") and "self [us]" not in line)


def test_own_share_counts_relaynet_modules_and_nothing_else():
    """The authorizer imports relaynet.identity and relaynet.store.table (ours) and boto3 (not):
    its share is above zero and under its whole init, boto3's client included."""
    own = run.own_import_ms("authorizer")
    assert 0 < own < run.run_init("authorizer")
