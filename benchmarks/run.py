"""``make bench``: what every tool costs, how long every function takes to start, and how the
claim check, the sweep and the inbox grow: one table on stdout, the figures in
benchmarks/results.json. Not a test: it asserts nothing about time.

Run: ``.venv/bin/python benchmarks/run.py [--calls 50] [--inits 5] [--sections tools,init,scale]``
(``--quick``: 5 calls, 1 interpreter, small scale rows; for trying the script, not for figures;
``--sections init --functions health,ui``: the init rows of those handler files only).

tools
    For every tool of relaynet/catalogue.py (worker, plugin and control surfaces) and the sweep,
    one typical call of benchmarks/requests_per_tool.py's scenario (the demo story through the
    real Lambda handlers on moto in-process: the tool's first step marked typical, else its
    first step), run ``--calls`` times from the same table state (moto's table is copied before
    the step and put back before each repetition), medians reported:

    - requests: DynamoDB requests the tool's handler made (requests_per_tool's Meter, a botocore
      hook); the authorizer's GetItem is not counted (API Gateway caches its answer), and
      presence is steady state (at most one UpdateItem a minute per instance);
    - rcu / wcu: read and write request units, *modelled* from the real item sizes with
      DynamoDB's published rules (requests_per_tool's Meter). Moto's ReturnConsumedCapacity is a
      placeholder, not derived from item sizes, so it is not used;
    - cpu_ms: the tool handler's own CPU time (``time.process_time`` around the handler, the
      authorizer excluded), minus the CPU spent inside moto serving its requests and inside the
      meter's hooks: what the Lambda would spend outside DynamoDB, on this machine (botocore's
      request building and response parsing included).

    - idem: how many of those requests were on powertools' Idempotency-Key record (the
      in-progress PutItem and the completing UpdateItem of a creating write sent with a key, as
      the SDK and the MCP bridge always do).

    Each row names its target: a read tool (its typical call writes nothing) at most 1 request;
    a write tool touching one object at most 2; tools that write several objects by design
    (listed in :data:`MULTI_OBJECT` with the reason) have no request target. "(key)" marks a
    row that would meet it without the idempotency record's requests.

init
    For every function module in functions/: the import of the handler file plus its DynamoDB
    client (``relaynet.store.table.client()``, created on first use; the one client of the
    container), timed as the child's CPU time (``process_time``; wall time on a shared machine
    swings by whole multiples) inside a fresh ``python -c`` interpreter (interpreter start-up
    excluded), median of ``--inits`` interpreters, as a ratio to ``import boto3;
    boto3.client("dynamodb")`` timed the same way in the same run (rounds interleave the baseline
    with the functions, so drift hits both). Two conditions: *compiled*, .pyc for every module, as
    ``sam build`` ships them (functions/Makefile, shared/Makefile; the targets: every function at
    most 1.3x, the median at most 1.15x), and *source*, the project's modules compiled at every
    import (``PYTHONDONTWRITEBYTECODE``; how the layer shipped before the Makefiles), installed
    packages from their .pyc. Also reported, not targets: the *framework floor* (the baseline plus
    powertools' HTTP resolver with validation and pydantic, which every tool's Lambda loads before
    relaynet), and a few functions without any .pyc (how ``sam build``'s python builder shipped the
    layer: it unpacks wheels without compiling and excludes ``*.pyc``) and with .pyc for everything.
    Issue 30's figures: each function's init as a ratio to the framework floor of the same run
    (target at most 1.15x), Relaynet's own share (the ``-X importtime`` self-time of the handler
    and the relaynet modules, :func:`own_import_ms`; target at most 0.15x the baseline), and a
    SnapStart estimate for the authorizer and the hot tools (:func:`bench_restore`: the
    after-restore hooks plus the first request, CPU, after an init the snapshot would hold; target
    under 50 ms).

scale
    - network_claim through its handler against 0, 100 and 1,000 active claims of the same
      namespace (benchmarks/bench_claims.py's seeding; a fresh scope each call, released again
      untimed). Target: time growing no worse than linearly (time at 1,000 / time at 100 <= 10).
    - the sweep (``relaynet.sweep.run``, batch 500) over 1,000 and 10,000 pending tasks, due
      (handed back) and parked (woken), one run each (benchmarks/bench_sweep.py's seeding and
      narrowed moto transactions). Target: requests per offered task the same at both sizes.
    - network_inbox through its handler returning 1, 10 and 100 messages.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
FUNCTIONS = ROOT / "functions"
for p in (str(ROOT), str(BENCH), str(ROOT / "infra"), str(ROOT / "shared")):
    if p not in sys.path:
        sys.path.insert(0, p)
ENV = dict(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing",
           AWS_DEFAULT_REGION="us-east-1", RELAYNET_TABLE="relaynet-bench", POWERTOOLS_LOG_LEVEL="ERROR",
           POWERTOOLS_TRACE_DISABLED="true", POWERTOOLS_METRICS_DISABLED="true")
os.environ.update(ENV)
os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)

import requests_per_tool as rpt  # noqa: E402

WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
READ_TARGET, WRITE_TARGET, INIT_TARGET, INIT_MEDIAN_TARGET = 1, 2, 1.3, 1.15
#: Issue 30's targets: every function's init at most 1.15x the framework floor of the same run,
#: Relaynet's own share (:func:`own_import_ms`) at most 0.15x the baseline, and under SnapStart the
#: work left after a restore (hooks and first request, :func:`bench_restore`) under 50 ms CPU.
FLOOR_TARGET, OWN_SHARE_TARGET, RESTORE_TARGET_MS = 1.15, 0.15, 50.0

#: Write tools whose typical call writes several objects by design: no request target, the reason.
MULTI_OBJECT: dict[str, str] = {
    "control_stop_agent": "two calls (confirm, then stop); the stop revokes the token, releases claims, requeues tasks",
    "control_restart_agent": "two calls (confirm, then restart); rotates the token (old and new token items)",
    "control_launch_agent": "an instance and its token item",
    "delegate": "a consulting channel, its thread and the prompt (and waits for the reply)",
    "channels": "a channel, its thread and the first message",
    "sweep": "scheduled, not a tool: its target is the scale row (requests per offered task constant)",
}


# --------------------------------------------------------------------------- CPU accounting

class Cpu:
    """Process CPU time split into the handler's own, moto's (serving requests) and the meter's."""

    moto = 0.0
    hooks = 0.0
    depth = 0  # > 0 inside a meter hook (moto time there belongs to the hook)
    spans: dict[str, list[float]] = {}  # handler stem -> own CPU seconds of each invocation

    @classmethod
    def install(cls) -> None:
        from moto.core.botocore_stubber import BotocoreStubber

        real = BotocoreStubber.process_request
        if getattr(real, "_bench_timed", False):
            return

        def process_request(self: Any, request: Any) -> Any:
            start = time.process_time()
            try:
                return real(self, request)
            finally:
                if not cls.depth:
                    cls.moto += time.process_time() - start

        process_request._bench_timed = True  # type: ignore[attr-defined]
        BotocoreStubber.process_request = process_request  # type: ignore[method-assign]

        from relaynet_local import lambdas

        real_load = lambdas.load_handler
        if getattr(real_load, "_bench_timed", False):
            return

        def load_handler(code_uri: str, handler: str) -> Callable[..., Any]:
            fn = real_load(code_uri, handler)
            stem = handler.rsplit(".", 1)[0]
            if stem == "authorizer":
                return fn

            def timed(*args: Any, **kwargs: Any) -> Any:
                c0, m0, h0 = time.process_time(), cls.moto, cls.hooks
                try:
                    return fn(*args, **kwargs)
                finally:
                    own = (time.process_time() - c0) - (cls.moto - m0) - (cls.hooks - h0)
                    cls.spans.setdefault(stem, []).append(own)

            return timed

        load_handler._bench_timed = True  # type: ignore[attr-defined]
        lambdas.load_handler = load_handler

    @classmethod
    def take(cls, stem: str) -> list[float]:
        return cls.spans.pop(stem, [])

    @classmethod
    def clear(cls) -> None:
        cls.spans = {}


IDEMPOTENCY_PK = "idempotency#relaynet"  # powertools' records (relaynet.http.idempotency)


class TimedMeter(rpt.Meter):
    """requests_per_tool's Meter, its hooks' CPU time kept out of the handler's; also counts the
    requests on powertools' idempotency records (``idem``: by entry point)."""

    def __init__(self, client: Any, raw: Any):
        self.idem: Counter = Counter()
        super().__init__(client, raw)

    def reset(self) -> None:
        super().reset()
        self.idem = Counter()

    def _before(self, *args: Any, **kwargs: Any) -> None:
        start = time.process_time()
        Cpu.depth += 1
        try:
            super()._before(*args, **kwargs)
            params = kwargs.get("params") or {}
            key = params.get("Item") or params.get("Key") or {}
            if (key.get("PK") or {}).get("S") == IDEMPOTENCY_PK:
                decl = self._table.current_declaration()
                self.idem[decl.owner if decl else "-"] += 1
        finally:
            Cpu.depth -= 1
            Cpu.hooks += time.process_time() - start

    def _after(self, *args: Any, **kwargs: Any) -> None:
        start = time.process_time()
        Cpu.depth += 1
        try:
            super()._after(*args, **kwargs)
        finally:
            Cpu.depth -= 1
            Cpu.hooks += time.process_time() - start


# --------------------------------------------------------------------------- moto state

def moto_table() -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    from relaynet.store import table as t

    return dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[t.table_name()]


class Snapshot:
    """The moto table's items now, to put back before each repetition of a step."""

    def __init__(self) -> None:
        self.table = moto_table()
        self.items = copy.deepcopy(self.table.items)

    def restore(self) -> None:
        self.table.items = copy.deepcopy(self.items)


def fast_moto() -> None:
    """moto copies the whole table for every transaction's rollback: back up only the touched
    items instead (bench_sweep's narrowing; same all-or-nothing result, moto time only)."""
    import bench_sweep

    bench_sweep.narrow_moto_transactions()


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


# --------------------------------------------------------------------------- tools

def chosen_steps(tokens: dict[str, Any]) -> dict[str, str]:
    """tool -> the label of its typical step (first typical, else first) in the scenario."""
    first: dict[str, str] = {}
    typical: dict[str, str] = {}
    for step in rpt.scenario(tokens):  # labels only: the generator's steps are not run
        first.setdefault(step.tool, step.label)
        if step.typical:
            typical.setdefault(step.tool, step.label)
    return {tool: typical.get(tool, label) for tool, label in first.items()}


def bench_tools(calls: int, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    from relaynet import catalogue

    Cpu.install()
    rpt.Meter = TimedMeter  # demo_stack builds its meter from this name
    wanted = list(catalogue.TOOLS) + ["sweep"]
    out: dict[str, dict[str, Any]] = {}
    with rpt.demo_stack() as (tokens, meter):
        pick = chosen_steps(tokens)
        missing = [tool for tool in wanted if tool not in pick]
        if missing:
            raise SystemExit(f"requests_per_tool.scenario has no step for {missing}")
        labels = {pick[tool]: tool for tool in wanted}
        started = time.perf_counter()
        for step in rpt.scenario(tokens):
            tool = labels.get(step.label)
            if tool is None:
                step.run()
                continue
            snap = Snapshot()
            reqs, rrus, wrus, cpus, ops_seen, idems = [], [], [], [], [], []
            n_calls = 0
            for _ in range(calls):
                snap.restore()
                meter.reset()
                Cpu.clear()
                step.run()
                use = meter.usage.get(step.tool, rpt.Usage())
                spans = Cpu.take(step.tool)
                n_calls = len(spans)
                reqs.append(use.requests)
                idems.append(meter.idem.get(step.tool, 0))
                rrus.append(use.rru)
                wrus.append(use.wru)
                cpus.append(sum(spans))
                ops_seen.append(tuple(sorted(use.ops.items())))
            ops = Counter(ops_seen).most_common(1)[0][0]
            out[tool] = {"requests": num(med(reqs)), "idempotency_requests": num(med(idems)), "rcu": num(med(rrus)), "wcu": num(med(wrus)),
                         "cpu_ms": round(med(cpus) * 1000, 2), "call": step.label, "handler_calls": n_calls,
                         "ops": dict(ops), "writes": any(op in WRITE_OPS for op, _n in ops)}
            log(f"  {tool:<32} {out[tool]['requests']:>3} requests  {out[tool]['cpu_ms']:>7.2f} ms cpu"
                f"   ({time.perf_counter() - started:.0f} s)")
    for tool, row in out.items():
        if tool in MULTI_OBJECT:
            row["target"], row["met"] = None, None
        else:
            row["target"] = WRITE_TARGET if row["writes"] else READ_TARGET
            row["met"] = row["requests"] <= row["target"]
            row["met_without_idempotency_key"] = row["requests"] - row["idempotency_requests"] <= row["target"]
    return {tool: out[tool] for tool in wanted}


# --------------------------------------------------------------------------- init

INIT_PRELUDE = "import sys, time, importlib.util\n"
START = "t0, c0 = time.perf_counter(), time.process_time()\n"
BASELINE_CODE = START + "import boto3\nboto3.client('dynamodb')\n"
#: Not a target: what every tool's Lambda loads before any relaynet code (ToolApp's framework:
#: powertools' HTTP resolver with request validation, which brings pydantic), for the report.
FLOOR_CODE = BASELINE_CODE + """from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.openapi.params import Body
APIGatewayHttpResolver(enable_validation=True)
"""
FLOOR = "(framework floor)"
FUNCTION_CODE = """sys.path[:0] = [{functions!r}, {shared!r}]
spec = importlib.util.spec_from_file_location({name!r}, {path!r})
mod = importlib.util.module_from_spec(spec)
""" + START + """spec.loader.exec_module(mod)
if getattr(mod, "DYNAMODB_ACTIONS", ()):
    from relaynet.store import table
    table.client()
"""
INIT_EPILOGUE = "print(repr(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)))\n"
#: What the init figures time: the child's CPU time (``process_time``) from the import to the
#: client, not wall time: on a shared machine other processes stretch wall time by whole
#: multiples (seen: a 2.2 s boto3 baseline on 2 busy cores), while the CPU a cold start spends
#: importing and compiling is what Lambda bills and stays put.
INIT_CLOCK = "cpu"


def init_code(stem: str | None) -> str:
    if stem == FLOOR:
        return INIT_PRELUDE + FLOOR_CODE + INIT_EPILOGUE
    body = BASELINE_CODE if stem is None else FUNCTION_CODE.format(
        functions=str(FUNCTIONS), shared=str(ROOT / "shared"), name=f"fn_{stem}", path=str(FUNCTIONS / f"{stem}.py"))
    return INIT_PRELUDE + body + INIT_EPILOGUE


def run_init(stem: str | None, pycache_prefix: str | None = None) -> float:
    """One fresh interpreter: the init's CPU ms (:data:`INIT_CLOCK`). Byte code: the project's
    modules compile from source (no .pyc is written), installed packages load their .pyc; with
    ``pycache_prefix``, .pyc are looked up (only) there."""
    env = {**os.environ, **ENV, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if pycache_prefix:
        env["PYTHONPYCACHEPREFIX"] = pycache_prefix
    res = subprocess.run([sys.executable, "-c", init_code(stem)], env=env, cwd=str(ROOT),
                         capture_output=True, text=True, timeout=120)
    if res.returncode:
        raise RuntimeError(f"init of {stem or 'baseline'} failed: {res.stderr[-2000:]}")
    wall, cpu = ast.literal_eval(res.stdout.strip().splitlines()[-1])
    return float(cpu if INIT_CLOCK == "cpu" else wall)


#: Functions measured again under the other two byte-code conditions (see :func:`bench_init_bytecode`).
BYTECODE_SAMPLE = (None, FLOOR, "authorizer", "sweep", "network_claim", "control_whoami", "channels")


def bench_init_bytecode(rounds: int, log: Callable[[str], None]) -> dict[str, Any]:
    """A few functions without any .pyc (how ``sam build``'s python builder ships the layer: it
    unpacks wheels without compiling them and copies sources excluding ``*.pyc``, and /opt is
    read-only, so every cold start compiles every module) and with .pyc for everything (a
    layer compiled at build time)."""
    import tempfile

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="relaynet-bench-pyc-") as empty, \
            tempfile.TemporaryDirectory(prefix="relaynet-bench-pyc-") as full:
        fill_pycache(full, list(BYTECODE_SAMPLE))
        for label, prefix in (("no_pyc", empty), ("all_pyc", full)):
            times: dict[str, list[float]] = {}
            for _ in range(rounds):
                for stem in BYTECODE_SAMPLE:
                    times.setdefault(stem or "baseline", []).append(run_init(stem, prefix))
            ms = {name: round(med(v), 1) for name, v in times.items()}
            out[label] = {"ms": ms, "ratio": {n: round(v / ms["baseline"], 3) for n, v in ms.items()}}
            log(f"  {label}: {ms}")
    out["rounds"] = rounds
    return out


def fill_pycache(prefix: str, stems: list[str | None]) -> None:
    """Write the .pyc of everything ``stems`` import under ``prefix`` (PYTHONPYCACHEPREFIX): the
    byte code a compiled build ships (functions/Makefile, shared/Makefile)."""
    for stem in stems:
        env = {**os.environ, **ENV, "PYTHONPYCACHEPREFIX": prefix}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("PYTHONPATH", None)
        subprocess.run([sys.executable, "-c", init_code(stem)], env=env, cwd=str(ROOT), capture_output=True,
                       check=True, timeout=120)


def bench_init(rounds: int, log: Callable[[str], None], only: set[str] | None = None) -> dict[str, Any]:
    """Every function's init (``only``: those of these handler files), CPU ms, median of ``rounds`` interpreters, as a ratio to the boto3
    baseline of the same condition, in two conditions: ``compiled`` (.pyc for every module, as
    ``sam build`` ships since functions/Makefile and shared/Makefile: the target's figures) and
    ``source`` (the project's modules compiled at import, installed packages from their .pyc)."""
    import tempfile

    stems = sorted(p.stem for p in FUNCTIONS.glob("*.py") if not p.name.startswith("_") and (not only or p.stem in only))
    if only and len(stems) != len(only):
        raise SystemExit(f"--functions: no handler file for {sorted(only - set(stems))} in {FUNCTIONS}")
    with tempfile.TemporaryDirectory(prefix="relaynet-bench-pyc-") as full:
        fill_pycache(full, [None, FLOOR, *stems])  # also the unmeasured round: files in the page cache
        for stem in stems:
            run_init(stem)
        times: dict[str, dict[str, list[float]]] = {"compiled": {}, "source": {}}
        started = time.perf_counter()
        for r in range(rounds):
            for stem in [None, FLOOR, *stems]:  # the conditions interleaved, so drift hits both
                times["compiled"].setdefault(stem or "baseline", []).append(run_init(stem, full))
                times["source"].setdefault(stem or "baseline", []).append(run_init(stem))
            log(f"  round {r + 1}/{rounds}: baseline {times['compiled']['baseline'][-1]:.0f} ms cpu "
                f"({time.perf_counter() - started:.0f} s)")
    out: dict[str, Any] = {"clock": INIT_CLOCK}
    for cond, by in times.items():
        ms = {name: round(med(v), 1) for name, v in by.items()}
        base = ms["baseline"]
        out[cond] = {"baseline_ms": base, "ms": {s: ms[s] for s in stems},
                     "ratio": {s: round(ms[s] / base, 3) for s in stems},
                     "framework_floor_ms": ms[FLOOR], "framework_floor_ratio": round(ms[FLOOR] / base, 3),
                     "samples_ms": {name: [round(x, 1) for x in v] for name, v in by.items()}}
    c = out["compiled"]  # the shipped condition carries the target
    out.update(baseline_ms=c["baseline_ms"], ms=c["ms"], ratio=c["ratio"], framework_floor_ms=c["framework_floor_ms"],
               framework_floor_ratio=c["framework_floor_ratio"])
    return out


#: What ``-X importtime`` reports, one module per line: self and cumulative microseconds.
IMPORT_LINE = __import__("re").compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$")
SHARE_CODE = """import importlib, sys
sys.path[:0] = [{functions!r}, {shared!r}]
# pydantic's one-time set-up runs when its first model class is built (about 40 ms here: its
# lazy internals, the plugin entry-point scan), in whichever module defines that class. It is the
# framework's cost (a tool's resolver pays it inside the floor), so it is paid before the handler.
from pydantic import BaseModel
type("Warm", (BaseModel,), {{"__annotations__": {{"x": int}}}})
importlib.import_module({stem!r})
if getattr(sys.modules[{stem!r}], "DYNAMODB_ACTIONS", ()):
    from relaynet.store import table
    table.client()
"""


def own_import_ms(stem: str) -> float:
    """Relaynet's own share of one function's init, ms: the ``self`` column of ``python -X
    importtime`` (each module's own top-level code, its imports excluded) summed over the handler
    module and every ``relaynet`` module, in a fresh interpreter with .pyc as shipped. Everything
    else (boto3, powertools, pydantic's own modules and its one-time set-up on a first model, ag2)
    is the framework's; the pydantic models relaynet defines count as relaynet's, since their class
    bodies run in its modules. importtime
    reads a wall clock (perf_counter); one interpreter at a time, so it tracks the CPU."""
    env = {**os.environ, **ENV}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = SHARE_CODE.format(functions=str(FUNCTIONS), shared=str(ROOT / "shared"), stem=stem)
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, cwd=str(ROOT),
                         capture_output=True, text=True, timeout=120)
    if res.returncode:
        raise RuntimeError(f"importtime of {stem} failed: {res.stderr[-2000:]}")
    own = 0
    for line in res.stderr.splitlines():
        m = IMPORT_LINE.match(line)
        if m and (m.group(4) == stem or m.group(4) == "relaynet" or m.group(4).startswith("relaynet.")):
            own += int(m.group(1))
    return own / 1000


def bench_own_share(stems: list[str], rounds: int, log: Callable[[str], None]) -> dict[str, float]:
    """:func:`own_import_ms` per function, median of ``rounds``."""
    times: dict[str, list[float]] = {}
    for r in range(rounds):
        for stem in stems:
            times.setdefault(stem, []).append(own_import_ms(stem))
        log(f"  own share, round {r + 1}/{rounds}")
    return {stem: round(med(v), 1) for stem, v in times.items()}


#: The SnapStart estimate's functions: the authorizer (every call's first hop) and the hot tools.
RESTORE_SAMPLE = {
    "authorizer": None,
    "network_whoami": {},
    "network_inbox": {},
    "network_claim": {"scope": "bench/restore/**"},
    "network_ask": {"toAgent": "reviewer", "body": "ready for review?"},
    "control_whoami": {},
}
RESTORE_CODE = """import json, sys, time, importlib
sys.path[:0] = [{functions!r}, {shared!r}, {infra!r}]
from relaynet_local.lambdas import LambdaContext
events = json.load(open({events!r}))
mod = importlib.import_module({stem!r})
if getattr(mod, "DYNAMODB_ACTIONS", ()):
    from relaynet.store import table
    table.client()
# the snapshot is taken here; what follows is what a restored environment does
from snapshot_restore_py import get_after_restore
c0 = time.process_time()
for func, args, kwargs in get_after_restore():
    func(*args, **kwargs)
c1 = time.process_time()
out = mod.handler(events[0], LambdaContext({stem!r}, 29.0, 512))
c2 = time.process_time()
mod.handler(events[1], LambdaContext({stem!r}, 29.0, 512))
c3 = time.process_time()
ok = out.get("isAuthorized") if "isAuthorized" in out else out.get("statusCode") == 200
print(repr(((c1 - c0) * 1000, (c2 - c1) * 1000, (c3 - c2) * 1000, bool(ok), str(out)[:300])))
"""


def bench_restore(rounds: int, log: Callable[[str], None]) -> dict[str, Any]:
    """The SnapStart estimate (issue 30): what a restored environment still does before it has
    answered, as CPU ms in a fresh interpreter that first initialises the function (import and
    client, the snapshot's content): the after-restore hooks registered with snapshot_restore_py,
    then the first request, then a second one (warm, for comparison). Requests go over HTTP to a
    DynamoDB Local of this run with the demo network applied, so the first request pays for its
    connection as a restored environment would. Median of ``rounds``; :data:`RESTORE_SAMPLE`."""
    import tempfile

    import boto3

    from relaynet import admin
    from relaynet.config import settings
    from relaynet.store import table as t
    from relaynet_local.dynamodb_local import DynamoDBLocal
    from relaynet_local.events import authorizer_event, http_event
    from relaynet_local.lambdas import load_handler
    from relaynet_local.template import create_table

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="relaynet-bench-restore-") as tmp, DynamoDBLocal(tmp) as store:
        env_before = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL_DYNAMODB", "RELAYNET_TABLE")}
        os.environ.update(AWS_ENDPOINT_URL_DYNAMODB=store.endpoint, RELAYNET_TABLE="relaynet-restore")
        settings.cache_clear()
        t.reset()
        try:
            create_table(boto3.client("dynamodb"), ROOT / "template.yaml", "relaynet-restore")
            tokens = admin.apply_spec((ROOT / "examples" / "demo-network.yaml").read_text())
            worker = tokens["networks"]["demo"]["instances"]["coder"][0]["token"]
            rep = next(iter(tokens.get("representatives", {}).values()), None)  # name -> token
            authorize = load_handler(FUNCTIONS, "authorizer.handler")
            for stem, body in RESTORE_SAMPLE.items():
                token = rep if stem.startswith("control_") else worker
                if token is None:
                    continue
                path = f"/v1/tools/{stem}" if body is not None else "/v1/tools/network_whoami"
                hdrs = [("content-type", "application/json"), ("authorization", f"Bearer {token}")]
                auth_event = authorizer_event("POST", path, route_key=f"POST {path}", identity=[f"Bearer {token}"],
                                              headers=hdrs)
                if body is None:
                    events = [auth_event, auth_event]
                else:
                    ctx = authorize(auth_event, None)["context"]
                    events = [http_event("POST", path, route_key=f"POST {path}", headers=hdrs, body=json.dumps(b),
                                         authorizer_context=ctx) for b in (body, body)]
                if stem == "network_claim":  # the second claim of one scope would renew; a fresh one each
                    events[1] = http_event("POST", path, route_key=f"POST {path}", headers=hdrs,
                                           body=json.dumps({"scope": "bench/restore-2/**"}), authorizer_context=ctx)
                ev_path = Path(tmp) / f"{stem}.json"
                ev_path.write_text(json.dumps(events))
                code = RESTORE_CODE.format(functions=str(FUNCTIONS), shared=str(ROOT / "shared"),
                                           infra=str(ROOT / "infra"), events=str(ev_path), stem=stem)
                env = {**os.environ, **ENV, "AWS_ENDPOINT_URL_DYNAMODB": store.endpoint,
                       "RELAYNET_TABLE": "relaynet-restore"}
                env.pop("PYTHONPATH", None)
                samples = []
                for _ in range(rounds):
                    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(ROOT), capture_output=True,
                                         text=True, timeout=120)
                    if res.returncode:
                        raise RuntimeError(f"restore estimate of {stem} failed: {res.stderr[-2000:]}")
                    hooks, first, warm, ok, answer = ast.literal_eval(res.stdout.strip().splitlines()[-1])
                    if not ok:
                        raise RuntimeError(f"restore estimate of {stem}: the first request failed: {answer}")
                    samples.append((hooks, first, warm))
                hooks, first, warm = (round(med([x[i] for x in samples]), 1) for i in range(3))
                out[stem] = {"hooks_ms": hooks, "first_request_ms": first, "after_restore_ms": round(hooks + first, 1),
                             "warm_request_ms": warm}
                log(f"  restore {stem}: hooks {hooks} ms, first request {first} ms, warm {warm} ms (cpu)")
        finally:
            for k, v in env_before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            settings.cache_clear()
            t.reset()
    out["rounds"] = rounds
    return out


# --------------------------------------------------------------------------- scale

def fresh_table() -> Any:
    import boto3

    from relaynet.store import table as t
    from relaynet_local.template import create_table

    t.reset()
    raw = boto3.client("dynamodb")
    create_table(raw, rpt.TEMPLATE, t.table_name())
    return raw


def drop_table(raw: Any) -> None:
    from relaynet.store import table as t

    raw.delete_table(TableName=t.table_name())
    t.reset()


def scale_claims(sizes: list[int], calls: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """network_claim through its handler against ``n`` active claims of the same namespace."""
    from moto import mock_aws

    import bench_claims
    from relaynet import admin, identity
    from relaynet.store import table as t

    Cpu.install()
    rows = []
    with mock_aws():
        for i, n in enumerate(sizes):
            raw = fresh_table()
            tokens = admin.apply_spec(f"network: claims{i}\nagents:\n  - {{name: coder, instances: 2}}\n")
            insts = tokens["networks"][f"claims{i}"]["instances"]["coder"]
            holder = {"agent": "coder", "instanceId": insts[0]["instanceId"]}
            tok = insts[1]["token"]
            bench_claims.seed(tokens["networks"][f"claims{i}"]["networkId"], holder, n, 0)
            meter = TimedMeter(t.client(), raw)
            identity.touch(identity.authorize(tok))  # presence written: steady state
            walls, cpus, reqs, items = [], [], [], []
            scanned: list[int] = []

            def count_items(parsed: dict[str, Any], model: Any, **_: Any) -> None:
                if model.name == "Query":
                    scanned.append(int(parsed.get("ScannedCount", 0)))

            t.client().meta.events.register("after-call.dynamodb.Query", count_items, unique_id="bench-run-scanned")
            for j in range(calls + 1):  # the first call warms caches and is not counted
                meter.reset()
                Cpu.clear()
                scanned.clear()
                start = time.perf_counter()
                status, got = rpt.call("network_claim", {"scope": f"c{i}/{bench_claims.new_scope(j)}"}, tok)
                wall = time.perf_counter() - start
                assert status == 200, got
                if j:
                    use = meter.usage.get("network_claim", rpt.Usage())
                    walls.append(wall)
                    cpus.append(sum(Cpu.take("network_claim")))
                    reqs.append(use.requests)
                    items.append(sum(scanned))
                status, out = rpt.call("network_release", {"claimId": got["claimId"]}, tok)
                assert status == 200, out
            t.client().meta.events.unregister("after-call.dynamodb.Query", unique_id="bench-run-scanned")
            row = {"active_claims": n, "requests": num(med(reqs)), "items_read": num(med(items)),
                   "cpu_ms": round(med(cpus) * 1000, 2), "wall_ms": round(med(walls) * 1000, 2)}
            rows.append(row)
            log(f"  network_claim, {n:>5} active: {row}")
            drop_table(raw)
    return rows


def scale_sweep(sizes: list[int], log: Callable[[str], None]) -> list[dict[str, Any]]:
    """One sweep run (batch 500) over ``n`` pending tasks, due and parked."""
    from moto import mock_aws

    import bench_sweep
    from relaynet import clock, sweep

    Cpu.install()
    rows = []
    with mock_aws():
        for n in sizes:
            for kind in ("due", "parked"):
                raw = fresh_table()
                net, creator = bench_sweep.seed_network(200)
                bench_sweep.seed_tasks(net, creator, "worker", n, parked=kind == "parked",
                                       start_ms=clock.now_ms() - 10 * 60_000)
                with bench_sweep.Meter() as m:
                    c0, m0 = time.process_time(), Cpu.moto
                    w0 = time.perf_counter()
                    stats = sweep.run(batch=500, time_budget_s=120)
                    wall = time.perf_counter() - w0
                    cpu = (time.process_time() - c0) - (Cpu.moto - m0)
                offered = stats["offered"]
                requests = sum(m.requests.values())
                row = {"pending": n, "kind": kind, "offered": offered, "requests": requests,
                       "ops": dict(sorted(m.requests.items())), "items_read": m.items_read,
                       "requests_per_offered": round(requests / offered, 3) if offered else None,
                       "items_read_per_offered": round(m.items_read / offered, 3) if offered else None,
                       "cpu_ms_per_offered": round(cpu * 1000 / offered, 2) if offered else None,
                       "wall_s": round(wall, 2)}
                rows.append(row)
                log(f"  sweep, {n:>6} {kind}: {row}")
                drop_table(raw)
    return rows


def scale_inbox(sizes: list[int], calls: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """network_inbox through its handler returning ``n`` messages (each from the same table state)."""
    from moto import mock_aws

    from relaynet import admin, identity, messaging
    from relaynet.models import worker as w
    from relaynet.store import table as t

    Cpu.install()
    rows = []
    spec = "network: inbox\nagents:\n  - {name: sender, instances: 1}\n  - {name: receiver, instances: 1}\n"
    with mock_aws():
        raw = fresh_table()
        tokens = admin.apply_spec(spec)["networks"]["inbox"]["instances"]
        sender = identity.authorize(tokens["sender"][0]["token"])
        tok = tokens["receiver"][0]["token"]
        meter = TimedMeter(t.client(), raw)
        identity.touch(identity.authorize(tok))
        for n in sizes:
            for i in range(n):
                messaging.ask(sender, w.AskRequest(body=f"Message {i}: could you look at PR {i}? It is small.",
                                                   toAgent="receiver"))
            snap = Snapshot()
            reqs, rrus, wrus, cpus = [], [], [], []
            for _ in range(calls):
                snap.restore()
                meter.reset()
                Cpu.clear()
                status, out = rpt.call("network_inbox", {}, tok)
                assert status == 200 and len(out["messages"]) == n, (status, len(out.get("messages", [])))
                use = meter.usage.get("network_inbox", rpt.Usage())
                reqs.append(use.requests)
                rrus.append(use.rru)
                wrus.append(use.wru)
                cpus.append(sum(Cpu.take("network_inbox")))
            row = {"messages": n, "requests": num(med(reqs)), "rcu": num(med(rrus)), "wcu": num(med(wrus)),
                   "cpu_ms": round(med(cpus) * 1000, 2)}
            rows.append(row)
            log(f"  network_inbox returning {n:>3}: {row}")
        drop_table(raw)
    return rows


# --------------------------------------------------------------------------- report

def verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "NOT MET")


def report(results: dict[str, Any]) -> str:
    lines: list[str] = []
    add = lines.append
    meta = results["meta"]
    add(f"Relaynet benchmarks  ({meta['python']}, {meta['machine']}; moto in-process; "
        f"{meta['calls']} calls per tool, {meta['inits']} interpreters per function)")
    tools = results.get("tools")
    if tools:
        add("")
        add("== DynamoDB requests, modelled request units and handler CPU per typical call "
            f"(median of {meta['calls']})")
        add("   RCU/WCU are modelled from item sizes (DynamoDB's published rules): moto's "
            "ReturnConsumedCapacity is a placeholder.")
        add("   cpu ms = the tool handler's own CPU (process_time), moto's and the meter's excluded; "
            "authorizer not counted.")
        add("   idem = requests on powertools' Idempotency-Key record (in-progress PutItem, completing UpdateItem), "
            "included in req.")
        add(f"{'tool':<30} {'call':<44} {'req':>4} {'idem':>4} {'RCU':>6} {'WCU':>6} {'cpu ms':>7}  {'target':<20} "
            "requests by operation")
        for tool, row in tools.items():
            target = "-" if row["target"] is None else f"<={row['target']} {verdict(row['met'])}"
            if row["met"] is False and row["met_without_idempotency_key"]:
                target += " (key)"
            ops = ", ".join(f"{op} {n}" for op, n in sorted(row["ops"].items()))
            label = row["call"] if len(row["call"]) <= 44 else row["call"][:41] + "..."
            add(f"{tool:<30} {label:<44} {row['requests']:>4g} {row['idempotency_requests']:>4g} {row['rcu']:>6g} "
                f"{row['wcu']:>6g} {row['cpu_ms']:>7.2f}  {target:<20} {ops}")
        total = sum(1 for r in tools.values() if r["met"] is not None)
        met = sum(1 for r in tools.values() if r["met"])
        keyed = sum(1 for r in tools.values() if r["met"] is False and r.get("met_without_idempotency_key"))
        add(f"request targets met: {met} of {total}; {keyed} more would be without the Idempotency-Key record's "
            "requests (marked (key)); no request target (several objects by design):")
        for k, v in MULTI_OBJECT.items():
            if k in tools:
                add(f"  {k}: {v}")
    init = results.get("cold_init")
    if init:
        add("")
        clock = "CPU ms" if init.get("clock") == "cpu" else "ms"
        src = init.get("source")
        add(f"== cold import + init per function: {clock} (median of {meta['inits']} fresh interpreters) and ratio to "
            f"`import boto3; boto3.client(\"dynamodb\")` = {init['baseline_ms']:.1f} {clock}, with .pyc for every "
            "module (as sam build ships: functions/Makefile, shared/Makefile)"
            + (f"; then the same with relaynet compiled at import (baseline {src['baseline_ms']:.1f})" if src else ""))
        cols = 2 if src else 3
        items = sorted(init["ratio"].items(), key=lambda kv: -kv[1])
        rows = [items[i:i + cols] for i in range(0, len(items), cols)]
        for r in rows:
            add("  ".join(f"{stem:<29}{init['ms'][stem]:>6.0f} {ratio:>5.2f}x"
                          + (f" | {src['ms'][stem]:>6.0f} {src['ratio'][stem]:>5.2f}x" if src else "")
                          for stem, ratio in r))
        if "framework_floor_ms" in init:
            add(f"framework floor (not a function: boto3 client + powertools' validating HTTP resolver and pydantic, "
                f"what every tool's Lambda loads before relaynet): {init['framework_floor_ms']:.0f} "
                f"{init['framework_floor_ratio']:.2f}x")
        over = [s for s, r in init["ratio"].items() if r > INIT_TARGET]
        median = med(list(init["ratio"].values()))
        if "own_ms" in init:  # issue 30 retired the ratio-to-baseline targets: the floor itself is above them
            add(f"ratio to the baseline, median {median:.2f}x (no longer a target: issue 30 measures against the "
                f"framework floor and Relaynet's own share, below)")
        else:
            add(f"target every function <= {INIT_TARGET}x: met by {len(init['ratio']) - len(over)} of {len(init['ratio'])}"
                + (" (over: " + ", ".join(f"{s} {init['ratio'][s]:.2f}x" for s in sorted(over)) + ")" if over else "")
                + f"; median {median:.2f}x, target <= {INIT_MEDIAN_TARGET}x: {verdict(median <= INIT_MEDIAN_TARGET)}")
        if "own_ms" in init:
            floor = init["framework_floor_ms"]
            add(f"against the framework floor ({floor:.0f} {clock} in this run) and Relaynet's own share (the import "
                "self-time of the handler and relaynet.* modules, python -X importtime, ms, as a ratio to the baseline):")
            items = sorted(init["floor_ratio"].items(), key=lambda kv: -kv[1])
            for i in range(0, len(items), 2):
                add("  ".join(f"{stem:<29}{ratio:>5.2f}x floor  own {init['own_ms'][stem]:>5.1f} "
                              f"{init['own_ratio'][stem]:>5.2f}x" for stem, ratio in items[i:i + 2]))
            over_floor = sorted(s for s, r in init["floor_ratio"].items() if r > FLOOR_TARGET)
            over_own = sorted(s for s, r in init["own_ratio"].items() if r > OWN_SHARE_TARGET)
            n = len(init["floor_ratio"])
            add(f"target every function <= {FLOOR_TARGET}x the floor: met by {n - len(over_floor)} of {n}"
                + (" (over: " + ", ".join(f"{s} {init['floor_ratio'][s]:.2f}x" for s in over_floor) + ")"
                   if over_floor else ""))
            add(f"target own share <= {OWN_SHARE_TARGET}x the baseline: met by {n - len(over_own)} of {n}"
                + (" (over: " + ", ".join(f"{s} {init['own_ratio'][s]:.2f}x" for s in over_own) + ")"
                   if over_own else ""))
        bc = init.get("bytecode")
        if bc:
            names = ["baseline", FLOOR] + [s for s in BYTECODE_SAMPLE if s not in (None, FLOOR)]
            add(f"byte code, a few functions: {clock} and ratio, median of {bc.get('rounds', 3)} "
                "(no .pyc anywhere: how the layer shipped before the Makefiles):")
            add(f"  {'':<36}" + "".join(f"{n:>20}" for n in names))
            for label, text in (("no_pyc", "no .pyc at all (SAM's python builder)"),
                                ("all_pyc", ".pyc for everything (compiled layer)")):
                row = bc[label]
                add(f"  {text:<36}" + "".join(f"{row['ms'][n]:>12.0f} {row['ratio'][n]:>5.2f}x " for n in names))
    restore = results.get("restore")
    if restore:
        add("")
        add(f"== SnapStart estimate: CPU ms a restored environment spends before it has answered (after the init "
            f"the snapshot holds: the after-restore hooks, then the first request to DynamoDB Local over HTTP), "
            f"median of {restore['rounds']}; a warm request for comparison")
        add(f"  {'function':<22}{'hooks':>8}{'first request':>15}{'after restore':>15}{'warm':>8}")
        rows = {k: v for k, v in restore.items() if k != "rounds"}
        for stem, r in rows.items():
            add(f"  {stem:<22}{r['hooks_ms']:>8.1f}{r['first_request_ms']:>15.1f}{r['after_restore_ms']:>15.1f}"
                f"{r['warm_request_ms']:>8.1f}")
        worst = max(rows.values(), key=lambda r: r["after_restore_ms"]) if rows else None
        if worst:
            add(f"target after-restore work < {RESTORE_TARGET_MS:.0f} ms: "
                f"{verdict(all(r['after_restore_ms'] < RESTORE_TARGET_MS for r in rows.values()))} "
                f"(worst {worst['after_restore_ms']:.1f} ms)")
    scale = results.get("scale")
    if scale:
        add("")
        add("== scale")
        if scale.get("network_claim"):
            add(f"network_claim (handler), active claims of the same namespace: {'active':>7} {'req':>4} "
                f"{'items read':>10} {'cpu ms':>8} {'wall ms':>8}")
            for r in scale["network_claim"]:
                add(f"{'':<67}{r['active_claims']:>7} {r['requests']:>4g} {r['items_read']:>10g} "
                    f"{r['cpu_ms']:>8.2f} {r['wall_ms']:>8.2f}")
            v = scale.get("claim_growth")
            if v:
                add(f"  time at {v['to']:,} / time at {v['from']:,}: cpu {v['cpu_ratio']:.2f}x, wall {v['wall_ratio']:.2f}x "
                    f"(linear: {v['to'] // v['from']}x): {verdict(v['met'])}")
        if scale.get("sweep"):
            add(f"sweep (one run, batch 500, 200 live instances): {'pending':>8} {'kind':<7} {'offered':>7} "
                f"{'req':>5} {'req/offered':>11} {'items/offered':>13} {'cpu ms/offered':>14}")
            for r in scale["sweep"]:
                add(f"{'':<48}{r['pending']:>8} {r['kind']:<7} {r['offered']:>7} {r['requests']:>5} "
                    f"{r['requests_per_offered'] or 0:>11.3f} {r['items_read_per_offered'] or 0:>13.3f} "
                    f"{r['cpu_ms_per_offered'] or 0:>14.2f}")
            v = scale.get("sweep_constant")
            if v:
                add(f"  requests per offered task {', '.join(f'{k}: {x}' for k, x in v['per_offered'].items())}: "
                    f"{verdict(v['met'])}")
        if scale.get("network_inbox"):
            add(f"network_inbox (handler): {'messages':>9} {'req':>4} {'RCU':>6} {'WCU':>6} {'cpu ms':>8}")
            for r in scale["network_inbox"]:
                add(f"{'':<25}{r['messages']:>9} {r['requests']:>4g} {r['rcu']:>6g} {r['wcu']:>6g} {r['cpu_ms']:>8.2f}")
    return "\n".join(lines)


def judge_scale(scale: dict[str, Any]) -> None:
    claims = {r["active_claims"]: r for r in scale.get("network_claim", [])}
    if 100 in claims and 1000 in claims:
        a, b = claims[100], claims[1000]
        cpu_ratio = b["cpu_ms"] / a["cpu_ms"] if a["cpu_ms"] else 0.0
        wall_ratio = b["wall_ms"] / a["wall_ms"] if a["wall_ms"] else 0.0
        scale["claim_growth"] = {"from": 100, "to": 1000, "cpu_ratio": round(cpu_ratio, 2),
                                 "wall_ratio": round(wall_ratio, 2), "met": cpu_ratio <= 10 and wall_ratio <= 10}
    per: dict[str, float] = {}
    for r in scale.get("sweep", []):
        if r["requests_per_offered"] is not None:
            per[f"{r['pending']} {r['kind']}"] = r["requests_per_offered"]
    if per:
        by_kind: dict[str, list[float]] = {}
        for key, v in per.items():
            by_kind.setdefault(key.split()[1], []).append(v)
        met = all(max(v) - min(v) <= 0.01 for v in by_kind.values())
        scale["sweep_constant"] = {"per_offered": per, "met": met}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50, help="repetitions of each tool's typical call")
    ap.add_argument("--inits", type=int, default=5, help="fresh interpreters per function")
    ap.add_argument("--sections", default="tools,init,scale")
    ap.add_argument("--functions", default="", help="init: only these handler files (comma-separated stems, e.g. "
                                                    "health,ui), without the byte-code rows and the SnapStart estimate")
    ap.add_argument("--quick", action="store_true", help="5 calls, 1 interpreter, small scale rows")
    ap.add_argument("--out", default=str(BENCH / "results.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.calls, args.inits = 5, 1
    sections = set(args.sections.split(","))

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    began = time.perf_counter()
    results: dict[str, Any] = {"meta": {"python": f"Python {platform.python_version()}",
                                        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
                                        "calls": args.calls, "inits": args.inits,
                                        "capacity": "modelled from item sizes (moto's ReturnConsumedCapacity is a placeholder)"}}
    fast_moto()
    if "tools" in sections:
        log("tools ...")
        results["tools"] = bench_tools(args.calls, log)
    if "init" in sections:
        log("cold init ...")
        only = {s for s in args.functions.split(",") if s}
        init = bench_init(args.inits, log, only or None)
        if not only:
            init["bytecode"] = bench_init_bytecode(1 if args.quick else 3, log)
        stems = sorted(init["ms"])
        init["own_ms"] = bench_own_share(stems, args.inits, log)
        init["floor_ratio"] = {s: round(init["ms"][s] / init["framework_floor_ms"], 3) for s in stems}
        init["own_ratio"] = {s: round(init["own_ms"][s] / init["baseline_ms"], 3) for s in stems}
        results["cold_init"] = init
        results["cold_init_ratio"] = init["ratio"]
        if not only:
            log("snapstart estimate ...")
            results["restore"] = bench_restore(1 if args.quick else 5, log)
    if "scale" in sections:
        log("scale ...")
        scale: dict[str, Any] = {}
        scale["network_claim"] = scale_claims([0, 100, 1000], 5 if args.quick else 15, log)
        scale["sweep"] = scale_sweep([1000] if args.quick else [1000, 10000], log)
        scale["network_inbox"] = scale_inbox([1, 10, 100], 3 if args.quick else 10, log)
        judge_scale(scale)
        results["scale"] = scale
    results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
    text = report(results)
    print(text)
    print(f"\n({results['meta']['seconds']:.0f} s; figures in {os.path.relpath(args.out, ROOT)})")
    Path(args.out).write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
