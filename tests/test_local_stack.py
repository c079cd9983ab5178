"""The local stack (infra/relaynet_local) over real HTTP, against a fixture template and fixture
handlers (tests/fixtures/local_stack/), independent of the real handlers."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import boto3
import httpx
import pytest

from relaynet_local import events, lambdas
from relaynet_local.server import LocalStack, mcp_config_text, write_tokens
from relaynet_local.template import create_table, load_template

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "local_stack"
FIXTURE_TEMPLATE = FIXTURE / "template.yaml"
ROOT_TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
GOOD = {"Authorization": "Bearer good"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    with LocalStack(port=0, template=FIXTURE_TEMPLATE, sweep_interval=0.2, table="fixture-table",
                    state_dir=state) as running:
        yield running


@pytest.fixture(scope="module")
def http(stack):
    with httpx.Client(base_url=stack.url, timeout=10) as client:
        yield client


def _echo(http, **kwargs):
    response = http.post("/v1/tools/echo", **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


# --- template parsing ------------------------------------------------------------------------

def test_fixture_template_routes():
    tpl = load_template(FIXTURE_TEMPLATE)
    routes = {r.route_key: r for r in tpl.routes}
    assert set(routes) == {"POST /v1/tools/echo", "GET /v1/things/{thingId}", "GET /v1/public",
                           "POST /v1/tools/crash", "POST /v1/tools/slow"}
    echo = routes["POST /v1/tools/echo"]
    assert (echo.method, echo.path, echo.function_id, echo.handler, echo.auth) == (
        "POST", "/v1/tools/echo", "EchoFunction", "echo.handler", True)
    assert echo.code_uri == str(FIXTURE / "functions")
    assert routes["GET /v1/public"].auth is False
    assert tpl.authorizer.logical_id == "AuthorizerFunction" and tpl.authorizer_ttl == 10
    assert [(s.function.logical_id, s.expression) for s in tpl.schedules] == [
        ("SweepFunction", "rate(1 minute)")]
    assert tpl.functions["SweepFunction"].timeout == 60
    assert tpl.functions["EchoFunction"].memory_size == 256


# --- HTTP behaviour --------------------------------------------------------------------------

def test_authorised_route_gets_event_and_authorizer_context(http, stack):
    data = _echo(http, json={"hello": "world"}, params={"a": "1"},
                 headers={**GOOD, "X-Custom": "Yes"})
    assert data["authorizer"]["lambda"]["network"] == "net_fixture"
    assert data["authorizer"]["lambda"]["instanceId"] == "inst_fixture"
    assert data["authorizer"]["lambda"]["type"] == "REQUEST"
    assert data["authorizer"]["lambda"]["routeArn"].endswith("/$default/POST/v1/tools/echo")
    assert json.loads(data["body"]) == {"hello": "world"}
    event = data["event"]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "POST /v1/tools/echo"
    assert event["rawPath"] == "/v1/tools/echo"
    assert event["rawQueryString"] == "a=1"
    assert event["queryStringParameters"] == {"a": "1"}
    assert event["isBase64Encoded"] is False
    assert event["headers"]["x-custom"] == "Yes"
    assert event["headers"]["authorization"] == "Bearer good"
    ctx = event["requestContext"]
    assert ctx["http"]["method"] == "POST" and ctx["http"]["path"] == "/v1/tools/echo"
    assert ctx["http"]["sourceIp"] == "127.0.0.1" and ctx["http"]["userAgent"].startswith("python-httpx")
    assert ctx["stage"] == "$default" and ctx["routeKey"] == "POST /v1/tools/echo"
    assert ctx["requestId"] and isinstance(ctx["timeEpoch"], int)
    assert data["context"]["function_name"] == "EchoFunction"
    assert data["context"]["memory_limit_in_mb"] == 256
    assert 0 < data["context"]["remaining_ms"] <= 29_000


def test_handler_headers_and_environment(http, stack):
    response = http.post("/v1/tools/echo", json={}, headers=GOOD)
    assert response.headers["x-fixture"] == "echo"
    assert response.headers["content-type"] == "application/json"
    env = response.json()["env"]
    assert env == {"RELAYNET_TABLE": "fixture-table", "RELAYNET_OFFER_TTL_SECONDS": "300",
                   "FIXTURE_GREETING": "hello", "AWS_ENDPOINT_URL_DYNAMODB": stack.dynamodb_endpoint,
                   "AWS_DEFAULT_REGION": "us-east-1"}


def test_empty_body_is_absent_and_path_parameters_are_passed(http):
    response = http.get("/v1/things/th_42", headers=GOOD)
    assert response.status_code == 200
    event = response.json()["event"]
    assert "body" not in event
    assert event["pathParameters"] == {"thingId": "th_42"}
    assert event["routeKey"] == "GET /v1/things/{thingId}"


def test_missing_authorization_is_401(http):
    response = http.post("/v1/tools/echo", json={})
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "unauthenticated", "message": "missing bearer token"}}


def test_refused_token_is_403(http):
    response = http.post("/v1/tools/echo", json={}, headers={"Authorization": "Bearer bad"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_authorizer_crash_is_500(http):
    response = http.post("/v1/tools/echo", json={}, headers={"Authorization": "Bearer boom"})
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal", "message": "internal error"}}


def test_public_route_needs_no_token_and_bare_results_become_json(http):
    response = http.get("/v1/public")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"status": "ok"}


def test_unknown_route_and_wrong_method_are_404(http):
    for method, path in [("POST", "/v1/tools/nope"), ("GET", "/v1/tools/echo"), ("POST", "/v1/public"),
                         ("GET", "/")]:
        response = http.request(method, path, headers=GOOD)
        assert response.status_code == 404, (method, path)
        assert response.json()["error"]["code"] == "not_found"


def test_handler_crash_is_500_without_leaking(http, caplog):
    with caplog.at_level("ERROR", logger="local_stack"):
        response = http.post("/v1/tools/crash", json={}, headers=GOOD)
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal", "message": "internal error"}}
    assert "secret internals" not in response.text
    assert any("secret internals" in (r.exc_text or "") for r in caplog.records)


def test_large_body_reaches_the_handler(http):
    payload = "x" * (70 * 1024)
    data = _echo(http, content=payload, headers={**GOOD, "content-type": "text/plain"})
    assert data["body"] == payload


def test_binary_body_is_base64(http):
    data = _echo(http, content=b"\xff\xfe\x00", headers=GOOD)
    assert data["event"]["isBase64Encoded"] is True


def test_concurrent_invocations_get_their_own_containers(http, stack):
    results = []

    def call():
        with httpx.Client(base_url=stack.url, timeout=10) as client:
            results.append(client.post("/v1/tools/slow", json={"sleep": 0.4}, headers=GOOD).json())

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    containers = {r["container"] for r in results}
    assert len(containers) == 2
    again = http.post("/v1/tools/slow", json={}, headers=GOOD).json()["container"]
    assert again in containers  # a warm container is reused
    fn = stack.template.functions["SlowFunction"]
    assert lambdas.container_count(fn.code_uri, fn.handler) == 2


def test_sweep_timer_fires_and_reaches_dynamodb(stack):
    client = boto3.client("dynamodb", endpoint_url=stack.dynamodb_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    deadline, count = time.monotonic() + 5, 0
    while time.monotonic() < deadline and count < 2:
        item = client.get_item(TableName="fixture-table",
                               Key={"PK": {"S": "SWEEP"}, "SK": {"S": "COUNT"}}).get("Item")
        count = int(item["n"]["N"]) if item else 0
        time.sleep(0.1)
    assert count >= 2


def test_local_json_records_the_stack(stack):
    state = json.loads((stack.state_dir / "local.json").read_text())
    assert state == {"url": stack.url, "dynamodbEndpoint": stack.dynamodb_endpoint,
                     "table": "fixture-table", "pid": os.getpid(), "store": "dynamodb-local",
                     "storePid": state["storePid"], "workers": 1}
    assert "DynamoDBLocal.jar" in Path(f"/proc/{state['storePid']}/cmdline").read_bytes().decode()


# --- pieces ----------------------------------------------------------------------------------

def test_events_shape_headers_cookies_and_query():
    event = events.http_event(
        "POST", "/p", route_key="POST /p", query="a=1&a=2&b=",
        headers=[("X-A", "1"), ("x-a", "2"), ("Cookie", "c1=v1; c2=v2")], body=b"{}",
        authorizer_context={})
    assert event["headers"] == {"x-a": "1,2"}
    assert event["cookies"] == ["c1=v1", "c2=v2"]
    assert event["queryStringParameters"] == {"a": "1,2", "b": ""}
    assert event["requestContext"]["authorizer"] == {"lambda": {}}
    public = events.http_event("GET", "/p", route_key="GET /p")
    assert "authorizer" not in public["requestContext"] and "queryStringParameters" not in public
    auth = events.authorizer_event("GET", "/p", route_key="GET /p", identity=["Bearer x"])
    assert auth["type"] == "REQUEST" and auth["identitySource"] == ["Bearer x"]
    assert "body" not in auth and "authorizer" not in auth["requestContext"]


def test_lambda_context_and_module_cache():
    ctx = lambdas.LambdaContext("Fn", timeout=2, memory_limit_in_mb=64)
    assert ctx.invoked_function_arn.endswith(":function:Fn") and ctx.memory_limit_in_mb == 64
    assert 0 < ctx.get_remaining_time_in_millis() <= 2000 and ctx.aws_request_id
    code_uri = str(FIXTURE / "functions")
    assert lambdas.load_handler(code_uri, "echo.plain") is lambdas.load_handler(code_uri, "echo.plain")
    with pytest.raises(lambdas.HandlerNotFound):
        lambdas.load_handler(code_uri, "missing.handler")
    with pytest.raises(lambdas.HandlerNotFound):
        lambdas.load_handler(code_uri, "echo.nothing")


def test_create_table_builds_the_template_schema(stack):
    # The stack's embedded store (mock_aws would patch botocore for the whole process,
    # including the running stack's sweep thread).
    client = boto3.client("dynamodb", endpoint_url=stack.dynamodb_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    create_table(client, ROOT_TEMPLATE, "relaynet-schema-test")
    table = client.describe_table(TableName="relaynet-schema-test")["Table"]
    assert table["KeySchema"] == [{"AttributeName": "PK", "KeyType": "HASH"},
                                  {"AttributeName": "SK", "KeyType": "RANGE"}]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"GSI1", "GSI2", "GSI3", "GSI4"}
    from relaynet.store.table import INDEX_KEYS

    for name, index in indexes.items():
        pk, sk = INDEX_KEYS.get(name, (f"{name}PK", f"{name}SK"))
        assert index["KeySchema"] == [{"AttributeName": pk, "KeyType": "HASH"},
                                      {"AttributeName": sk, "KeyType": "RANGE"}]
        assert index["Projection"]["ProjectionType"] == ("INCLUDE" if name == "GSI3" else "ALL")
    ttl = client.describe_time_to_live(TableName="relaynet-schema-test")["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "ttl" and ttl["TimeToLiveStatus"] == "ENABLED"
    create_table(client, ROOT_TEMPLATE, "relaynet-schema-test", exist_ok=True)
    with pytest.raises(client.exceptions.ResourceInUseException):
        create_table(client, ROOT_TEMPLATE, "relaynet-schema-test")


TOKENS = {"networks": {"demo": {"networkId": "net_1", "instances": {
    "planner": [{"instanceId": "inst_1", "token": "rn_inst_aaa"},
                {"instanceId": "inst_2", "token": "rn_inst_bbb"}]}}},
    "representatives": {"ops": "rn_rep_ccc"}}


def test_write_tokens_is_private(tmp_path):
    path = write_tokens(TOKENS, tmp_path / "sub" / "tokens.json")
    assert json.loads(path.read_text()) == TOKENS
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_mcp_config_text():
    text = mcp_config_text(TOKENS, "http://127.0.0.1:9")
    blocks = text.split("\n\n")
    assert len(blocks) == 4 and all(b.startswith("# planner #") for b in blocks)
    config = json.loads(blocks[2].split("\n", 1)[1])
    server = config["mcpServers"]["relaynet-planner-2"]
    assert server["args"] == ["mcp", "worker"]
    assert server["env"] == {"RELAYNET_URL": "http://127.0.0.1:9", "RELAYNET_TOKEN": "rn_inst_bbb"}
    # next to each MCP configuration, the Claude Code hooks block of the same instance
    assert "Claude Code hooks" in blocks[3].split("\n", 1)[0]
    hooks = json.loads(blocks[3].split("\n", 1)[1])
    assert hooks["env"] == {"RELAYNET_URL": "http://127.0.0.1:9", "RELAYNET_TOKEN": "rn_inst_bbb"}
    assert set(hooks["hooks"]) == {"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"}
    assert hooks["hooks"]["PreToolUse"][0]["matcher"] == "Edit|Write|MultiEdit|NotebookEdit"
    for entries in hooks["hooks"].values():
        (entry,) = entries
        (command,) = entry["hooks"]
        assert command["type"] == "command" and command["command"] in (server["command"] + " hook",
                                                                        server["command"] + " hook --edits claim")
    assert hooks["hooks"]["PreToolUse"][0]["hooks"][0]["command"].endswith(" hook --edits claim")


# --- the blocking entry point ------------------------------------------------------------------

def test_serve_applies_spec_prints_config_and_stops_on_sigterm(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("network: demo\n")
    script = textwrap.dedent(f"""
        import sys, types
        fake = types.ModuleType("relaynet.admin")
        fake.apply_spec = lambda text: (__import__("json").loads({json.dumps(json.dumps(TOKENS))})
                                        if text == "network: demo\\n" else None)
        fake.parse = lambda text, check_store=True: []  # serve validates the spec before the store starts
        sys.modules["relaynet.admin"] = fake
        from relaynet_local.server import serve
        serve(port=0, spec={str(spec)!r}, template={str(FIXTURE_TEMPLATE)!r}, sweep_interval=0,
              print_mcp_config=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Relaynet hub listening on "):
                break
        assert lines and lines[-1].startswith("Relaynet hub listening on "), proc.stderr.read()
        url = lines[-1].split()[-1]
        assert "relaynet-planner-1" in "".join(lines) and "rn_inst_bbb" in "".join(lines)
        tokens = tmp_path / ".relaynet" / "tokens.json"
        assert json.loads(tokens.read_text()) == TOKENS
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
        assert json.loads((tmp_path / ".relaynet" / "local.json").read_text())["url"] == url
        assert httpx.get(f"{url}/v1/public", timeout=5).json() == {"status": "ok"}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        stderr = proc.stderr.read()
        assert "GET /v1/public 200" in stderr
        assert not (tmp_path / ".relaynet" / "local.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_check_spec_judges_a_spec_as_the_running_stack_will_without_a_store(monkeypatch):
    """serve validates its spec before the store starts (LocalStack.check_spec): push URLs as the
    running stack judges them (http to a loopback host allowed, the real template having the
    webhook notifier), the environment left as it was."""
    from relaynet.errors import InvalidArgument

    monkeypatch.delenv("RELAYNET_PUSH_ALLOW_LOOPBACK", raising=False)
    spec = "network: demo\nagents:\n  - name: bob\n    push: {url: 'http://127.0.0.1:9/hook', token: " + "s" * 16 + "}\n"
    stack = LocalStack(port=0, template=ROOT_TEMPLATE, state_dir=None)
    stack.check_spec(spec)
    assert "RELAYNET_PUSH_ALLOW_LOOPBACK" not in os.environ and stack.dynamodb_endpoint is None
    with pytest.raises(InvalidArgument) as refused:
        stack.check_spec(spec.replace("http://127.0.0.1:9", "ftp://127.0.0.1:9"))
    assert refused.value.details["fields"][0]["field"] == "demo.agents[0].push.url"
    monkeypatch.setenv("RELAYNET_PUSH_ALLOW_LOOPBACK", "false")  # set by the operator: it wins, as in the stack
    with pytest.raises(InvalidArgument):
        stack.check_spec(spec)


def test_a_table_kept_from_an_older_template_gains_the_indexes_it_lacks(stack):
    """A restart on a data directory made by an older template keeps the items and adds the new
    global secondary indexes (DynamoDB Local keeps tables across restarts)."""
    from relaynet_local.template import table_request

    client = boto3.client("dynamodb", endpoint_url=stack.dynamodb_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    full = table_request(load_template(ROOT_TEMPLATE).table, "relaynet-old-schema")
    old = {**full, "GlobalSecondaryIndexes": full["GlobalSecondaryIndexes"][:1]}
    used = {k["AttributeName"] for k in old["KeySchema"] + old["GlobalSecondaryIndexes"][0]["KeySchema"]}
    old["AttributeDefinitions"] = [a for a in full["AttributeDefinitions"] if a["AttributeName"] in used]
    client.create_table(**old)
    gsi2 = full["GlobalSecondaryIndexes"][1]
    item = {"PK": {"S": "NET#x"}, "SK": {"S": "META"}, "kept": {"S": "yes"}}
    item.update({k["AttributeName"]: {"S": "v"} for k in gsi2["KeySchema"]})
    client.put_item(TableName="relaynet-old-schema", Item=item)
    create_table(client, ROOT_TEMPLATE, "relaynet-old-schema", exist_ok=True)
    table = client.describe_table(TableName="relaynet-old-schema")["Table"]
    assert {i["IndexName"] for i in table["GlobalSecondaryIndexes"]} == {i["IndexName"] for i in full["GlobalSecondaryIndexes"]}
    assert client.get_item(TableName="relaynet-old-schema", Key={"PK": item["PK"], "SK": item["SK"]})["Item"] == item
    hits = client.query(TableName="relaynet-old-schema", IndexName=gsi2["IndexName"],
                        KeyConditionExpression="#k = :v", ExpressionAttributeNames={"#k": gsi2["KeySchema"][0]["AttributeName"]},
                        ExpressionAttributeValues={":v": {"S": "v"}})["Items"]
    assert hits == [item]  # the new index was built from the items already there


# --- the authorizer's cache (relaynet_local.authorizer_cache) ---------------------------------

def test_the_authorizer_answer_is_cached_per_header_and_dropped_when_a_token_item_is_written(http, stack):
    def calls():
        return _echo(http, json={}, headers=GOOD)["authorizer"]["lambda"]["calls"]

    first = calls()
    assert calls() == first  # served from the cache: the authorizer did not run again
    store = boto3.client("dynamodb", endpoint_url=stack.dynamodb_endpoint, region_name="us-east-1",
                         aws_access_key_id="testing", aws_secret_access_key="testing")
    store.put_item(TableName="fixture-table", Item={"PK": {"S": "THING#1"}, "SK": {"S": "THING"}})
    assert calls() == first  # a write of any other item keeps it
    store.transact_write_items(TransactItems=[{"Update": {
        "TableName": "fixture-table", "Key": {"PK": {"S": "TOKEN#abc"}, "SK": {"S": "TOKEN"}},
        "UpdateExpression": "SET revoked = :y", "ExpressionAttributeValues": {":y": {"BOOL": True}}}}])
    second = calls()
    assert second != first  # a token item was written (a revocation): asked again
    assert calls() == second
    assert http.post("/v1/tools/echo", json={}, headers={"Authorization": "Bearer bad"}).status_code == 403
    assert http.post("/v1/tools/echo", json={}, headers={"Authorization": "Bearer boom"}).status_code == 500


def test_authorizer_cache_expiry_failures_and_a_write_while_asking():
    from relaynet_local.authorizer_cache import AuthorizerCache

    now = [100.0]
    cache = AuthorizerCache(10, clock=lambda: now[0], max_entries=2)
    asked = []

    def ask(answer):
        def run():
            asked.append(answer)
            return answer
        return run

    yes = {"isAuthorized": True, "context": {"kind": "instance"}}
    assert cache.answer("Bearer a", ask(yes)) == yes and cache.answer("Bearer a", ask(None)) == yes
    cached = cache.answer("Bearer a", ask(None))
    cached["context"]["kind"] = "changed by a handler"
    assert cache.answer("Bearer a", ask(None)) == yes  # each caller gets its own copy
    now[0] += 10.0
    assert cache.answer("Bearer a", ask({"isAuthorized": False})) == {"isAuthorized": False}  # expired
    assert len(asked) == 2

    def boom():
        raise RuntimeError("authorizer failed")
    with pytest.raises(RuntimeError):
        cache.answer("Bearer b", boom)
    assert cache.answer("Bearer b", ask(yes)) == yes  # a failure is not kept

    def revoked_meanwhile():
        cache.clear()  # a token item is written while the authorizer reads the old one
        return yes
    cache.answer("Bearer c", revoked_meanwhile)
    assert cache.answer("Bearer c", ask({"isAuthorized": False})) == {"isAuthorized": False}
    cache.answer("Bearer d", ask(yes))
    cache.answer("Bearer e", ask(yes))  # over max_entries: the oldest goes
    assert cache.answer("Bearer c", ask(yes)) == yes
    assert AuthorizerCache(0).answer("Bearer a", ask(yes)) == yes and AuthorizerCache(0).ttl == 0


@pytest.mark.parametrize("operation, params, touches", [
    ("PutItem", {"Item": {"PK": {"S": "TOKEN#h"}, "SK": {"S": "TOKEN"}}}, True),
    ("PutItem", {"Item": {"PK": "TOKEN#h", "SK": "TOKEN"}}, True),  # boto3's resource layer, before its transform
    ("PutItem", {"Item": {"PK": {"S": "NET#n"}, "SK": {"S": "TOKEN#h"}}}, False),
    ("UpdateItem", {"Key": {"PK": {"S": "TOKEN#h"}, "SK": {"S": "TOKEN"}}}, True),
    ("DeleteItem", {"Key": {"PK": {"S": "MSG#1"}, "SK": {"S": "x"}}}, False),
    ("TransactWriteItems", {"TransactItems": [{"Put": {"Item": {"PK": {"S": "NET#n"}}}},
                                              {"Update": {"Key": {"PK": {"S": "TOKEN#h"}}}}]}, True),
    ("TransactWriteItems", {"TransactItems": [{"ConditionCheck": {"Key": {"PK": {"S": "TOKEN#h"}}}}]}, False),
    ("BatchWriteItem", {"RequestItems": {"t": [{"DeleteRequest": {"Key": {"PK": {"S": "TOKEN#h"}}}}]}}, True),
    ("BatchWriteItem", {"RequestItems": {"t": [{"PutRequest": {"Item": {"PK": {"S": "X"}}}}]}}, False),
])
def test_which_writes_touch_a_token_item(operation, params, touches):
    from relaynet_local.authorizer_cache import touches_tokens

    assert touches_tokens(operation, params) is touches
