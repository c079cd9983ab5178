"""SnapStart's after-restore hook (relaynet.snapstart; issue 30): environments resumed from one
snapshot must not share ids, randomness or connections."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: One interpreter plays Lambda: it initialises (imports a handler's package, mints an id and draws
#: from ``random`` the way init code might, with the clock frozen at one millisecond), then forks
#: two children, the two environments a snapshot resumes. Each runs the hooks registered with
#: snapshot_restore_py, as the runtime does after a restore, unless told not to, then mints ids
#: and draws with the clock still at or behind the snapshot's millisecond.
RESTORE = r"""
import json, os, random, sys
sys.path.insert(0, os.path.join(sys.argv[1], "shared"))
from relaynet import ids, observability  # noqa: F401  # observability registers the hook
from snapshot_restore_py import get_after_restore

run_hooks = sys.argv[2] == "hooks"
FROZEN_MS = 1_780_000_000_000
ids.now_ms = lambda: FROZEN_MS  # the name ids.ulid reads
ids.new_id("msg")               # init minted an id: the monotonic state is in the snapshot
random.random()                 # and drew from random
snapshot_random = random.getstate()

children = []
for _ in range(2):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        # fork reseeds random in the child (random registers an at-fork hook); a microVM
        # snapshot does not, so put back the state the snapshot holds
        random.setstate(snapshot_random)
        if run_hooks:
            for func, args, kwargs in get_after_restore():
                func(*args, **kwargs)
        out = {"ids": [ids.new_id("msg") for _ in range(1000)], "random": [random.random() for _ in range(5)]}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    children.append((pid, read))
results = []
for pid, read in children:
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.waitpid(pid, 0)
    results.append(json.loads(b"".join(chunks)))
print(json.dumps({"hooks": len(get_after_restore()), "environments": results}))
"""


def _restore_two(mode: str) -> dict:
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", RESTORE, str(ROOT), mode], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_two_environments_restored_from_one_snapshot_mint_no_common_id_and_draw_apart():
    out = _restore_two("hooks")
    assert out["hooks"] == 1, "importing relaynet.observability registers the hook once"
    a, b = out["environments"]
    assert len(set(a["ids"])) == len(set(b["ids"])) == 1000
    assert not set(a["ids"]) & set(b["ids"])
    assert a["random"] != b["random"], "retry jitter would run in lockstep"
    # and ids in one environment still increase within the millisecond (ids.py's monotonic mode)
    assert a["ids"] == sorted(a["ids"]) and b["ids"] == sorted(b["ids"])


def test_without_the_hook_the_two_environments_collide():
    """The control: what the hook prevents is real. Without it both children continue the
    snapshot's ULID state and Mersenne Twister and produce the same ids and the same draws."""
    a, b = _restore_two("none")["environments"]
    assert a["ids"] == b["ids"]
    assert a["random"] == b["random"]


def _relaynet_imports(path) -> set[str]:
    """The relaynet modules a file imports at module level: ``from relaynet import x`` gives
    ``relaynet.x``, ``from relaynet.x import y`` and ``import relaynet.x`` give ``relaynet.x``."""
    out = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module == "relaynet":
            out |= {f"relaynet.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("relaynet."):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("relaynet.")}
    return out


def test_every_handler_file_imports_the_module_that_registers_the_hook():
    """The runtime runs only hooks registered by modules the handler file imports (AWS,
    "Lambda SnapStart runtime hooks for Python"); relaynet.observability registers it at import
    (``relaynet`` is a namespace package with no __init__ to do it), so a handler must import it,
    itself or through relaynet.http.api (ToolApp), which imports it at module level."""
    assert "relaynet.observability" in _relaynet_imports(ROOT / "shared" / "relaynet" / "http" / "api.py")
    registers = {"relaynet.observability", "relaynet.http.api"}
    missing = [path.name for path in sorted((ROOT / "functions").glob("*.py")) if not _relaynet_imports(path) & registers]
    assert missing == []
    assert "_snapstart.register()" in (ROOT / "shared" / "relaynet" / "observability.py").read_text(encoding="utf-8")


def test_the_layer_does_not_ship_its_own_snapshot_restore_py():
    """A copy in the layer (/opt/python, before the runtime's own path) would hold a registry
    the runtime never reads, and no hook would run."""
    lines = [ln.split("#")[0].strip().lower() for ln in (ROOT / "shared" / "requirements.txt").read_text().splitlines()]
    assert not any(ln.startswith("snapshot-restore-py") or ln.startswith("snapshot_restore_py") for ln in lines)


def test_after_restore_closes_the_pools_and_the_clients_reconnect(server_table):
    """On DynamoDB Local, over real sockets: a pooled connection made before the "snapshot" is
    gone after the hook, and the next request opens a new one."""
    from relaynet import push, snapstart
    from relaynet.store import table

    client = table.client()
    client.describe_table(TableName=table.table_name())
    pools = client._endpoint.http_session._manager.pools  # urllib3's PoolManager: one pool per host
    assert len(pools) == 1
    outbound = push.outbound()
    snapstart.after_restore()
    assert len(pools) == 0
    assert push.outbound() is not outbound and outbound.is_closed
    assert table.client() is client  # the same client, reconnecting
    assert client.describe_table(TableName=table.table_name())["Table"]["TableStatus"] == "ACTIVE"
    assert len(pools) == 1
