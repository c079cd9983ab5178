"""The wall between the two distributions that share the ``relaynet`` namespace (issue 29, "one
package per thing that ships"; docs/architecture.md, "Two distributions"): the hub's
(shared/relaynet, the Lambda layer) imports neither the local stack (relaynet_local) nor a client
module, and the client's (client/relaynet, relaynet-client) imports only the standard library,
its declared dependencies and its own modules. Every import counts, also one inside a function
or under ``TYPE_CHECKING``: a lazy import is still a dependency. (What a function's cold start
imports is tests/test_import_graph.py.)"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

HUB = ROOT / "shared" / "relaynet"
CLIENT = ROOT / "client" / "relaynet"


def _top_modules(package: Path) -> set[str]:
    """``relaynet.<name>`` for each module and subpackage directly in ``package``."""
    return {f"relaynet.{p.stem}" for p in package.glob("*.py")} | {
        f"relaynet.{p.name}" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (module level, functions, TYPE_CHECKING):
    ``import a.b`` gives ``a.b``; ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (c may be
    a module); relative imports are resolved against ``path``'s package under ``relaynet``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = path.parent.parts[path.parent.parts.index("relaynet"):]
                module = ".".join(base[: len(base) - node.level + 1] + ((module,) if module else ()))
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


def _hub_files() -> list[Path]:
    return sorted(HUB.rglob("*.py"))


def _client_files() -> list[Path]:
    return sorted(CLIENT.rglob("*.py"))


def _relaynet_top(module: str) -> str | None:
    """``relaynet.x`` for a module under ``relaynet.x``; None outside the namespace."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "relaynet" and len(parts) > 1 else None


def test_the_two_distributions_ship_no_module_twice_and_neither_owns_the_namespace():
    """Two distributions with one file would overwrite each other; a relaynet/__init__.py on
    either side would make ``relaynet`` a regular package and hide the other half."""
    assert not _top_modules(HUB) & _top_modules(CLIENT)
    assert not (HUB / "__init__.py").exists() and not (CLIENT / "__init__.py").exists()


def test_the_hub_imports_nothing_of_the_local_stack():
    """The layer ships shared/ alone: an import of relaynet_local would fail in Lambda."""
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports_of(p) if m.split(".")[0] == "relaynet_local")
           for p in _hub_files()}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_hub_imports_no_client_module():
    """The layer holds what a Lambda imports and nothing else: no SDK, bridge, hook or CLI."""
    client = _top_modules(CLIENT)
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports_of(p) if _relaynet_top(m) in client)
           for p in _hub_files()}
    assert {k: v for k, v in bad.items() if v} == {}


def client_allowed_roots() -> set[str]:
    """The top-level modules client/relaynet may import besides its own: the standard library's
    and its declared dependencies' (client/pyproject.toml, a distribution's name as its import
    name: ``httpx-sse`` -> ``httpx_sse``)."""
    project = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {dep.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().replace("-", "_")
                for dep in project["dependencies"]}
    return set(sys.stdlib_module_names) | declared | {"__future__"}


def test_the_client_imports_only_the_stdlib_its_declared_dependencies_and_itself():
    """pip install ./client on an agent's machine gets no boto3, powertools, pydantic models or
    catalogue: what the bridge and the edit hook need of the hub's facts is generated
    (relaynet.client_tools, relaynet.client_tables; tests/test_generate.py)."""
    own, allowed = _top_modules(CLIENT), client_allowed_roots()
    bad = {}
    for path in _client_files():
        wrong = sorted(m for m in imports_of(path) if m not in ("", "relaynet") and (
            _relaynet_top(m) not in own if m.split(".")[0] == "relaynet" else m.split(".")[0] not in allowed))
        if wrong:
            bad[str(path.relative_to(ROOT))] = wrong
    assert bad == {}


#: Imports the client's modules in a fresh interpreter in which the hub's half of ``relaynet``,
#: the local stack and the hub's dependencies cannot be imported (a meta path finder refuses
#: them, whatever the editable installs would find), runs ``relaynet --help``, and prints what of
#: the refused names was asked for.
CLIENT_ALONE = r"""
import contextlib, importlib, io, json, sys
hub, client = set(json.loads(sys.argv[1])), json.loads(sys.argv[2])
refused_roots = {"relaynet_local", "boto3", "botocore", "aws_lambda_powertools", "yaml", "moto"}
asked = []
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in refused_roots or ".".join(name.split(".")[:2]) in hub:
            asked.append(name)
            raise ModuleNotFoundError(f"refused: {name} is not the client's", name=name)
        return None
sys.meta_path.insert(0, Refuse())
for name in client:
    importlib.import_module(name)
from relaynet import cli
cli.entry_points = lambda *, group: []  # the hub's distribution, and so its entry points, are not installed
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    cli.main(["--help"])
missing = io.StringIO()
with contextlib.redirect_stderr(missing):
    status = cli.main(["serve", "--port", "1"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in refused_roots or ".".join(m.split(".")[:2]) in hub)
print(json.dumps({"asked": asked, "loaded": loaded, "help": out.getvalue(), "serve": [status, missing.getvalue()]}))
"""


def test_the_client_imports_and_runs_without_the_hub_or_boto3():
    """What ``pip install ./client`` alone gives an agent's machine, in one subprocess: every
    client module imports, ``relaynet --help`` lists the client's commands, and a hub command
    says which distribution to install, with no hub module, boto3 or powertools loaded."""
    client = sorted(m for m in _top_modules(CLIENT))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", CLIENT_ALONE, json.dumps(sorted(_top_modules(HUB))), json.dumps(client)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT / "client"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["asked"] == [] and out["loaded"] == []
    for command in ("mcp", "hook", "guard", "worker", "graph"):
        assert command in out["help"]
    status, message = out["serve"]
    assert status == 2 and "hub's distribution" in message and "pip install -e ." in message
