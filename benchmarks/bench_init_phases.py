"""Where a tool function's cold init goes, phase by phase: `python benchmarks/bench_init_phases.py`.

Each run is a fresh interpreter that imports, in order, and times in CPU ms (``process_time``, as
benchmarks/run.py's init section does):

1. ``boto3`` and a DynamoDB client: run.py's baseline, what any Python Lambda on DynamoDB pays;
2. powertools' ``APIGatewayHttpResolver(enable_validation=True)`` with its OpenAPI params (and
   pydantic): the framework every tool function is built on;
3. the request models (``relaynet.models.worker``, ``.plugin``, ``.control``);
4. ``relaynet.http.api`` (ToolApp, observability, settings, the catalogue);
5. the function's own module (its domain imports, the ToolApp and its route);
6. ``relaynet.store.table.client()`` (a second client here: in Lambda it is the only one).

Byte code as ``sam build`` ships it (every module's .pyc, in a temporary
``PYTHONPYCACHEPREFIX`` filled by a first, unmeasured run). Prints the median per phase of
``--runs`` interpreters per function, and phases 3-5 as a share of phase 1 (Relaynet's own part
of the init ratio); issue 16's target is the whole init at most 1.3x phase 1.

    python benchmarks/bench_init_phases.py                                  # three functions
    python benchmarks/bench_init_phases.py --functions network_claim,tasks --runs 9
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("boto3 + client", "powertools resolver", "request models", "relaynet.http.api", "function module",
          "table.client")
CODE = """import sys, time, importlib.util
sys.path[:0] = [{functions!r}, {shared!r}]
c = time.process_time
marks = [c()]
import boto3
boto3.client("dynamodb"); marks.append(c())
from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.openapi.params import Body
APIGatewayHttpResolver(enable_validation=True); marks.append(c())
import relaynet.models.worker, relaynet.models.plugin, relaynet.models.control
marks.append(c())
import relaynet.http.api
marks.append(c())
spec = importlib.util.spec_from_file_location("fn_{name}", {path!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec)); marks.append(c())
from relaynet.store import table
table.client(); marks.append(c())
print(repr([round((b - a) * 1000, 1) for a, b in zip(marks, marks[1:])]))
"""
ENV = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "RELAYNET_TABLE": "relaynet", "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_NAMESPACE": "Relaynet"}


def run(name: str, prefix: str) -> list[float]:
    """One fresh interpreter: CPU ms per phase (:data:`PHASES`). Raises RuntimeError when it fails."""
    code = CODE.format(functions=str(ROOT / "functions"), shared=str(ROOT / "shared"), name=name,
                       path=str(ROOT / "functions" / f"{name}.py"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(ENV, PYTHONPYCACHEPREFIX=prefix)
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(ROOT), capture_output=True, text=True,
                         timeout=120)
    if res.returncode:
        raise RuntimeError(f"{name}: {res.stderr[-2000:]}")
    return ast.literal_eval(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--functions", default="network_claim,tasks,control_get_history")
    ap.add_argument("--runs", type=int, default=5, help="fresh interpreters per function (median)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.functions.split(",") if n.strip()]
    print(f"CPU ms per phase, median of {args.runs} fresh interpreters, .pyc for every module")
    print(f"{'function':<24}" + "".join(f"{p:>21}" for p in PHASES) + "   relaynet / baseline")
    with tempfile.TemporaryDirectory(prefix="relaynet-phases-pyc-") as prefix:
        for name in names:
            run(name, prefix)  # writes the .pyc; not measured
            samples = [run(name, prefix) for _ in range(args.runs)]
            ms = [statistics.median(s[i] for s in samples) for i in range(len(PHASES))]
            own = sum(ms[2:5]) / ms[0]
            print(f"{name:<24}" + "".join(f"{v:>21.1f}" for v in ms) + f"   {own:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
