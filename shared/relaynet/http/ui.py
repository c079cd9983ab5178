"""The operator page (issue 15): ``GET /v1/ui`` and its static files ``GET /v1/ui/{asset}``.

The page is plain files shipped inside the package (``relaynet/ui/``: index.html, app.js,
app.css, icon.svg; no build step, nothing vendored). It is public like ``/v1/health`` because it
holds no data: the script asks for a representative token, keeps it in ``sessionStorage`` and
makes every data call an ordinary ``POST /v1/tools/control_*`` with the Bearer header, so the
page can see and do exactly what its token's grants allow (PROTOCOL.md 6) and the server has
nothing new to secure.

Every answer carries a strict Content-Security-Policy (:data:`CSP`: scripts and styles only from
this origin, no inline script, ``connect-src 'self'``, no framing, no form posts, no base
rewriting), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
``Cache-Control: no-cache`` with an ``ETag`` (a browser revalidates, and a deploy is seen at once).
An asset name that is not one of :data:`ASSETS` is 404 with the protocol's error envelope;
names are looked up in that table, never joined to a path.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

#: Files the page is made of: name in the URL -> Content-Type. ``index.html`` is served at /v1/ui.
ASSETS: dict[str, str] = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
PAGE = "index.html"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


@lru_cache(maxsize=None)
def _file(name: str) -> tuple[bytes, str]:
    """(content, ETag) of ``relaynet/ui/<name>``; read once per container."""
    data = resources.files("relaynet").joinpath("ui", name).read_bytes()
    return data, '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


def _header(event: dict[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name:
            return value
    return None


def respond(event: dict[str, Any]) -> dict[str, Any]:
    """The payload-2.0 answer to ``GET /v1/ui`` (no ``asset`` path parameter) or
    ``GET /v1/ui/{asset}``: 200 with the file, 304 when ``If-None-Match`` names its ETag, 404
    ``not_found`` for any other asset name."""
    asset = (event.get("pathParameters") or {}).get("asset")
    if asset is None:
        name, content_type = PAGE, "text/html; charset=utf-8"
    elif asset in ASSETS:
        name, content_type = asset, ASSETS[asset]
    else:
        body = {"error": {"code": "not_found", "message": f"no asset {asset[:80]!r} (the page's files: "
                                                          f"{', '.join(sorted(ASSETS))})"}}
        return {"statusCode": 404, "headers": {**SECURITY_HEADERS, "Content-Type": "application/json"},
                "body": json.dumps(body)}
    data, etag = _file(name)
    headers = {**SECURITY_HEADERS, "Content-Type": content_type, "ETag": etag}
    if etag in re.split(r"[,\s]+", (_header(event, "if-none-match") or "").replace("W/", "")):
        return {"statusCode": 304, "headers": headers, "body": ""}
    return {"statusCode": 200, "headers": headers, "body": data.decode("utf-8")}
