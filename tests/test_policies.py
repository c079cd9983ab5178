"""Least privilege (issue 8): every function's IAM policy names exactly the DynamoDB actions its
handler file declares (``DYNAMODB_ACTIONS``), and relaynet.store.table refuses any other action
while that handler runs.

- The declaration is a tool's or endpoint's ``actions`` in shared/relaynet/catalogue.py (its
  generated handler passes them to ToolApp), or a literal tuple in a hand-written functions/<file>.py
  (table.declares(DYNAMODB_ACTIONS, ...)); the runtime uses that same declaration.
- template.yaml: each function's policy is one statement allowing ``dynamodb:<action>`` for
  exactly those actions, on the table and its indexes; no declaration, no policy.
- Under-declared: the store refuses the request (UndeclaredAction, logged; the handler answers
  500), so every test through a handler catches it. Shown below by narrowing a declaration.
- Over-declared: the scenarios of benchmarks/requests_per_tool.py (the demo story and the
  variants that reach every access path) run under the real declarations, and each declared
  action must be used by them, apart from the presence refresh (UpdateItem, at most once a
  minute per instance), the idempotency utility's actions for tools taking Idempotency-Key, and
  the failure-path actions listed with their reasons in FAILURE_PATHS.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import sys
from typing import Any

import pytest

from relaynet.store import table as t
from relaynet_local.template import load_yaml
from tests.conftest import ROOT

FUNCTIONS = ROOT / "functions"
TEMPLATE = ROOT / "template.yaml"
PRESENCE = {"UpdateItem"}  # relaynet.identity.touch, for instance tokens (worker and plugin surfaces)
#: Declared actions only a failure path needs, which a scenario cannot reach without breaking the
#: table: each with the reason. Everything else a handler declares must be used by the scenarios.
_GONE = ("forgets a connection (its bindings and delivery markers) whose postToConnection answered Gone "
         "(relaynet.ag2.ops.flush)")
FAILURE_PATHS: dict[str, dict[str, str]] = {
    "network_inbox": {"PutItem": "puts taken mailbox entries back when their thread copies cannot be "
                                 "read (relaynet.messaging._restore)"},
    "ag2_frames": {"BatchWriteItem": _GONE},
    "ag2_notifier": {"GetItem": _GONE, "DeleteItem": _GONE, "Query": _GONE, "BatchWriteItem": _GONE},
    "ag2_keepalive": {"GetItem": _GONE, "DeleteItem": _GONE, "BatchWriteItem": _GONE},
}


def handler_stems() -> list[str]:
    return sorted(p.stem for p in FUNCTIONS.glob("*.py") if not p.name.startswith("_"))


def entry(stem: str):
    """The catalogue entry functions/<stem>.py is generated from (None: a hand-written function)."""
    from relaynet import catalogue

    return catalogue.TOOLS.get(stem) or catalogue.ENDPOINTS.get(stem)


def declared(stem: str) -> tuple[str, ...]:
    """The DynamoDB actions of functions/<stem>.py: its catalogue entry's, or for a hand-written
    function (authorizer, sweep, ...) its literal ``DYNAMODB_ACTIONS`` (AssertionError if missing)."""
    if entry(stem) is not None:
        return tuple(entry(stem).actions)
    tree = ast.parse((FUNCTIONS / f"{stem}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == "DYNAMODB_ACTIONS"
                                                for x in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                pytest.fail(f"functions/{stem}.py: DYNAMODB_ACTIONS must be a literal tuple of strings")
            assert isinstance(value, tuple) and all(isinstance(a, str) for a in value), stem
            return value
    pytest.fail(f"functions/{stem}.py declares no DYNAMODB_ACTIONS (use () when it never touches the table)")


def uses_idempotency(stem: str) -> bool:
    """Whether the function accepts an Idempotency-Key (its catalogue entry says so)."""
    return entry(stem) is not None and entry(stem).idempotent


def load_module(stem: str) -> Any:
    name = f"_policy_check_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FUNCTIONS / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def runtime_declaration(stem: str) -> frozenset[str]:
    """What the handler enforces when it runs (empty: it runs without a declaration)."""
    module = load_module(stem)
    tool = getattr(module, "tool", None)
    if tool is not None and hasattr(tool, "actions"):
        return tool.actions
    return frozenset(getattr(module.handler, "dynamodb_actions", ()))


def template_functions() -> dict[str, dict[str, Any]]:
    """handler file stem -> the function's resource in template.yaml."""
    resources = load_yaml(TEMPLATE)["Resources"]
    return {r["Properties"]["Handler"].rsplit(".", 1)[0]: r
            for r in resources.values() if r.get("Type") == "AWS::Serverless::Function"}


def table_logical_id() -> str:
    tables = [lid for lid, r in load_yaml(TEMPLATE)["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"]
    assert len(tables) == 1
    return tables[0]


# --------------------------------------------------------------------------------------------
# Declarations <-> runtime <-> template


@pytest.mark.parametrize("stem", handler_stems())
def test_every_handler_declares_valid_actions_and_enforces_that_declaration(stem):
    actions = declared(stem)
    assert len(set(actions)) == len(actions), f"{stem}: an action is declared twice"
    assert set(actions) <= t.ITEM_ACTIONS, f"{stem}: unknown actions {sorted(set(actions) - t.ITEM_ACTIONS)}"
    enforced = runtime_declaration(stem)
    if actions:
        assert enforced == frozenset(actions), (
            f"functions/{stem}.py declares {sorted(actions)} but its handler enforces {sorted(enforced)}: "
            "pass DYNAMODB_ACTIONS to ToolApp(..., actions=) or table.declares()")
    else:
        assert not enforced, stem


@pytest.mark.parametrize("stem", handler_stems())
def test_each_function_policy_names_exactly_its_declared_actions_on_the_table_and_indexes(stem):
    functions = template_functions()
    assert stem in functions, f"functions/{stem}.py has no function in template.yaml"
    props = functions[stem]["Properties"]
    actions = declared(stem)
    policies = props.get("Policies") or []
    if not actions:
        assert not policies, f"{stem} declares no DynamoDB actions, so its function needs no policy"
        return
    push = {"Ref": "PushAtWritePolicy"}
    assert (push in policies) == pushes_at_write(stem), (
        f"{stem}: a function that commits Puts (PutItem or TransactWriteItems declared), other than the stream "
        "functions, carries PushAtWritePolicy (relaynet.push_at_write); no other function does")
    policies = [p for p in policies if p != push]
    assert len(policies) == 1 and set(policies[0]) == {"Statement"}, (
        f"{stem}: the policy must be one inline statement (no SAM policy templates such as "
        "DynamoDBCrudPolicy, which grant more than the declaration)")
    statement, *others = policies[0]["Statement"]
    for other in others:  # the AG2 wire functions also post to WebSocket connections, and nothing else
        assert other == {"Effect": "Allow", "Action": ["execute-api:ManageConnections"], "Resource": {
            "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${Ag2Api}/ag2/POST/@connections/*"}
        }, stem
        assert stem in ("ag2_frames", "ag2_notifier", "ag2_keepalive"), stem
    table_id = table_logical_id()
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == [f"dynamodb:{a}" for a in actions], (
        f"{stem}: template.yaml allows {statement['Action']}, functions/{stem}.py declares {list(actions)} "
        "(same actions, same order)")
    assert statement["Resource"] == [{"Fn::GetAtt": [table_id, "Arn"]},
                                     {"Fn::Sub": f"${{{table_id}.Arn}}/index/*"}], stem


def pushes_at_write(stem: str) -> bool:
    """Whether functions/<stem>.py's writes are pushed at the write in AWS: it declares an action
    that commits Puts and is not itself a stream function (relaynet.push_at_write)."""
    from relaynet.stream_targets import SOURCES

    stream_functions = {lid for lid in SOURCES}
    logical = "".join(part.capitalize() for part in stem.split("_")) + "Function"
    return bool({"PutItem", "TransactWriteItems"} & set(declared(stem))) and logical not in stream_functions


def test_the_push_at_write_policy_invokes_exactly_the_targets_aliases_and_stream_functions_name_none():
    """In AWS a writer invokes the two notifiers' aliases (the Globals variable names them, the
    local stack's Invoke API serves the same ones) and nothing else; a stream function names no
    targets, so none refers to its own alias."""
    from relaynet.stream_targets import SOURCES
    from relaynet_local.lambda_api import target_ids
    from relaynet_local.template import load_template

    doc = load_yaml(TEMPLATE)
    targets = ["NotifierFunction", "Ag2NotifierFunction"]
    assert target_ids(load_template(TEMPLATE)) == targets
    policy = doc["Resources"]["PushAtWritePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    aliases = [{"Ref": f"{lid}.Alias"} for lid in targets]
    assert policy == [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": aliases}]
    variable = doc["Globals"]["Function"]["Environment"]["Variables"]["RELAYNET_PUSH_AT_WRITE_TARGETS"]
    assert variable == {"Fn::Join": [",", [{"Fn::Join": ["=", [lid, a]]} for lid, a in zip(targets, aliases)]]}
    for lid in SOURCES:
        assert doc["Resources"][lid]["Properties"]["Environment"]["Variables"]["RELAYNET_PUSH_AT_WRITE_TARGETS"] == ""


def test_no_function_gets_dynamodb_access_any_other_way():
    for stem, resource in template_functions().items():
        text = repr(resource["Properties"].get("Policies") or [])
        for forbidden in ("DynamoDBCrudPolicy", "DynamoDBReadPolicy", "DynamoDBWritePolicy", "dynamodb:*",
                          "AmazonDynamoDB"):
            assert forbidden not in text, (stem, forbidden)


@pytest.mark.parametrize("stem", [s for s in handler_stems() if uses_idempotency(s)])
def test_tools_taking_an_idempotency_key_declare_the_idempotency_utility_actions(stem):
    missing = t.IDEMPOTENCY_ACTIONS - set(declared(stem))
    assert not missing, f"{stem} calls tool.once (Idempotency-Key) but does not declare {sorted(missing)}"


# --------------------------------------------------------------------------------------------
# The store's runtime check


def test_the_store_refuses_an_undeclared_action_before_sending_it(table):
    t.put({"PK": "A", "SK": "B", "v": 1})
    with t.declared({"GetItem"}, "network_example"):
        assert t.get("A", "B")["v"] == 1
        with pytest.raises(t.UndeclaredAction) as err:
            t.put({"PK": "A", "SK": "B", "v": 2})
        with pytest.raises(t.UndeclaredAction):
            t.query("A")
    message = str(err.value)
    assert "network_example" in message and "dynamodb:PutItem" in message
    assert "functions/network_example.py" in message and "template.yaml" in message
    assert t.get("A", "B")["v"] == 1  # nothing was written
    t.put({"PK": "A", "SK": "B", "v": 3})  # outside any declaration: unrestricted (admin, domain tests)


def test_a_transaction_needs_the_action_of_each_of_its_items(table):
    t.put({"PK": "A", "SK": "B", "v": 1})
    actions = [t.tx_put({"PK": "A", "SK": "C"}), t.tx_check("A", "B", "attribute_exists(PK)")]
    with t.declared({"PutItem"}, "x"), pytest.raises(t.UndeclaredAction, match="dynamodb:ConditionCheckItem"):
        t.transact(actions)
    with t.declared({"PutItem", "ConditionCheckItem"}, "x"):
        t.transact(actions)
    assert t.required_actions("TransactWriteItems", {"TransactItems": [
        {"Put": {"TableName": "a"}}, {"Update": {"TableName": "a"}}, {"Delete": {"TableName": "a"}},
        {"ConditionCheck": {"TableName": "a"}}]}) == (
        {"PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}, {"a"})


def test_the_store_refuses_another_table(table):
    with t.declared({"GetItem"}, "x"), pytest.raises(t.UndeclaredAction, match="other-table"):
        t.client().get_item(TableName="other-table", Key=t.key("A", "B"))


def test_a_declaration_names_only_item_actions():
    with pytest.raises(ValueError, match="CreateTable"):
        t.check_actions({"GetItem", "CreateTable"})
    with pytest.raises(ValueError):
        with t.declared({"dynamodb:GetItem"}, "x"):
            pass


def test_declarations_nest_and_are_restored(table):
    assert t.current_declaration() is None
    with t.declared({"GetItem"}, "outer"):
        with t.declared({"Query"}, "inner"):
            assert t.current_declaration().owner == "inner"
        assert t.current_declaration().owner == "outer"
    assert t.current_declaration() is None


def test_an_under_declared_handler_answers_500_and_logs_what_is_missing(demo, caplog, monkeypatch):
    from tests.api.conftest import call

    module = load_module("network_discover")
    tool = module.tool
    monkeypatch.setattr(tool, "actions", tool.actions - {"Query"})
    from relaynet_local.events import http_event

    from relaynet.identity import authorize

    principal = authorize(demo.token("planner0"))
    event = http_event("POST", "/v1/tools/network_discover", route_key="POST /v1/tools/network_discover",
                       body="{}", authorizer_context=principal.context())
    with caplog.at_level(logging.ERROR):
        resp = module.handler(event, None)
    assert resp["statusCode"] == 500
    assert '"internal"' in resp["body"] and "Query" not in resp["body"]  # no internals leak
    assert "network_discover called DynamoDB Query, which needs dynamodb:Query" in caplog.text
    assert call("network_discover", {}, demo.token("planner0"))[0] == 200  # the real declaration is enough


def test_a_tool_taking_an_idempotency_key_must_declare_its_actions(demo, monkeypatch):
    module = load_module("network_ask")
    monkeypatch.setattr(module.tool, "actions", module.tool.actions - {"DeleteItem"})
    from relaynet_local.events import http_event

    from relaynet.identity import authorize

    principal = authorize(demo.token("planner0"))
    event = http_event("POST", "/v1/tools/network_ask", route_key="POST /v1/tools/network_ask",
                       body='{"toAgent": "reviewer", "body": "hi"}', authorizer_context=principal.context())
    assert module.handler(event, None)["statusCode"] == 500  # even without a key: found by any test


# --------------------------------------------------------------------------------------------
# Every declared action is needed: the scenarios under the real declarations


def _bench() -> Any:
    name = "_bench_requests_per_tool"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "requests_per_tool.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_scenarios_run_under_the_declarations_and_use_every_declared_action(table, monkeypatch):
    # Every function is its own container in AWS, so its first call reads what another function's
    # container has cached here: the per-container caches are off (the product's setting, 0).
    monkeypatch.setenv("RELAYNET_CACHE_SECONDS", "0")
    from relaynet.config import settings

    settings.cache_clear()
    bench = _bench()
    from relaynet import admin

    tokens = admin.apply_spec((ROOT / "examples" / "demo-network.yaml").read_text())
    meter = bench.Meter(t.client(), __import__("boto3").client("dynamodb"))
    results = bench.measure(bench.scenario(tokens), meter)  # a 500 (UndeclaredAction) fails a step
    assert results
    problems = []
    for stem in handler_stems():
        actions = set(declared(stem))
        if not actions:
            continue
        if stem not in meter.seen_actions:
            problems.append(f"{stem}: no step of benchmarks/requests_per_tool.py calls it; add one (it also "
                            "gives the tool its row in the README cost table)")
            continue
        needed = set(meter.seen_actions[stem])
        tool = entry(stem)  # a tool or an endpoint: any instance token's call refreshes presence
        if tool is not None and tool.surface != "control":
            needed |= PRESENCE
        if uses_idempotency(stem):
            needed |= t.IDEMPOTENCY_ACTIONS
        needed |= set(FAILURE_PATHS.get(stem, {})) & actions
        if actions - needed:
            problems.append(f"{stem} declares {sorted(actions - needed)} but no scenario uses them: remove them "
                            "from DYNAMODB_ACTIONS and its policy, or add the step that needs them")
        if needed - actions:  # unreachable: the store would have refused them
            problems.append(f"{stem} used {sorted(needed - actions)} without declaring them")
    assert not problems, "\n".join(problems)
