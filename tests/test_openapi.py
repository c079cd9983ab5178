"""docs/openapi.json (issues 8, 17): generated from the catalogue's request and response models
(committed as `make generate` writes it: tests/test_generate.py), the same set of tools as
template.yaml's routes and functions/'s handler files; every 200 typed; errors documented as the
protocol's envelope (PROTOCOL.md 2), never powertools' 422."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relaynet import catalogue
from relaynet.http import openapi
from relaynet_local.template import load_template
from tests.conftest import ROOT

COMMITTED = ROOT / "docs" / "openapi.json"
FUNCTIONS = ROOT / "functions"
#: Handler files that are not tools, and the routes they serve (None: no route).
NOT_TOOLS = {"authorizer": (), "sweep": (), "notifier": (), "push_retry": (), "a2a_bridge": (), "health": ("GET /v1/health",),
             "openapi": ("GET /v1/openapi.json",), "ui": ("GET /v1/ui", "GET /v1/ui/{asset}"),
             # the AG2 wire's functions serve the WebSocket API, not HTTP routes (docs/protocol.md 12)
             "ag2_connection": (), "ag2_frames": (), "ag2_keepalive": (), "ag2_notifier": (),
             # A2A's JSON-RPC binding and Agent Cards (docs/protocol.md 13): A2A's bodies, not tools
             "a2a_rpc": ("POST /a2a/{network}/{agent}",),
             "a2a_card": ("GET /a2a/{network}/{agent}/.well-known/agent-card.json", "GET /a2a/{network}"),
             "a2a_push_in": ("POST /a2a/{network}/push/{instance}/{task}",)}
ERROR_STATUSES = {"400", "401", "403", "404", "409", "413", "429", "500"}


@pytest.fixture(scope="module")
def doc():
    return openapi.document()


def operations(doc) -> dict[str, tuple[str, str, dict]]:
    """operationId -> (method, path, operation) of the tools and endpoints (not A2A's routes)."""
    return {op["operationId"]: (method.upper(), path, op)
            for path, item in doc["paths"].items() for method, op in item.items() if "a2a" not in op.get("tags", ())}


def test_the_a2a_routes_are_documented_with_their_methods_and_the_cards_are_public(doc):
    from relaynet.a2a import wire

    a2a = {op["operationId"]: (method.upper(), path, op) for path, item in doc["paths"].items()
           for method, op in item.items() if "a2a" in op.get("tags", ())}
    template = load_template(ROOT / "template.yaml")
    routes = {r.route_key for r in template.routes if r.path.startswith("/a2a/")}
    assert {f"{m} {p}" for m, p, _ in a2a.values()} == routes
    rpc = a2a["a2a_rpc"][2]
    assert rpc["requestBody"]["content"]["application/json"]["schema"]["properties"]["method"]["enum"] == \
        [*wire.SERVED, *wire.REFUSED]
    assert "security" not in rpc  # the bearer token, as everywhere
    assert a2a["a2a_card"][2]["security"] == [] and a2a["a2a_cards"][2]["security"] == []
    assert a2a["a2a_push_in"][2]["security"] == []  # the notification's own token proves it


def test_the_committed_document_is_the_generated_one(doc):
    assert COMMITTED.is_file(), "docs/openapi.json is missing: run `make openapi`"
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert committed == doc, "docs/openapi.json is stale: run `make openapi` and commit it"
    assert COMMITTED.read_text(encoding="utf-8") == openapi.render(), "run `make openapi` (formatting)"


def test_template_routes_handler_files_and_operations_are_the_same_tools(doc):
    template = load_template(ROOT / "template.yaml")
    routes = {r.route_key: r for r in template.routes}
    tool_routes = {key.removeprefix("POST /v1/tools/") for key in routes if key.startswith("POST /v1/tools/")}
    other_routes = {key for key in routes if not key.startswith("POST /v1/tools/")}
    files = {p.stem for p in FUNCTIONS.glob("*.py") if not p.name.startswith("_")}
    ops = operations(doc)

    endpoint_routes = {f"{e.method} {e.path}": name for name, e in catalogue.ENDPOINTS.items()}
    assert other_routes == {r for rs in NOT_TOOLS.values() for r in rs} | set(endpoint_routes), "routes that are not tools"
    for stem, served in NOT_TOOLS.items():
        assert stem in files, f"functions/{stem}.py is missing"
        for route in served:
            assert routes[route].handler == f"{stem}.handler"
    for route, name in endpoint_routes.items():
        assert routes[route].handler == f"{name}.handler", route
        assert routes[route].auth, f"{route} must go through the authorizer"
        method, _, path = route.partition(" ")
        assert ops.pop(name)[:2] == (method, path), name
    tool_files = files - set(NOT_TOOLS) - set(catalogue.ENDPOINTS)
    named = {"template routes": tool_routes, "handler files": tool_files, "OpenAPI operations": set(ops),
             "catalogue tools": set(catalogue.TOOLS)}
    everything = set().union(*named.values())
    gaps = {f"{name} lack": sorted(everything - found) for name, found in named.items() if everything - found}
    assert not gaps, gaps
    for name, (method, path, _op) in ops.items():
        assert (method, path) == ("POST", f"/v1/tools/{name}"), name
        assert routes[f"POST {path}"].handler == f"{name}.handler"


def _tool_app(name: str):
    """The ToolApp functions/<name>.py serves (its ``handler`` is that app's bound method)."""
    from relaynet_local.lambdas import load_handler

    return load_handler(str(FUNCTIONS), f"{name}.handler").__self__


def test_each_handler_serves_its_catalogue_entry_with_the_model_its_operation_documents(doc):
    """The handler files are generated from the catalogue (tests/test_generate.py) and ToolApp.route
    refuses any body model but the entry's; this checks the loaded handlers really serve their
    entry, and that the document's request body is that model."""
    ops = operations(doc)
    for name, tool in catalogue.TOOLS.items():
        app = _tool_app(name)
        assert app.tool is tool and app.actions == frozenset(tool.actions), name
        body = ops[name][2]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{tool.model.__name__}"}, name
        assert doc["components"]["schemas"][tool.model.__name__]["additionalProperties"] is False, name


def test_every_200_is_typed_by_its_catalogue_response_model(doc):
    ops = operations(doc)
    for name, entry in {**catalogue.TOOLS, **catalogue.ENDPOINTS}.items():
        schema = ops[name][2]["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{entry.response}"}, name
        component = doc["components"]["schemas"][entry.response]
        assert component["type"] == "object" and component["properties"], name


def test_route_refuses_a_model_other_than_the_catalogues():
    from typing import Annotated

    from aws_lambda_powertools.event_handler.openapi.params import Body

    from relaynet.http.api import ToolApp
    from relaynet.models.worker import AskRequest

    def network_reply(request):
        return {}

    # set explicitly: this module's annotations are strings (from __future__ import annotations)
    network_reply.__annotations__ = {"request": Annotated[AskRequest, Body()], "return": dict}
    with pytest.raises(TypeError, match="ReplyRequest"):
        ToolApp("network_reply", actions=()).route(network_reply)


def test_each_endpoint_handler_takes_the_body_its_operation_documents(doc):
    ops = operations(doc)
    for name, endpoint in catalogue.ENDPOINTS.items():
        assert _tool_app(name).tool is endpoint, name
        op = ops[name][2]
        if endpoint.model is None:
            assert "requestBody" not in op, name
        else:
            body = op["requestBody"]["content"]["application/json"]["schema"]
            assert body == {"$ref": f"#/components/schemas/{endpoint.model.__name__}"}, name


def test_an_endpoint_without_a_body_refuses_a_route_that_takes_one():
    from typing import Annotated

    from aws_lambda_powertools.event_handler.openapi.params import Body

    from relaynet.http.api import ToolApp
    from relaynet.models.worker import AskRequest

    def inbox_summary(request):
        return {}

    inbox_summary.__annotations__ = {"request": Annotated[AskRequest, Body()], "return": dict}
    with pytest.raises(TypeError, match="no body"):
        ToolApp("inbox_summary", actions=()).route(inbox_summary)


def test_errors_are_the_protocol_envelope_not_powertools_422(doc):
    text = json.dumps(doc)
    assert '"422"' not in text and "HTTPValidationError" not in text
    for name, (_m, _p, op) in operations(doc).items():
        assert set(op["responses"]) == {"200"} | ERROR_STATUSES, name
        for status in ERROR_STATUSES:
            ref = op["responses"][status]["$ref"]
            response = doc["components"]["responses"][ref.rsplit("/", 1)[1]]
            assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
            assert response["content"]["application/json"]["example"]["error"]["code"] in response["description"]
    envelope = doc["components"]["schemas"]["Error"]
    assert envelope["required"] == ["error"]
    assert set(envelope["properties"]["error"]["properties"]) == {"code", "message", "details"}
    assert "Retry-After" in doc["components"]["responses"]["rate_limited"]["headers"]


def test_the_error_codes_are_the_ones_the_handlers_answer(doc):
    from relaynet import errors

    codes = {cls.code: str(cls.status) for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.RelaynetError)}
    for status, (code, _when) in openapi.ERRORS.items():
        assert codes.get(code) == status, (code, status)


def test_idempotency_key_is_documented_exactly_where_the_catalogue_declares_it(doc):
    for name, (_m, _p, op) in operations(doc).items():
        entry = catalogue.TOOLS.get(name) or catalogue.ENDPOINTS[name]
        headers = [p["name"] for p in op.get("parameters", []) if p["in"] == "header"]
        assert (headers == ["Idempotency-Key"]) == entry.idempotent, name


def test_every_operation_requires_the_bearer_token(doc):
    assert doc["security"] == [{"bearer": []}]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert all("security" not in op for _m, _p, op in operations(doc).values())


def test_the_document_is_valid_openapi(doc):
    validator = pytest.importorskip("openapi_spec_validator", reason="openapi-spec-validator (moto[server]) missing")
    validator.validate(doc)


def test_the_openapi_function_serves_the_committed_document():
    from relaynet_local.events import http_event
    from relaynet_local.lambdas import load_handler

    resp = load_handler(str(FUNCTIONS), "openapi.handler")(
        http_event("GET", "/v1/openapi.json", route_key="GET /v1/openapi.json"), None)
    assert resp["statusCode"] == 200
    assert json.loads(resp["body"]) == json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_make_openapi_check_mode(tmp_path: Path):
    stale = tmp_path / "openapi.json"
    stale.write_text("{}\n")
    assert openapi.main([str(stale), "--check"]) == 1
    assert openapi.main([str(stale)]) == 0
    assert openapi.main([str(stale), "--check"]) == 0
    assert stale.read_text(encoding="utf-8") == openapi.render()


def test_every_tools_answers_in_the_scenarios_are_its_response_model(table, monkeypatch):
    """benchmarks/requests_per_tool.py's scenarios call every tool and endpoint (tests/test_policies.py
    holds them to it); each 200 they get is the entry's response model, declaring every field."""
    from relaynet import admin
    from tests.api.conftest import check_result
    from tests.test_policies import _bench

    bench = _bench()
    real, answered = bench.call, set()

    def checked(tool, body, token, key=None, query=""):
        status, out = real(tool, body, token, key, query)
        if status == 200:
            check_result(tool, out)
            answered.add(tool)
        return status, out

    monkeypatch.setattr(bench, "call", checked)
    tokens = admin.apply_spec((ROOT / "examples" / "demo-network.yaml").read_text())
    for step in bench.scenario(tokens):
        step.run()
    assert answered >= set(catalogue.TOOLS) | set(catalogue.ENDPOINTS), sorted(
        set(catalogue.TOOLS) | set(catalogue.ENDPOINTS) - answered)
