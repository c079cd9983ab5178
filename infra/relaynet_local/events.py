"""Build the events API Gateway (HTTP API, payload format 2.0) and EventBridge hand to Lambdas.

Rules followed, as AWS does them:

- Header names are lower-cased; repeated headers are joined with ``,``. The ``cookie`` header
  moves to ``cookies`` (a list). Repeated query parameters are joined with ``,`` in
  ``queryStringParameters``, which is absent when there is no query string.
- ``body`` is absent when the request has none; a body that is not UTF-8 is base64-encoded with
  ``isBase64Encoded: true``.
- An authorised route's event carries the authorizer's ``context`` under
  ``requestContext.authorizer.lambda``; the authorizer's own REQUEST event has no body.

The builders never raise on odd input; they only shape it.
"""

from __future__ import annotations

import base64
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable
from urllib.parse import parse_qsl

__all__ = ["http_event", "authorizer_event", "schedule_event", "API_ID", "ACCOUNT_ID", "REGION"]

API_ID = "local"
ACCOUNT_ID = "123456789012"
REGION = "us-east-1"


def _headers(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in pairs:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    return headers, cookies


def _query(raw: str) -> dict[str, str] | None:
    if not raw:
        return None
    params: dict[str, str] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True):
        params[key] = f"{params[key]},{value}" if key in params else value
    return params


def _request_context(method: str, path: str, route_key: str, headers: dict[str, str],
                     source_ip: str, request_id: str | None) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    host = headers.get("host", "localhost")
    return {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": host,
        "domainPrefix": host.split(".")[0],
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id or uuid.uuid4().hex,
        "routeKey": route_key,
        "stage": "$default",
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }


def _common(method: str, path: str, route_key: str, query: str,
            header_pairs: Iterable[tuple[str, str]], path_parameters: dict[str, str] | None,
            source_ip: str, request_id: str | None) -> dict[str, Any]:
    headers, cookies = _headers(header_pairs)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": _request_context(method, path, route_key, headers, source_ip, request_id),
    }
    if cookies:
        event["cookies"] = cookies
    params = _query(query)
    if params is not None:
        event["queryStringParameters"] = params
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    return event


def http_event(method: str, path: str, *, route_key: str, query: str = "",
               headers: Iterable[tuple[str, str]] = (), body: bytes | str | None = None,
               path_parameters: dict[str, str] | None = None,
               authorizer_context: dict[str, Any] | None = None,
               source_ip: str = "127.0.0.1", request_id: str | None = None) -> dict[str, Any]:
    """The payload-2.0 event of one request to ``route_key`` (``"POST /v1/tools/x"``).

    ``headers`` are ``(name, value)`` pairs as received. ``authorizer_context`` is ``None`` for
    a route without auth, else the authorizer's ``context`` (``{}`` when it gave none).
    """
    event = _common(method, path, route_key, query, headers, path_parameters, source_ip, request_id)
    event["isBase64Encoded"] = False
    if body:
        raw = body.encode() if isinstance(body, str) else bytes(body)
        try:
            event["body"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(raw).decode("ascii")
            event["isBase64Encoded"] = True
    if authorizer_context is not None:
        event["requestContext"]["authorizer"] = {"lambda": authorizer_context}
    return event


def authorizer_event(method: str, path: str, *, route_key: str, identity: list[str],
                     query: str = "", headers: Iterable[tuple[str, str]] = (),
                     path_parameters: dict[str, str] | None = None,
                     source_ip: str = "127.0.0.1", request_id: str | None = None) -> dict[str, Any]:
    """The REQUEST event (payload 2.0) a Lambda authorizer receives for one request;
    ``identity`` holds the identity source values (the ``Authorization`` header)."""
    event = _common(method, path, route_key, query, headers, path_parameters, source_ip, request_id)
    event["type"] = "REQUEST"
    event["routeArn"] = (f"arn:aws:execute-api:{REGION}:{ACCOUNT_ID}:{API_ID}/$default/"
                         f"{method}{path}")
    event["identitySource"] = list(identity)
    return event


def schedule_event(rule_name: str) -> dict[str, Any]:
    """The EventBridge ``Scheduled Event`` a ``Schedule`` rule named ``rule_name`` sends."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{rule_name}"],
        "detail": {},
    }
