"""Resource keys (PROTOCOL.md 3): git remotes normalise to ``host/org/repo``.

``git@github.com:Acme/api.git``, ``https://user@github.com/Acme/api`` and ``github.com/Acme/api``
all become ``github.com/Acme/api``: the host is lower-cased, scheme, user, port and ``.git`` are
stripped, the path keeps its case. Local filesystem paths are rejected.
"""

from __future__ import annotations

import re

from relaynet.errors import InvalidArgument

_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>(?!//)[^\s]+)$")
_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?:[^@/\s]+@)?(?P<host>[A-Za-z0-9.-]+)(?::\d+)?(?P<path>/[^\s]*)?$")
_PLAIN = re.compile(r"^(?P<host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?::\d+)?(?P<path>/[^\s]*)?$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~-]+$")


def normalise(raw: str, field: str = "resource") -> str:
    """Canonical ``host/path`` key of ``raw``; raises InvalidArgument (400) naming ``field``.

    Raises for empty keys, local paths (``/x``, ``./x``, ``~/x``, ``C:\\x``, ``file://``), and
    keys whose host has no dot (``localhost/x``) or whose path has empty or ``..`` segments.
    """
    value = (raw or "").strip()
    if not value:
        raise InvalidArgument.field(field, "must not be empty")
    if value.startswith(("/", "./", "../", "~", "file:")) or re.match(r"^[A-Za-z]:[\\/]", value) or "\\" in value:
        raise InvalidArgument.field(field, f"{raw!r} is a local filesystem path; use a remote such as github.com/org/repo")
    match = _URL.match(value)
    if match is None:
        match = _SCP.match(value) if "://" not in value else None
        if match is None or "." not in match.group("host"):
            match = _PLAIN.match(value)
    if match is None or "." not in match.group("host"):
        raise InvalidArgument.field(field, f"{raw!r} is not a resource key such as github.com/org/repo")
    host = match.group("host").lower()
    path = (match.group("path") or "").strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    segments = [s for s in path.split("/")] if path else []
    for seg in segments:
        if not seg or seg in (".", "..") or not _SEGMENT.match(seg):
            raise InvalidArgument.field(field, f"{raw!r} has an invalid path segment {seg!r}")
    return "/".join([host, *segments])
