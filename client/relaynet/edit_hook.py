"""Claims at the edit: ``relaynet hook`` on Claude Code's ``PreToolUse`` and ``SessionEnd``
(docs/protocol.md 10.2; issue 25).

``PreToolUse`` for the file-writing tools (:data:`EDIT_TOOLS`; input ``tool_name``,
``tool_input.file_path`` or ``tool_input.notebook_path``, ``cwd``, ``session_id``):

- The file becomes a claim path: relative to ``$RELAYNET_CLAIM_ROOT`` when set, else to the git
  top level of the repository holding the file (as its commit guard sees it). A file outside the
  root, or whose name holds a control character, is not checked, and the session is told so once
  (``systemMessage``).
- ``claim`` mode (the default; ``relaynet hook --edits check`` for the other): ``network_claim``
  of exactly that file (its glob characters literal: :func:`literal`), in the
  ``$RELAYNET_CLAIM_RESOURCE`` namespace when set, for the instance (``ttlSeconds`` ``$RELAYNET_EDIT_CLAIM_SECONDS``, 900; on
  the instance's task when it holds exactly one accepted, working or blocked task), which takes
  it or renews it, and the edit goes on through Claude Code's normal permission flow (the hook
  prints nothing). ``check`` mode asks ``POST /v1/claims/check`` only.
- When another instance holds an overlapping claim the tool call is denied
  (``hookSpecificOutput.permissionDecision: "deny"``) with a reason a model can act on: the
  holder (agent and instance), its task, the claim's scope and expiry, and what to do instead.
- When the hub cannot be asked (unset variables, unreachable, the whole check slower than
  ``$RELAYNET_HOOK_TIMEOUT_SECONDS``, 1.5, the token refused) the edit is allowed with one line of
  warning (``systemMessage``); ``$RELAYNET_GUARD=strict`` denies it instead, ``off`` skips it.

``SessionEnd``: each claim the hook took that no other session of the instance still uses is
released, except one whose task (as last claimed, by any session) is still accepted, working or
blocked. The hook keeps the instance's claims and the sessions using them in a state file
(``$TMPDIR/relaynet-hook/<token hash>.json``, mode 0600, under an exclusive lock). Only the
standard library and the client's own modules (relaynet.guard, the generated relaynet.client_tables)
are imported, so the hook starts fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping

from relaynet.client_tables import GLOB_CHARS
from relaynet.guard import Unavailable, has_control_character, unset

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
MATCHER = "|".join(EDIT_TOOLS)
DEFAULT_TIMEOUT = 1.5
DEFAULT_CLAIM_SECONDS = 900
SESSION_END_SECONDS = 4.0  # within the printed block's hook timeout (5 s)
HELD = ("accepted", "working", "blocked")


class _Hub:
    """The hub at ``url`` with ``token``, every request within one deadline (monotonic seconds)."""

    def __init__(self, url: str, token: str, deadline: float):
        self.url, self.token, self.deadline = url.rstrip("/"), token, deadline

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of ``POST <url><path>``; 4xx answers are returned, not raised.
        Raises :class:`Unavailable` when it cannot be asked, a 401/403 or a 5xx."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Unavailable("the hub did not answer in time")
        request = urllib.request.Request(self.url + path, method="POST", data=json.dumps(body).encode("utf-8"),
                                         headers={"Authorization": f"Bearer {self.token}", "User-Agent": "relaynet-hook",
                                                  "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=left) as response:  # noqa: S310 - the hub's URL
                return response.status, json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read().decode("utf-8"))
            except (ValueError, OSError):
                answer = {}
            if exc.code in (401, 403) or exc.code >= 500:
                code = (answer.get("error") or {}).get("code", "")
                raise Unavailable(f"the hub answered {exc.code} {code}".strip()) from None
            return exc.code, answer
        except (OSError, ValueError) as exc:
            raise Unavailable(f"the hub at {self.url} did not answer ({exc})") from None

    def tool(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return self.post(f"/v1/tools/{name}", body)


# --------------------------------------------------------------------------- the instance's state

def literal(path: str) -> str:
    """The scope that matches exactly the file ``path`` and nothing else: each glob character
    (:data:`relaynet.client_tables.GLOB_CHARS`, the hub's ``relaynet.globs.GLOB_CHARS`` as
    ``make generate`` copies it) as a one-character class (``g/[xy].py`` -> ``g/[[]xy].py``,
    ``*.md`` -> ``[*].md``). The client's copy of ``relaynet.globs.literal``, which it must not
    import (the client ships without the hub); tests/test_generate.py checks the two agree."""
    return "".join(f"[{ch}]" if ch in GLOB_CHARS else ch for ch in path)


def _state_path(token: str) -> Path:
    key = hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "relaynet-hook" / f"{key}.json"


@contextlib.contextmanager
def state(token: str):
    """The instance's state, read and written back under an exclusive lock (hooks of several
    sessions of one instance run at once): ``{instanceId?, claims: {claimId: {scope, taskId,
    sessions: [...]}}, warned: [session ids told about a file outside the root]}``. Best effort:
    a hook never fails on its state file."""
    path = _state_path(token)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield {}
        return
    with os.fdopen(fd, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            data = json.loads(f.read() or "{}")
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        yield data
        f.seek(0)
        f.truncate()
        json.dump(data, f)


# --------------------------------------------------------------------------- mapping a file to a claim path

def claim_path(file_path: str, cwd: str, environ: Mapping[str, str]) -> tuple[str | None, Path | None]:
    """(the file as a claim path, the root) or (None, root) when the file is outside the root, or
    (None, None) when there is no root. The root is ``RELAYNET_CLAIM_ROOT`` when set, else the git
    top level of the repository holding the file (found from its nearest existing directory,
    so a nested repository and a session started elsewhere map the file as its own repository's
    commit guard does)."""
    full = Path(file_path) if os.path.isabs(file_path) else Path(cwd or ".") / file_path
    full = full.resolve()
    if environ.get("RELAYNET_CLAIM_ROOT"):
        top = Path(environ["RELAYNET_CLAIM_ROOT"]).resolve()
    else:
        where = full.parent
        while not where.is_dir() and where != where.parent:
            where = where.parent
        try:
            out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=where, capture_output=True,
                                 text=True, timeout=2, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None, None
        top = Path(out).resolve()
    try:
        return full.relative_to(top).as_posix(), top
    except ValueError:
        return None, top


# --------------------------------------------------------------------------- PreToolUse

def _deny(reason: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def deny_reason(path: str, conflicts: list[dict[str, Any]]) -> str:
    """What the model is told when ``path`` is held by another instance: who, for what, until when, and what to do."""
    parts = []
    for c in conflicts:
        holder = c.get("holder") or {}
        task = f" for task {c['taskId']}" if c.get("taskId") else ""
        parts.append(f"{holder.get('agent')} (instance {holder.get('instanceId')}) holds the claim {c.get('scope')!r}"
                     f"{task} until {c.get('expiresAt')}")
    first = (conflicts[0].get("holder") or {}) if conflicts else {}
    return (f"Relaynet: {path} is claimed by another agent instance: {'; '.join(parts)}. Do not edit it now. "
            f"Ask the holder with network_ask (toInstance='{first.get('instanceId')}') to hand it over or make "
            "the change, or work on other files and come back after the claim expires.")


def _current_task(hub: _Hub, state: dict[str, Any]) -> str | None:
    """The instance's one accepted, working or blocked task, or None (none, or more than one)."""
    if not state.get("instanceId"):
        status, me = hub.tool("network_whoami", {})
        if status != 200:
            return None
        state["instanceId"] = me["instance"]["id"]
    status, listed = hub.tool("tasks", {"action": "list", "scope": "own", "state": "active", "limit": 100})
    if status != 200:
        return None
    mine = [t["id"] for t in listed.get("tasks", [])
            if t.get("assignee") == state["instanceId"] and t.get("state") in HELD]
    return mine[0] if len(mine) == 1 else None


def _check(hub: _Hub, path: str, resource: str | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"paths": [path], **({"resourceId": resource} if resource else {})}
    status, answer = hub.post("/v1/claims/check", body)
    if status != 200:
        raise Unavailable(f"the hub refused the path: {(answer.get('error') or {}).get('message')}")
    return answer["results"][0]["conflicts"]


def pre_tool_use(event: Mapping[str, Any], environ: Mapping[str, str], mode: str = "claim") -> dict[str, Any] | None:
    """Claude Code's output for a ``PreToolUse`` event (None: say nothing, the edit goes on)."""
    if event.get("tool_name") not in EDIT_TOOLS:
        return None
    guard = (environ.get("RELAYNET_GUARD") or "").strip().lower()
    if guard == "off":
        return None
    tool_input = event.get("tool_input") or {}
    file_path = tool_input.get("file_path") or tool_input.get("notebook_path")
    url, token = environ.get("RELAYNET_URL"), environ.get("RELAYNET_TOKEN")
    if not isinstance(file_path, str) or not file_path:
        return None
    session = str(event.get("session_id") or "")
    resource = environ.get("RELAYNET_CLAIM_RESOURCE") or None
    try:
        if not url or not token:
            raise Unavailable(unset(environ))
        path, top = claim_path(file_path, str(event.get("cwd") or ""), environ)
        if path is None or has_control_character(path):
            with state(token) as st:
                warned = st.setdefault("warned", [])
                if session in warned:
                    return None
                warned[:] = [*warned[-99:], session]
            where = ("a name with a control character" if path is not None else
                     f"outside the claims' root {top}" if top else
                     "not in a git repository (set RELAYNET_CLAIM_ROOT)")
            return {"systemMessage": f"Relaynet: {file_path} is {where}: edits there are not checked against claims."}
        try:
            budget = float(environ.get("RELAYNET_HOOK_TIMEOUT_SECONDS") or DEFAULT_TIMEOUT)
        except ValueError:
            budget = DEFAULT_TIMEOUT
        hub = _Hub(url, token, time.monotonic() + budget)
        if mode == "check":
            conflicts = _check(hub, path, resource)
            return _deny(deny_reason(path, conflicts)) if conflicts else None
        try:
            ttl = int(environ.get("RELAYNET_EDIT_CLAIM_SECONDS") or DEFAULT_CLAIM_SECONDS)
        except ValueError:
            ttl = DEFAULT_CLAIM_SECONDS
        # exactly this file: its glob characters are literal
        body: dict[str, Any] = {"scope": literal(path), "ttlSeconds": max(1, min(ttl, 86400))}
        if resource:
            body["resourceId"] = resource
        with state(token) as st:
            task = _current_task(hub, st)
        if task:
            body["taskId"] = task
        status, answer = hub.tool("network_claim", body)
        if status == 409 and (answer.get("error") or {}).get("details", {}).get("reason") == "claim_conflict":
            try:
                conflicts = _check(hub, path, resource)  # the same holders, with their tasks
            except Unavailable:
                conflicts = []
            return _deny(deny_reason(path, conflicts or answer["error"]["details"]["conflicts"]))
        if status != 200:
            raise Unavailable(f"network_claim answered {status}: {(answer.get('error') or {}).get('message')}")
        with state(token) as st:
            held = st.setdefault("claims", {}).setdefault(answer["claimId"], {"sessions": []})
            held.update(scope=answer["scope"], taskId=answer.get("taskId"))
            if session not in held["sessions"]:
                held["sessions"].append(session)
        return None
    except Unavailable as exc:
        if guard == "strict":
            return _deny(f"Relaynet: the edit cannot be checked against claims ({exc}) and RELAYNET_GUARD=strict: "
                         "do not edit files until the hub answers.")
        return {"systemMessage": f"Relaynet: edit not checked against claims: {exc}."}


# --------------------------------------------------------------------------- SessionEnd

def session_end(event: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """The session is no longer using the claims it took: each claim no other session of the
    instance still uses is released, unless the task it was last taken for (by any session) is
    still accepted, working or blocked. Best effort within the printed hook timeout; says nothing."""
    url, token = environ.get("RELAYNET_URL"), environ.get("RELAYNET_TOKEN")
    session = str(event.get("session_id") or "")
    if not url or not token:
        return
    hub = _Hub(url, token, time.monotonic() + SESSION_END_SECONDS)
    with state(token) as st:
        claims = st.get("claims") or {}
        states: dict[str, str | None] = {}
        for claim_id, info in list(claims.items()):
            sessions = [x for x in info.get("sessions") or [] if x != session]
            if sessions:
                info["sessions"] = sessions
                continue
            if session not in (info.get("sessions") or []):
                continue
            task = info.get("taskId")
            try:
                if task:
                    if task not in states:
                        status, got = hub.tool("network_task_get", {"taskId": task})
                        states[task] = got["task"]["state"] if status == 200 else None
                    if states[task] in HELD:
                        info["sessions"] = []  # kept for its task; the task's end releases it (PROTOCOL.md 4.8)
                        continue
                hub.tool("network_release", {"claimId": claim_id})
            except Unavailable:
                return  # the rest lapse at their TTL, or a later SessionEnd releases them
            del claims[claim_id]
