"""Two tool containers resolving at once in one process (the local stack) never see each other's
request: powertools keeps the event it resolves on its class, relaynet's resolver on itself."""

from __future__ import annotations

import json

from relaynet.http.api import make_resolver


def _event(path: str, body: dict) -> dict:
    return {"version": "2.0", "routeKey": f"POST {path}", "rawPath": path, "rawQueryString": "",
            "headers": {"content-type": "application/json"}, "body": json.dumps(body), "isBase64Encoded": False,
            "requestContext": {"http": {"method": "POST", "path": path}, "stage": "$default"}}


def test_a_resolver_keeps_reading_its_own_event_while_another_resolves():
    first, second = make_resolver(), make_resolver()
    seen = {}

    @first.post("/v1/tools/a")
    def a() -> dict:
        second.resolve(_event("/v1/tools/b", {"scope": "src/**"}), None)  # another container, meanwhile
        seen["a"] = first.current_event.json_body
        return {}

    @second.post("/v1/tools/b")
    def b() -> dict:
        seen["b"] = second.current_event.json_body
        return {}

    response = first.resolve(_event("/v1/tools/a", {}), None)
    assert response["statusCode"] == 200, response
    assert seen == {"a": {}, "b": {"scope": "src/**"}}
