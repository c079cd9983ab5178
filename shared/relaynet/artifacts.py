"""Artifacts: what agents produced, by URI (PROTOCOL.md 4.11)."""

from __future__ import annotations

import re
from typing import Any

from relaynet import clock, ids
from relaynet.errors import InvalidArgument, NotFound
from relaynet.identity import Principal
from relaynet.models.worker import PublishArtifactRequest
from relaynet.store import tasks as task_store

_SCHEMES = ("https", "http", "s3", "git", "file")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def check_uri(uri: str) -> str:
    """An absolute URI of an allowed scheme (``https``, ``http``, ``s3``, ``git``, ``file``) with a
    location, or a relative path; no whitespace or control characters anywhere (PROTOCOL.md 4.11).
    Raises InvalidArgument naming ``uri``."""
    value = uri.strip()
    if not value:
        raise InvalidArgument.field("uri", "must be an absolute URI or a relative path")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidArgument.field("uri", "must not contain spaces or control characters (percent-encode them)")
    match = _SCHEME.match(value)
    if match and not re.match(r"^[A-Za-z]:[\\/]", value):
        scheme = match.group(1).lower()
        if scheme not in _SCHEMES:
            raise InvalidArgument.field("uri", f"scheme {scheme!r} is not one of {', '.join(_SCHEMES)}")
        rest = value[len(scheme) + 1:]
        if scheme == "file":
            if not rest.startswith("/"):
                raise InvalidArgument.field("uri", "a file URI is file:///absolute/path")
        elif not rest.startswith("//") or len(rest.strip("/")) == 0:
            raise InvalidArgument.field("uri", f"a {scheme} URI needs a location: {scheme}://host/...")
    return value


def publish(principal: Principal, req: PublishArtifactRequest) -> dict[str, Any]:
    """network_publish_artifact (PROTOCOL.md 4.11): ``{artifactId, uri, label, type, taskId, ref}``.

    Raises InvalidArgument (bad uri), NotFound (unknown taskId).
    """
    uri = check_uri(req.uri)
    net = principal.network_id
    art_id = ids.new_id("art")
    doc = {"artifactId": art_id, "uri": uri, "label": req.label or uri[:200], "type": req.type, "taskId": req.taskId,
           "ref": f"relaynet://{net}/artifacts/{art_id}", "publisher": principal.actor, "createdAt": clock.now_iso()}
    if not task_store.publish_artifact(net, doc):
        raise NotFound(f"no task {req.taskId!r} in this network")
    return {key: doc[key] for key in ("artifactId", "uri", "label", "type", "taskId", "ref")}
