"""Call the Lambda handlers as API Gateway would: the authorizer first, then the tool's handler
with a payload-2.0 event carrying the authorizer's context."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relaynet_local.events import authorizer_event, http_event
from relaynet_local.lambdas import LambdaContext, load_handler
from tests.conftest import ROOT

FUNCTIONS = str(ROOT / "functions")


def call(tool: str, body: Any = None, token: str | None = None, headers: dict[str, str] | None = None,
         raw: str | None = None, query: str = "") -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, JSON body, headers) of ``POST /v1/tools/<tool>``, or of an endpoint's
    ``method path`` when ``tool`` names one (relaynet.catalogue.ENDPOINTS); ``query`` is the raw
    query string (``timeout=5``)."""
    from relaynet import catalogue

    endpoint = catalogue.ENDPOINTS.get(tool)
    method, path = (endpoint.method, endpoint.path) if endpoint else ("POST", f"/v1/tools/{tool}")
    route = f"{method} {path}"
    given = {k.lower(): v for k, v in (headers or {}).items()}
    hdrs = [("content-type", given.pop("content-type", "application/json")), *given.items()]
    if token is not None:
        hdrs.append(("authorization", f"Bearer {token}"))
        auth = load_handler(FUNCTIONS, "authorizer.handler")(
            authorizer_event(method, path, route_key=route, identity=[f"Bearer {token}"], headers=hdrs), None)
        assert auth["isAuthorized"] is True
        context = auth["context"]
    else:
        context = {}
    payload = raw if raw is not None else (json.dumps(body) if body is not None else None)
    event = http_event(method, path, route_key=route, query=query, headers=hdrs, body=payload,
                       authorizer_context=context)
    resp = load_handler(FUNCTIONS, f"{tool}.handler")(event, LambdaContext(tool, 29.0, 512))
    status, answer = resp["statusCode"], json.loads(resp["body"])
    if status == 200:
        check_result(tool, answer)
    return status, answer, {k.lower(): v for k, v in (resp.get("headers") or {}).items()}


def undeclared(value: Any, path: str = "") -> list[str]:
    """Fields of a validated result (and the objects inside it) that its model does not declare."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        found = [f"{path}.{name}".lstrip(".") for name in (value.model_extra or {})]
        for name in type(value).model_fields:
            found += undeclared(getattr(value, name), f"{path}.{name}")
        return found
    if isinstance(value, list):
        return [f for i, item in enumerate(value) for f in undeclared(item, f"{path}[{i}]")]
    return []


def check_result(tool: str, answer: dict[str, Any]) -> None:
    """Every 200 the API tests see is its catalogue response model, exactly: the model's types
    hold and it declares every field (so docs/openapi.json types what the hub really answers)."""
    from relaynet import catalogue

    entry = catalogue.TOOLS.get(tool) or catalogue.ENDPOINTS[tool]
    result = entry.response_model.model_validate(answer)
    extra = undeclared(result)
    assert not extra, f"{tool} answered fields {entry.response} does not declare: {extra}"


@pytest.fixture
def api():
    return call
