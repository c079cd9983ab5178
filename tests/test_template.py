"""template.yaml: valid for cfn-lint and `sam validate --lint`, built by `sam build` without
Docker, one function per handler file, the routes and names the protocol fixes (PROTOCOL.md 1,
2, 7), the table every handler and test relies on, and what production needs (authorizer
permission, log retention, parameters, outputs, arm64). Policies: tests/test_policies.py;
OpenAPI: tests/test_openapi.py."""

from __future__ import annotations

import ast
import graphlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
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


def test_health_openapi_and_the_page_are_public_and_the_rest_is_authorised(template):
    routes = {r.route_key: r for r in template.routes}
    assert routes["GET /v1/health"].auth is False
    assert routes["GET /v1/openapi.json"].auth is False
    public = {key for key, r in routes.items() if not r.auth}
    assert public == {"GET /v1/health", "GET /v1/openapi.json", "GET /v1/ui", "GET /v1/ui/{asset}",
                      "GET /a2a/{network}/{agent}/.well-known/agent-card.json", "GET /a2a/{network}",  # cards: docs/protocol.md 13.1
                      "POST /a2a/{network}/push/{instance}/{task}"}  # a remote's notification: its own token (13.4)
    assert routes["POST /a2a/{network}/{agent}"].auth is True
    assert {routes["GET /v1/ui"].handler, routes["GET /v1/ui/{asset}"].handler} == {"ui.handler"}
    assert template.authorizer is not None and template.authorizer.handler == "authorizer.handler"
    assert 0 < template.authorizer_ttl <= 60


def test_authorizer_is_a_simple_response_payload_2_lambda_authorizer(template):
    api = template.document["Resources"]["HttpApi"]["Properties"]["Auth"]
    spec = api["Authorizers"][api["DefaultAuthorizer"]]
    assert spec["AuthorizerPayloadFormatVersion"] == "2.0"
    assert spec["EnableSimpleResponses"] is True
    assert spec["Identity"]["Headers"] == ["Authorization"]


def test_the_stage_throttles_every_route_with_parameters(template):
    routes = template.document["Resources"]["HttpApi"]["Properties"]["DefaultRouteSettings"]
    assert routes == {"ThrottlingBurstLimit": {"Ref": "ThrottleBurstLimit"},
                      "ThrottlingRateLimit": {"Ref": "ThrottleRateLimit"}}
    params = template.parameters()
    assert params["ThrottleBurstLimit"] > 0 and params["ThrottleRateLimit"] > 0


def test_sweep_push_retries_and_the_a2a_bridge_run_every_minute_and_the_ag2_keepalive_inside_the_idle_timeout(template):
    """The AG2 keepalive pings connections silent 4 minutes every 2 minutes: a quiet connection
    hears from the hub within 6 minutes, inside API Gateway's 10-minute idle timeout. The A2A
    bridge's minute is also the most a task offered to a remote A2A agent waits to be sent."""
    assert sorted((s.function.handler, s.expression) for s in template.schedules) == [
        ("a2a_bridge.handler", "rate(1 minute)"), ("ag2_keepalive.handler", "rate(2 minutes)"),
        ("push_retry.handler", "rate(1 minute)"), ("sweep.handler", "rate(1 minute)")]


def test_the_notifier_reads_new_mailbox_entries_from_the_stream_with_partial_batch_failures_and_a_dlq():
    """docs/protocol.md 10.3: the table's stream, filtered to INSERTs of mailbox entries, in
    batches, powertools' partial-batch responses, bisect and bounded retries, then an SQS DLQ."""
    resources = _resources()
    assert resources["Table"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    (source,) = resources["NotifierFunction"]["Properties"]["Events"].values()
    assert source["Type"] == "DynamoDB"
    props = source["Properties"]
    assert props["Stream"] == {"Fn::GetAtt": ["Table", "StreamArn"]}
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert 1 <= props["BatchSize"] <= 100 and props["BisectBatchOnFunctionError"] is True
    assert 0 < props["MaximumRetryAttempts"] <= 10
    assert props["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS", "Destination": {"Fn::GetAtt": ["NotifierDeadLetterQueue", "Arn"]}}
    assert resources["NotifierDeadLetterQueue"]["Type"] == "AWS::SQS::Queue"
    mail, a2a = [json.loads(f["Pattern"]) for f in props["FilterCriteria"]["Filters"]]
    assert mail == {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"GSI3PK": {"S": [{"exists": True}]}}}}
    # docs/protocol.md 13.6: the history entries of transitions of tasks with A2A push configs
    assert a2a == {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"a2aPush": {"BOOL": [True]}}}}
    source_text = (FUNCTIONS / "notifier.py").read_text(encoding="utf-8")
    assert "process_partial_response" in source_text and "EventType.DynamoDBStreams" in source_text


def test_table_schema(template):
    props = template.table.properties
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "PK", "KeyType": "HASH"},
                                  {"AttributeName": "SK", "KeyType": "RANGE"}]
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"GSI1", "GSI2", "GSI3", "GSI4"}
    from relaynet.store.table import INDEX_KEYS

    for name, index in indexes.items():
        keys = list(INDEX_KEYS.get(name, (f"{name}PK", f"{name}SK")))
        assert [k["AttributeName"] for k in index["KeySchema"]] == keys
        if name != "GSI3":
            assert index["Projection"] == {"ProjectionType": "ALL"}
    # the mailbox view (relaynet.mailbox) projects only what the inbox summary reads
    assert indexes["GSI3"]["Projection"] == {"ProjectionType": "INCLUDE",
                                             "NonKeyAttributes": ["kind", "createdAt", "senderInstance"]}
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
        "RELAYNET_PUSH_RETRY_BASE_SECONDS": "30",
        "RELAYNET_PUSH_RETRY_WINDOW_SECONDS": "900",
    }
    assert env["POWERTOOLS_SERVICE_NAME"] == "relaynet"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Relaynet"
    assert "POWERTOOLS_LOG_LEVEL" in env
    outputs = load_yaml(TEMPLATE)["Outputs"]
    assert {"ApiUrl", "TableName"} <= set(outputs)


def test_layer_is_built_from_shared():
    """SharedLayer (every function) is shared/, the only layer: the AG2 wire's functions serve
    AG2's protocol with Relaynet's own models of it (relaynet.ag2.protocol; issue 30 part 2), so
    no function carries AG2's package."""
    resources = load_yaml(TEMPLATE)["Resources"]
    layers = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::Serverless::LayerVersion"}
    assert sorted(layers) == ["SharedLayer"]
    assert layers["SharedLayer"]["Properties"]["ContentUri"] == "shared/"
    requirements = (ROOT / "shared" / "requirements.txt").read_text(encoding="utf-8").lower()
    for package in ("aws-lambda-powertools", "pydantic", "pyyaml"):
        assert package in requirements
    assert not re.search(r"^\s*ag2\b", requirements, re.M)


# --------------------------------------------------------------------------------------------
# Production settings


def _resources() -> dict:
    return load_yaml(TEMPLATE)["Resources"]


def test_runtime_and_architecture_match_the_layer():
    doc = load_yaml(TEMPLATE)
    fn = doc["Globals"]["Function"]
    assert fn["Runtime"] == "python3.13"  # SnapStart needs 3.12+; `sam build` uses .venv's python3.13
    assert fn["Architectures"] == ["arm64"]
    for lid, layer in doc["Resources"].items():
        if layer["Type"] != "AWS::Serverless::LayerVersion":
            continue
        assert layer["Properties"]["CompatibleRuntimes"] == [fn["Runtime"]]
        assert layer["Properties"]["CompatibleArchitectures"] == fn["Architectures"]
        # the shared layer ships byte code (shared/Makefile)
        assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}, lid
    for lid, r in doc["Resources"].items():
        if r["Type"] == "AWS::Serverless::Function":
            props = r["Properties"]
            assert "Runtime" not in props and "Architectures" not in props, lid
            assert "Layers" not in props, f"{lid}: Globals' SharedLayer is every function's one layer"
            assert r.get("Metadata") == {"BuildMethod": "makefile"}, f"{lid}: functions/Makefile builds every function"


def _make_var(makefile: Path, name: str) -> str:
    found = re.search(rf"^{name} [?:]?= (\S+)$", makefile.read_text(), re.M)
    assert found, f"{makefile} sets no {name}"
    return found.group(1)


def test_the_makefiles_compile_for_the_templates_runtime_and_architecture():
    """The byte code and the layer's binary wheels must be the runtime's: a .pyc is only read by
    the Python version that wrote it, a wheel's .so only loads on its architecture."""
    fn = load_yaml(TEMPLATE)["Globals"]["Function"]
    version = fn["Runtime"].removeprefix("python")
    for makefile in (ROOT / "functions" / "Makefile", ROOT / "shared" / "Makefile"):
        assert _make_var(makefile, "RUNTIME_VERSION") == version, makefile
        assert _make_var(makefile, "PYTHON") == fn["Runtime"], makefile
        assert "--invalidation-mode unchecked-hash" in makefile.read_text(), makefile
    # the top-level Makefile builds .venv with the runtime's Python (the tests run on it, and
    # `sam build` finds .venv/bin/python3.13 first on PATH)
    assert _make_var(ROOT / "Makefile", "RUNTIME_VERSION") == version
    assert "%d.%d" % sys.version_info[:2] == version, "the suite runs on the runtime's Python (make setup-test)"
    assert _make_var(ROOT / "shared" / "Makefile", "PLATFORM") == {"arm64": "manylinux2014_aarch64"}[fn["Architectures"][0]]


def test_every_function_and_the_api_log_with_the_retention_parameter():
    doc = load_yaml(TEMPLATE)
    groups = {lid: r["Properties"] for lid, r in doc["Resources"].items() if r["Type"] == "AWS::Logs::LogGroup"}
    assert all(g["RetentionInDays"] == {"Ref": "LogRetentionDays"} for g in groups.values())
    for lid, r in doc["Resources"].items():
        if r["Type"] == "AWS::Serverless::Function":
            group = groups[lid.removesuffix("Function") + "LogGroup"]
            assert group["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/${{{lid}}}"}
    access = doc["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["DestinationArn"]
    assert access == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}


def test_parameters_cover_the_configuration_and_reach_the_environment():
    doc = load_yaml(TEMPLATE)
    env = doc["Globals"]["Function"]["Environment"]["Variables"]
    wanted = {"OfferTtlSeconds": "RELAYNET_OFFER_TTL_SECONDS", "PresenceTimeoutSeconds": "RELAYNET_PRESENCE_TIMEOUT_SECONDS",
              "ChannelTtlSeconds": "RELAYNET_CHANNEL_TTL_SECONDS", "ReplyWithinSeconds": "RELAYNET_REPLY_WITHIN_SECONDS",
              "MaxWaitSeconds": "RELAYNET_MAX_WAIT_SECONDS", "LogLevel": "POWERTOOLS_LOG_LEVEL",
              "PushRetryBaseSeconds": "RELAYNET_PUSH_RETRY_BASE_SECONDS",
              "PushRetryWindowSeconds": "RELAYNET_PUSH_RETRY_WINDOW_SECONDS"}
    for param, variable in wanted.items():
        assert param in doc["Parameters"], param
        assert env[variable] == {"Ref": param}, variable
    assert env["RELAYNET_PUSH_AT_WRITE"] == {"Fn::If": ["PushAtWriteOn", "true", "false"]}
    assert doc["Conditions"]["PushAtWriteOn"] == {"Fn::Equals": [{"Ref": "PushAtWrite"}, "Enabled"]}
    assert doc["Parameters"]["PushAtWrite"]["AllowedValues"] == ["Enabled", "Disabled"]
    assert doc["Parameters"]["MaxWaitSeconds"]["MaxValue"] < doc["Globals"]["Function"]["Timeout"] < 30
    assert {"ApiUrl", "TableName"} <= set(doc["Outputs"])


def test_the_api_may_invoke_the_authorizer_and_caches_its_answer_briefly():
    auth = _resources()["HttpApi"]["Properties"]["Auth"]
    spec = auth["Authorizers"][auth["DefaultAuthorizer"]]
    # Without it SAM creates no AWS::Lambda::Permission and every authorised route answers 500.
    assert spec["EnableFunctionDefaultPermissions"] is True
    assert 0 < spec["Identity"]["ReauthorizeEvery"] <= 60


def test_the_table_is_kept_and_recoverable():
    table = _resources()["Table"]
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}


def _sam_transform(doc: dict | None = None, layer_uri: str = "s3://bucket/layer.zip") -> dict:
    """The resources of the transform `sam deploy` runs (aws-sam-translator, no AWS account
    needed), with the code locations `sam package` substitutes."""
    pytest.importorskip("samtranslator", reason="aws-sam-cli (aws-sam-translator) is not installed")
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    doc = doc or yaml_parse(TEMPLATE.read_text(encoding="utf-8"))
    doc["Globals"]["Function"]["CodeUri"] = "s3://bucket/functions.zip"
    doc["Resources"]["SharedLayer"]["Properties"]["ContentUri"] = layer_uri

    class Policies:
        def load(self):
            return {"AWSLambdaBasicExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
                    "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"}

        get_managed_policy_map = load

    env = {k: os.environ.get(k) for k in ("AWS_DEFAULT_REGION",)}
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        return transform(doc, {}, Policies())["Resources"]
    finally:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)


#: The functions no caller waits on (a stream or a schedule invokes them): no SnapStart.
BACKGROUND = {"SweepFunction", "A2aBridgeFunction", "NotifierFunction", "PushRetryFunction",
              "Ag2NotifierFunction", "Ag2KeepaliveFunction"}


def test_sam_translates_the_template_with_the_authorizer_permission_and_one_role_per_function():
    out = _sam_transform()
    functions = [lid for lid, r in out.items() if r["Type"] == "AWS::Lambda::Function"]
    roles = [lid for lid, r in out.items() if r["Type"] == "AWS::IAM::Role"]
    assert len(roles) == len(functions) == len(handler_files())
    aliases = {lid: r["Properties"] for lid, r in out.items() if r["Type"] == "AWS::Lambda::Alias"}
    assert {a["FunctionName"]["Ref"] for a in aliases.values()} == set(functions)
    assert {a["Name"] for a in aliases.values()} == {"live"}
    permissions = [r["Properties"] for r in out.values() if r["Type"] == "AWS::Lambda::Permission"]
    assert any(p["FunctionName"] == {"Ref": "AuthorizerFunctionAliaslive"} and
               p["Principal"] == "apigateway.amazonaws.com" for p in permissions)
    rules = [r for r in out.values() if r["Type"] == "AWS::Events::Rule"]
    assert sorted(r["Properties"]["ScheduleExpression"] for r in rules) == ["rate(1 minute)"] * 3 + [
        "rate(2 minutes)"]  # sweep, push retry, A2A bridge; the AG2 keepalive
    mappings = [r["Properties"] for r in out.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert sorted(m["FunctionName"]["Ref"] for m in mappings) == [
        "A2aBridgeFunctionAliaslive", "Ag2NotifierFunctionAliaslive", "NotifierFunctionAliaslive"]
    role = out["NotifierFunctionRole"]["Properties"]
    statements = [st for pol in role.get("Policies", []) for st in pol["PolicyDocument"]["Statement"]]
    assert any("sqs:SendMessage" in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
               for st in statements), "the notifier may not send to its DLQ"


def test_every_invocation_names_the_alias_and_snapstart_covers_the_request_path():
    """SnapStart restores published versions only: an integration, authorizer, schedule, stream
    mapping or invoke permission that named the function ($LATEST) would never meet a snapshot,
    and a permission on the function would not let API Gateway invoke the alias (docs/architecture.md,
    "SnapStart")."""
    out = _sam_transform()
    aliases = {lid for lid, r in out.items() if r["Type"] == "AWS::Lambda::Alias"}
    targets = []  # what every invocation URI names: the HTTP API's routes and authorizer, the AG2 integrations

    def walk(node):
        if isinstance(node, dict):
            sub = node.get("Fn::Sub")
            text, variables = (sub[0], sub[1]) if isinstance(sub, list) else (sub, {})
            if isinstance(text, str) and "/invocations" in text:
                name = re.search(r"functions/\$\{(\w+)\}/invocations", text).group(1)
                targets.append(variables[name]["Ref"] if name in variables else name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    functions = {lid for lid, r in out.items() if r["Type"] == "AWS::Lambda::Function"}
    assert set(targets) == {f"{lid}Aliaslive" for lid in functions - BACKGROUND} <= aliases
    for lid, r in out.items():
        props = r["Properties"]
        if r["Type"] == "AWS::Lambda::Permission":
            assert props["Action"] == "lambda:InvokeFunction"
            target = props["FunctionName"]
            assert isinstance(target, dict) and target.get("Ref") in aliases, (lid, target)
        if r["Type"] == "AWS::Events::Rule":
            assert all(t["Arn"]["Ref"] in aliases for t in props["Targets"]), lid
        if r["Type"] == "AWS::Lambda::Version":
            assert r["DeletionPolicy"] == "Delete", f"{lid}: a retained version keeps its SnapStart cache charge"
        if r["Type"] == "AWS::Lambda::Function":
            expected = {"ApplyOn": "None"} if lid in BACKGROUND else {
                "ApplyOn": {"Fn::If": ["SnapStartOn", "PublishedVersions", "None"]}}
            assert props["SnapStart"] == expected, lid
    params = load_yaml(TEMPLATE)["Parameters"]["SnapStart"]
    assert params["Default"] == "Enabled" and params["AllowedValues"] == ["Enabled", "Disabled"]


def test_new_layer_content_publishes_a_new_version_of_every_function_that_uses_it():
    """The relaynet package ships in SharedLayer: without AutoPublishAliasAllProperties and the
    layer's PublishLambdaVersion, a deploy that changed only the package would update $LATEST
    and leave the alias, and every caller, on the old code."""
    before = {lid for lid, r in _sam_transform(layer_uri="s3://bucket/layer-1.zip").items()
              if r["Type"] == "AWS::Lambda::Version"}
    after = {lid for lid, r in _sam_transform(layer_uri="s3://bucket/layer-2.zip").items()
             if r["Type"] == "AWS::Lambda::Version"}
    assert len(before) == len(after) == len(handler_files())
    assert not before & after, sorted(before & after)


# --------------------------------------------------------------------------------------------
# The SAM CLI: `sam validate --lint` and `sam build` (no Docker, no AWS account)


def _sam() -> str:
    exe = Path(sys.executable).parent / ("sam.exe" if os.name == "nt" else "sam")
    found = str(exe) if exe.exists() else shutil.which("sam")
    if not found:
        pytest.skip("the `sam` executable is missing (pip install -e '.[test]' installs aws-sam-cli)")
    return found


def _sam_env() -> dict[str, str]:
    # The venv's bin first: `sam build` looks for python3.13 (the runtime) and pip on PATH.
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}


@pytest.mark.sam
def test_sam_validate_lint_is_clean(tmp_path):
    proc = subprocess.run([_sam(), "validate", "--lint", "--template-file", str(TEMPLATE)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_sam_env())
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is a valid SAM Template" in proc.stdout + proc.stderr


@pytest.mark.sam
def test_sam_build_builds_every_function_and_the_layer_without_docker(tmp_path):
    """`sam build` the way a user runs it before `sam deploy` (pip downloads the layer's arm64
    wheels). Budget: 3 minutes; it takes about 10 s with a warm pip cache."""
    interpreter = load_yaml(TEMPLATE)["Globals"]["Function"]["Runtime"]  # python3.13: what sam looks for
    # not a skip: .venv is built with the runtime's Python (Makefile, infra/scripts/find-python)
    assert shutil.which(interpreter, path=_sam_env()["PATH"]), \
        f"no {interpreter} on PATH: `sam build` without a container needs the runtime's Python (make setup-test)"
    build = tmp_path / "build"
    started = time.monotonic()
    proc = subprocess.run([_sam(), "build", "--template-file", str(TEMPLATE), "--build-dir", str(build),
                           "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path, env=_sam_env())
    elapsed = time.monotonic() - started
    print(proc.stdout[-3000:], proc.stderr[-3000:], f"sam build took {elapsed:.1f} s")
    assert proc.returncode == 0 and "Build Succeeded" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert elapsed < 180
    built = load_yaml(build / "template.yaml")["Resources"]
    for stem in handler_files():
        lid = logical_id(stem)
        assert (build / lid / f"{stem}.py").is_file(), f"{lid} was not built"
        assert built[lid]["Properties"]["CodeUri"] == lid
    assert not (build / "SharedLayer" / "python" / "ag2").exists(), "the layer carries AG2's package"
    layer = build / "SharedLayer" / "python"
    for package in ("relaynet/version.py", "relaynet/store/table.py", "relaynet/ui/index.html", "relaynet/ui/app.js",
                    "relaynet/ui/app.css", "relaynet/ui/icon.svg", "aws_lambda_powertools", "pydantic",
                    "pydantic_core", "yaml", "boto3", "botocore"):
        assert (layer / package).exists(), f"the layer lacks {package}"
    assert list(layer.glob("pydantic_core/_pydantic_core*aarch64*.so")), "the layer's binary wheels are not arm64"
    assert built["SharedLayer"]["Properties"]["ContentUri"] == "SharedLayer"
    # byte code for every module, unchecked-hash (PEP 552: flags 0b01), so Lambda's read-only
    # /opt and /var/task never compile at a cold start
    tag = f"cpython-{interpreter.removeprefix('python').replace('.', '')}"
    sources = [p for p in layer.rglob("*.py") if p.parent.name != "__pycache__"]
    sources += [build / logical_id(stem) / f"{stem}.py" for stem in handler_files()]
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert pyc.is_file(), f"no byte code for {source.relative_to(build)}"
    for pyc in (layer / "relaynet" / "__pycache__" / f"version.{tag}.pyc",
                build / "NetworkAskFunction" / "__pycache__" / f"network_ask.{tag}.pyc"):
        assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, f"{pyc} is not an unchecked-hash .pyc"


def _references(value, out: set) -> set:
    """The logical ids ``value`` refers to (Ref, Fn::GetAtt, ${X} and ${X.Attr} in Fn::Sub)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                out.add(inner.split(".")[0])
            elif key == "Fn::GetAtt":
                out.add((inner[0] if isinstance(inner, list) else inner.split(".")[0]))
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                out.update(m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text))
                if isinstance(inner, list):
                    _references(inner[1], out)
            else:
                _references(inner, out)
    elif isinstance(value, list):
        for inner in value:
            _references(inner, out)
    return out


def test_the_deployed_template_has_no_circular_dependency():
    """CloudFormation refuses a stack whose resources depend on each other in a circle (the push at
    the write's targets once made every HTTP API function depend, through the A2A bridge's alias,
    on the HttpApi that routes to them): the transformed resources' Ref/GetAtt/Sub/DependsOn graph
    has no cycle."""
    resources = _sam_transform()
    graph = {}
    for lid, resource in resources.items():
        deps = _references({k: v for k, v in resource.items() if k != "DependsOn"}, set())
        depends_on = resource.get("DependsOn") or []
        deps |= set([depends_on] if isinstance(depends_on, str) else depends_on)
        graph[lid] = {d for d in deps if d in resources and d != lid}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError("circular dependency: " + " -> ".join(exc.args[1])) from None
