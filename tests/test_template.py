"""template.yaml: valid for cfn-lint, one function per handler file, the routes and names the
protocol fixes (PROTOCOL.md 1, 2, 7), and the table every handler and test relies on."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from relaynet_local.template import load_template, load_yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
FUNCTIONS = ROOT / "functions"

WORKER_TOOLS = [
    "network_whoami", "network_discover", "network_ask", "network_inbox", "network_reply",
    "network_delegate", "network_task_get", "network_task_update", "network_claim",
    "network_release", "network_publish_artifact", "network_register_capabilities",
]


def logical_id(stem: str) -> str:
    """The naming rule documented in template.yaml: network_ask -> NetworkAskFunction."""
    return "".join(part.capitalize() for part in stem.split("_")) + "Function"


def handler_files() -> dict[str, Path]:
    """Handler files of functions/: top-level ``*.py`` not starting with ``_`` that define
    ``handler`` at module level. Anything else there is a shared helper."""
    out = {}
    for path in sorted(FUNCTIONS.glob("*.py")):
        if path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        if "handler" in names:
            out[path.stem] = path
    return out


@pytest.fixture(scope="module")
def template():
    return load_template(TEMPLATE)


def _cfn_lint() -> str:
    exe = Path(sys.executable).parent / ("cfn-lint.exe" if os.name == "nt" else "cfn-lint")
    found = str(exe) if exe.exists() else shutil.which("cfn-lint")
    if not found:
        pytest.fail("cfn-lint is not installed (pip install -e '.[test]')")
    return found


def test_cfn_lint_finds_no_errors():
    proc = subprocess.run([_cfn_lint(), "--format", "json", str(TEMPLATE)],
                          capture_output=True, text=True, timeout=120)
    try:
        matches = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        pytest.fail(f"cfn-lint failed (exit {proc.returncode}): {proc.stdout}{proc.stderr}")
    lines = [f"{m['Level']} {m['Rule']['Id']} {'/'.join(map(str, m['Location']['Path']))}: "
             f"{m['Message']}" for m in matches]
    for line in lines:
        print(line)
    errors = [line for line in lines if line.startswith("Error")]
    assert not errors, "cfn-lint errors:\n" + "\n".join(errors)
    assert proc.returncode in (0, 4, 8, 12), proc.stderr  # bit 2: errors


def test_every_handler_file_has_exactly_one_function_and_vice_versa(template):
    files = handler_files()
    if not files:
        pytest.skip("functions/ holds no handler files yet (the lead writes them); "
                    "the file-set check runs once it does")
    by_file: dict[str, list[str]] = {}
    for fn in template.functions.values():
        if Path(fn.code_uri) == FUNCTIONS.resolve():
            by_file.setdefault(fn.handler.rsplit(".", 1)[0], []).append(fn.logical_id)
    missing = sorted(set(files) - set(by_file))
    extra = sorted(set(by_file) - set(files))
    dupes = {stem: ids for stem, ids in by_file.items() if len(ids) > 1}
    assert not missing, f"handler files without a function in template.yaml: {missing}"
    assert not extra, f"template functions without a handler file in functions/: {extra}"
    assert not dupes, f"handler files served by several functions: {dupes}"


def test_functions_follow_the_naming_rule(template):
    for fn in template.functions.values():
        module, func = fn.handler.rsplit(".", 1)
        assert Path(fn.code_uri) == FUNCTIONS.resolve(), fn
        assert func == "handler", fn
        assert fn.logical_id == logical_id(module), f"{fn.handler} should be {logical_id(module)}"
        log_group = logical_id(module).removesuffix("Function") + "LogGroup"
        assert log_group in template.document["Resources"], f"{fn.logical_id} has no {log_group}"


def test_every_tool_route_is_post_v1_tools_file_stem(template):
    tool_routes = [r for r in template.routes if r.path.startswith("/v1/tools/")]
    assert tool_routes
    for route in tool_routes:
        stem = route.path.removeprefix("/v1/tools/")
        assert route.method == "POST", route
        assert route.handler == f"{stem}.handler", route
        assert route.auth, f"{route.route_key} must go through the authorizer"
    names = [r.path.removeprefix("/v1/tools/") for r in tool_routes]
    assert len(names) == len(set(names)), "a tool route appears twice"
    assert set(WORKER_TOOLS) <= set(names), sorted(set(WORKER_TOOLS) - set(names))


def test_health_and_openapi_are_public_and_the_rest_is_authorised(template):
    routes = {r.route_key: r for r in template.routes}
    assert routes["GET /v1/health"].auth is False
    assert routes["GET /v1/openapi.json"].auth is False
    public = {key for key, r in routes.items() if not r.auth}
    assert public == {"GET /v1/health", "GET /v1/openapi.json"}
    assert template.authorizer is not None and template.authorizer.handler == "authorizer.handler"
    assert 0 < template.authorizer_ttl <= 60


def test_authorizer_is_a_simple_response_payload_2_lambda_authorizer(template):
    api = template.document["Resources"]["HttpApi"]["Properties"]["Auth"]
    spec = api["Authorizers"][api["DefaultAuthorizer"]]
    assert spec["AuthorizerPayloadFormatVersion"] == "2.0"
    assert spec["EnableSimpleResponses"] is True
    assert spec["Identity"]["Headers"] == ["Authorization"]


def test_sweep_runs_every_minute(template):
    assert [(s.function.handler, s.expression) for s in template.schedules] == [
        ("sweep.handler", "rate(1 minute)")]


def test_table_schema(template):
    props = template.table.properties
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "PK", "KeyType": "HASH"},
                                  {"AttributeName": "SK", "KeyType": "RANGE"}]
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"GSI1", "GSI2"}
    for name, index in indexes.items():
        assert [k["AttributeName"] for k in index["KeySchema"]] == [f"{name}PK", f"{name}SK"]
        assert index["Projection"] == {"ProjectionType": "ALL"}
    assert all(a["AttributeType"] == "S" for a in props["AttributeDefinitions"])
    assert template.table.ttl_attribute == "ttl"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_configuration_reaches_every_function(template):
    env = template.environment({template.table.logical_id: "t"})
    assert env["RELAYNET_TABLE"] == "t"
    assert {k: env[k] for k in env if k.startswith("RELAYNET_") and k != "RELAYNET_TABLE"} == {
        "RELAYNET_OFFER_TTL_SECONDS": "300",
        "RELAYNET_PRESENCE_TIMEOUT_SECONDS": "300",
        "RELAYNET_CHANNEL_TTL_SECONDS": "7200",
        "RELAYNET_REPLY_WITHIN_SECONDS": "600",
        "RELAYNET_MAX_WAIT_SECONDS": "20",
    }
    assert env["POWERTOOLS_SERVICE_NAME"] == "relaynet"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Relaynet"
    assert "LOG_LEVEL" in env
    outputs = load_yaml(TEMPLATE)["Outputs"]
    assert {"ApiUrl", "TableName"} <= set(outputs)


def test_layer_is_built_from_shared():
    resources = load_yaml(TEMPLATE)["Resources"]
    layers = [r for r in resources.values() if r["Type"] == "AWS::Serverless::LayerVersion"]
    assert len(layers) == 1 and layers[0]["Properties"]["ContentUri"] == "shared/"
    requirements = (ROOT / "shared" / "requirements.txt").read_text(encoding="utf-8").lower()
    for package in ("aws-lambda-powertools", "pydantic", "pyyaml"):
        assert package in requirements
