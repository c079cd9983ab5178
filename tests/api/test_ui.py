"""GET /v1/ui and GET /v1/ui/{asset} through the real handler (issue 15): the page and its files
with a strict Content-Security-Policy, nothing inline for that policy to have to allow, and 404 for
any other asset name. The page itself runs in tests/e2e/test_ui_browser.py."""

from __future__ import annotations

import json
import re

import pytest

from relaynet.http import ui
from relaynet_local.events import http_event
from relaynet_local.lambdas import LambdaContext, load_handler
from tests.conftest import ROOT

FUNCTIONS = str(ROOT / "functions")


def get(asset: str | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    path, route = ("/v1/ui", "GET /v1/ui") if asset is None else (f"/v1/ui/{asset}", "GET /v1/ui/{asset}")
    event = http_event("GET", path, route_key=route, headers=list((headers or {}).items()),
                       path_parameters=None if asset is None else {"asset": asset})
    resp = load_handler(FUNCTIONS, "ui.handler")(event, LambdaContext("ui", 5.0, 512))
    return resp["statusCode"], {k.lower(): v for k, v in resp["headers"].items()}, resp["body"]


def test_the_page_is_html_with_the_strict_policy_and_no_caching_surprises():
    status, headers, body = get()
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    csp = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    assert csp == {"default-src": "'none'", "script-src": "'self'", "style-src": "'self'", "connect-src": "'self'",
                   "img-src": "'self' data:", "base-uri": "'none'", "form-action": "'none'", "frame-ancestors": "'none'"}
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-cache" and headers["etag"].startswith('"')
    assert "<title>Relaynet" in body


def test_the_page_has_nothing_inline_that_the_policy_would_block():
    _, _, html = get()
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all('src="ui/' in attrs and not inner.strip() for attrs, inner in scripts)
    assert "<style" not in html and not re.search(r"\sstyle=", html)
    assert not re.search(r"\son[a-z]+=", html), "inline event handlers need 'unsafe-inline'"
    assert not re.search(r"(href|src)=\"(https?:)?//", html), "everything comes from this origin"
    assert 'href="ui/app.css"' in html  # relative: the page works under any API stage prefix


@pytest.mark.parametrize(("asset", "content_type"), sorted(ui.ASSETS.items()))
def test_each_asset_is_served_with_its_type_and_the_same_headers(asset, content_type):
    status, headers, body = get(asset)
    assert status == 200 and headers["content-type"] == content_type and body
    assert headers["content-security-policy"] == ui.CSP and headers["x-content-type-options"] == "nosniff"
    page = get()[2]
    assert f"ui/{asset}" in page, f"{asset} is served but the page never uses it"


def test_a_cached_copy_is_revalidated_by_etag():
    _, headers, _ = get("app.js")
    status, again, body = get("app.js", {"If-None-Match": headers["etag"]})
    assert (status, body, again["etag"]) == (304, "", headers["etag"])
    assert get("app.js", {"If-None-Match": f'W/"stale",{headers["etag"]}'})[0] == 304  # a list, weak or not
    assert get("app.js", {"If-None-Match": '"stale"'})[0] == 200
    assert get(None, {"If-None-Match": headers["etag"]})[0] == 200  # another file, another tag


@pytest.mark.parametrize("asset", ["nope.js", "..%2Fcontrol.py", "index.html", "__init__.py", "APP.JS"])
def test_any_other_name_is_404_in_the_error_envelope(asset):
    status, headers, body = get(asset)
    assert status == 404 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "not_found"
    assert headers["content-security-policy"] == ui.CSP


def test_the_script_keeps_the_token_out_of_urls_and_markup():
    """What the browser test cannot see from outside: the script never builds a URL or markup
    from data (no innerHTML, no query strings), and keeps the token in sessionStorage only."""
    js = get("app.js")[2]
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js
    assert "localStorage" not in js and "document.cookie" not in js
    assert "sessionStorage.setItem(TOKEN_KEY" in js
    assert not re.search(r"[?&](token|access_token)=", js)
