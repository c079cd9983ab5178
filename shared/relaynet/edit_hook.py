"""Claims at the edit: ``relaynet hook`` on Claude Code's ``PreToolUse`` and ``SessionEnd``
(docs/protocol.md 10.2; issue 25).

``PreToolUse`` for the file-writing tools (:data:`EDIT_TOOLS`; input ``tool_name``,
``tool_input.file_path`` or ``tool_input.notebook_path``, ``cwd``, ``session_id``):

- The file becomes a claim path: relative to ``$RELAYNET_CLAIM_ROOT`` when set, else to the git
  top level of the event's ``cwd``. A file outside the root is not checked, and the session is
  told so once (``systemMessage``).
- ``claim`` mode (the default; ``relaynet hook --edits check`` for the other): ``network_claim``
  of exactly that path for the instance (``ttlSeconds`` ``$RELAYNET_EDIT_CLAIM_SECONDS``, 900; on
  the instance's task when it holds exactly one accepted, working or blocked task), which takes
  it or renews it, and the edit goes on through Claude Code's normal permission flow (the hook
  prints nothing). ``check`` mode asks ``POST /v1/claims/check`` only.
- When another instance holds an overlapping claim the tool call is denied
  (``hookSpecificOutput.permissionDecision: "deny"``) with a reason a model can act on: the
  holder (agent and instance), its task, the claim's scope and expiry, and what to do instead.
- When the hub cannot be asked (unset variables, unreachable, the whole check slower than
  ``$RELAYNET_HOOK_TIMEOUT_SECONDS``, 1.5, the token refused) the edit is allowed with one line of
  warning (``systemMessage``); ``$RELAYNET_GUARD=strict`` denies it instead, ``off`` skips it.

``SessionEnd``: the claims this hook took in the session are released, except those on a task
still in progress (accepted, working, blocked). The hook keeps the session's claims in a state
file (``$TMPDIR/relaynet-hook/<token hash>-<session_id>.json``, mode 0600). Only the standard
library is imported, so the hook starts fast.
"""

from __future__ import annotations

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

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
MATCHER = "|".join(EDIT_TOOLS)
DEFAULT_TIMEOUT = 1.5
DEFAULT_CLAIM_SECONDS = 900
HELD = ("accepted", "working", "blocked")


class Unavailable(Exception):
    """The hub could not be asked in time, or refused the token."""


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


# --------------------------------------------------------------------------- the session's state

def _state_path(token: str, session_id: str) -> Path:
    key = hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]
    safe = "".join(ch for ch in session_id if ch.isalnum() or ch in "-_")[:128] or "session"
    return Path(tempfile.gettempdir()) / "relaynet-hook" / f"{key}-{safe}.json"


def load_state(token: str, session_id: str) -> dict[str, Any]:
    """The session's state: ``{instanceId?, claims: {claimId: {scope, taskId}}, outsideWarned}``."""
    try:
        state = json.loads(_state_path(token, session_id).read_text())
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(token: str, session_id: str, state: dict[str, Any]) -> None:
    """Write the session's state (mode 0600; best effort: a hook never fails on it)."""
    path = _state_path(token, session_id)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(state, out)
        os.replace(tmp, path)
    except OSError:
        pass


# --------------------------------------------------------------------------- mapping a file to a claim path

def claim_path(file_path: str, cwd: str, environ: Mapping[str, str]) -> tuple[str | None, Path | None]:
    """(the file as a claim path, the root) or (None, root) when the file is outside the root, or
    (None, None) when there is no root (no ``RELAYNET_CLAIM_ROOT`` and ``cwd`` not in a git repository)."""
    if environ.get("RELAYNET_CLAIM_ROOT"):
        top = Path(environ["RELAYNET_CLAIM_ROOT"]).resolve()
    else:
        try:
            out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd or None, capture_output=True,
                                 text=True, timeout=2, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None, None
        top = Path(out).resolve()
    full = Path(file_path) if os.path.isabs(file_path) else Path(cwd or ".") / file_path
    try:
        return full.resolve().relative_to(top).as_posix(), top
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


def _check(hub: _Hub, path: str) -> list[dict[str, Any]]:
    status, answer = hub.post("/v1/claims/check", {"paths": [path]})
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
    try:
        if not url or not token:
            raise Unavailable("RELAYNET_URL and RELAYNET_TOKEN are not set")
        path, top = claim_path(file_path, str(event.get("cwd") or ""), environ)
        state = load_state(token, session)
        if path is None:
            if state.get("outsideWarned"):
                return None
            state["outsideWarned"] = True
            save_state(token, session, state)
            where = f"outside the claims' root {top}" if top else "not in a git repository (set RELAYNET_CLAIM_ROOT)"
            return {"systemMessage": f"Relaynet: {file_path} is {where}: edits there are not checked against claims."}
        try:
            budget = float(environ.get("RELAYNET_HOOK_TIMEOUT_SECONDS") or DEFAULT_TIMEOUT)
        except ValueError:
            budget = DEFAULT_TIMEOUT
        hub = _Hub(url, token, time.monotonic() + budget)
        if mode == "check":
            conflicts = _check(hub, path)
            return _deny(deny_reason(path, conflicts)) if conflicts else None
        try:
            ttl = int(environ.get("RELAYNET_EDIT_CLAIM_SECONDS") or DEFAULT_CLAIM_SECONDS)
        except ValueError:
            ttl = DEFAULT_CLAIM_SECONDS
        body: dict[str, Any] = {"scope": path, "ttlSeconds": max(1, min(ttl, 86400))}
        task = _current_task(hub, state)
        if task:
            body["taskId"] = task
        status, answer = hub.tool("network_claim", body)
        if status == 409 and (answer.get("error") or {}).get("details", {}).get("reason") == "claim_conflict":
            try:
                conflicts = _check(hub, path)  # the same holders, with their tasks
            except Unavailable:
                conflicts = []
            return _deny(deny_reason(path, conflicts or answer["error"]["details"]["conflicts"]))
        if status != 200:
            raise Unavailable(f"network_claim answered {status}: {(answer.get('error') or {}).get('message')}")
        state.setdefault("claims", {})[answer["claimId"]] = {"scope": path, "taskId": answer.get("taskId")}
        save_state(token, session, state)
        return None
    except Unavailable as exc:
        if guard == "strict":
            return _deny(f"Relaynet: the edit cannot be checked against claims ({exc}) and RELAYNET_GUARD=strict: "
                         "do not edit files until the hub answers.")
        return {"systemMessage": f"Relaynet: edit not checked against claims: {exc}."}


# --------------------------------------------------------------------------- SessionEnd

def session_end(event: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """Release the claims this hook took in the session, except those on a task still in
    progress (best effort within the hook's timeout; says nothing)."""
    url, token = environ.get("RELAYNET_URL"), environ.get("RELAYNET_TOKEN")
    session = str(event.get("session_id") or "")
    if not url or not token:
        return
    state = load_state(token, session)
    claims = state.get("claims") or {}
    if not claims:
        return
    hub = _Hub(url, token, time.monotonic() + 4 * DEFAULT_TIMEOUT)
    kept: dict[str, Any] = {}
    states: dict[str, str | None] = {}
    try:
        for claim_id, info in claims.items():
            task = info.get("taskId")
            if task:
                if task not in states:
                    status, got = hub.tool("network_task_get", {"taskId": task})
                    states[task] = got["task"]["state"] if status == 200 else None
                if states[task] in HELD:
                    kept[claim_id] = info
                    continue
            hub.tool("network_release", {"claimId": claim_id})
    except Unavailable:
        return  # the claims lapse at their TTL; the state is kept for a later SessionEnd
    state["claims"] = kept
    save_state(token, session, state)
