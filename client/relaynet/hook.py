"""``relaynet hook``: tell a Claude Code session that Relaynet mail is waiting, without polling.

Claude Code runs a *command hook* at points of its loop, writes the event as JSON on the hook's
stdin and reads the hook's stdout (Claude Code's hooks reference, code.claude.com/docs/en/hooks).
This command serves these events, with the input fields it reads and the output it writes
(``PreToolUse`` and ``SessionEnd``, claims at the edit, are relaynet.edit_hook's):

- ``UserPromptSubmit`` (input: ``hook_event_name``, ``prompt``, ...) and ``PostToolUse``
  (``hook_event_name``, ``tool_name``, ``tool_input``, ``tool_response``, ...): when undelivered
  mail waits, one line of context for the model, as
  ``{"hookSpecificOutput": {"hookEventName": <event>, "additionalContext": "<line>"}}`` on stdout
  with exit code 0.
- ``Stop`` (input: ``hook_event_name``, ``stop_hook_active``, ...): while a ``task_offer`` waits,
  ``{"decision": "block", "reason": "<what to do>"}``, which keeps the agent going with the reason
  as its next instruction. When ``stop_hook_active`` is true the agent is already continuing
  because of a Stop hook, and this hook stays silent, so it can never loop.

The line reads like ``Relaynet: 3 messages waiting, one a task_offer: call network_inbox.``

It makes one HTTP request, ``GET $RELAYNET_URL/v1/inbox/summary`` with ``$RELAYNET_TOKEN``
(docs/protocol.md 10.1: it delivers nothing), with a short timeout
(``RELAYNET_HOOK_TIMEOUT_SECONDS``, default 1.5). It is silent -- exit 0, nothing on stdout or
stderr -- when there is nothing to say, and also when it cannot say anything: the hub is
unreachable or slow, the token is refused, the variables are missing, or the input is not an
event it serves. A hook must never break the session it serves. Only the standard library is
imported, so the command starts fast (benchmarks/bench_hook.py prints its timing).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import IO, Any, Mapping

EVENTS = ("UserPromptSubmit", "PostToolUse", "Stop")
DEFAULT_TIMEOUT = 1.5  # seconds for the one request; Claude Code's own hook timeout is larger


def fetch_summary(url: str, token: str, timeout: float) -> dict[str, Any] | None:
    """``GET <url>/v1/inbox/summary`` with the bearer ``token``: the summary, or None on any
    failure (unreachable, timeout, non-200, not JSON)."""
    request = urllib.request.Request(f"{url.rstrip('/')}/v1/inbox/summary", method="GET",
                                     headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                                              "User-Agent": "relaynet-hook"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the hub's URL
            if response.status != 200:
                return None
            body = json.loads(response.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return body if isinstance(body, dict) else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def context_line(summary: Mapping[str, Any]) -> str | None:
    """The line for the model, or None when nothing waits.

    ``{"undelivered": 3, "byKind": {"ask": 2, "task_offer": 1}}`` ->
    ``"Relaynet: 3 messages waiting, one a task_offer: call network_inbox."``
    """
    total = int(summary.get("undelivered") or 0)
    if total <= 0:
        return None
    offers = int((summary.get("byKind") or {}).get("task_offer") or 0)
    waiting = _plural(total, "message") + " waiting" + ("" if summary.get("complete", True) else " (at least)")
    if offers == 1 and total == 1:
        waiting += ", a task_offer"
    elif offers == 1:
        waiting += ", one a task_offer"
    elif offers > 1:
        waiting += f", {offers} of them task_offers"
    return f"Relaynet: {waiting}: call network_inbox."


def respond(event: Mapping[str, Any], summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Claude Code's hook output for ``event`` given the inbox ``summary`` (None: silent)."""
    name = event.get("hook_event_name")
    if summary is None or name not in EVENTS:
        return None
    line = context_line(summary)
    if line is None:
        return None
    if name == "Stop":
        offers = int((summary.get("byKind") or {}).get("task_offer") or 0)
        if offers <= 0 or event.get("stop_hook_active"):
            return None
        return {"decision": "block",
                "reason": f"{line} A task is offered to you: read it with network_inbox, then accept it with "
                          "network_task_update (status accepted) before working on it, or let the offer expire "
                          "if you cannot take it."}
    return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": line}}


def run(stdin: IO[str], stdout: IO[str], environ: Mapping[str, str], edits: str = "claim") -> int:
    """The ``relaynet hook`` command: read the event, ask the hub, answer. Always 0.
    ``PreToolUse`` and ``SessionEnd`` are claims at the edit (relaynet.edit_hook, ``edits``
    ``claim`` or ``check``); the other events ask for the inbox summary once."""
    try:
        event = json.loads(stdin.read() or "null")
    except (ValueError, OSError):
        return 0
    if isinstance(event, dict) and event.get("hook_event_name") in ("PreToolUse", "SessionEnd"):
        from relaynet import edit_hook

        if event["hook_event_name"] == "SessionEnd":
            edit_hook.session_end(event, environ)
            return 0
        answer = edit_hook.pre_tool_use(event, environ, edits)
        if answer is not None:
            stdout.write(json.dumps(answer) + "\n")
            stdout.flush()
        return 0
    if not isinstance(event, dict) or event.get("hook_event_name") not in EVENTS:
        return 0
    if event.get("hook_event_name") == "Stop" and event.get("stop_hook_active"):
        return 0  # never ask the hub when the answer could only be silence
    url, token = environ.get("RELAYNET_URL"), environ.get("RELAYNET_TOKEN")
    if not url or not token:
        return 0
    try:
        timeout = float(environ.get("RELAYNET_HOOK_TIMEOUT_SECONDS") or DEFAULT_TIMEOUT)
    except ValueError:
        timeout = DEFAULT_TIMEOUT
    answer = respond(event, fetch_summary(url, token, timeout))
    if answer is not None:
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
    return 0


def settings_block(command: str, url: str, token: str) -> dict[str, Any]:
    """The ``.claude/settings.json`` content that runs ``<command> hook`` on its events (the edits
    in ``claim`` mode: relaynet.edit_hook),
    with ``RELAYNET_URL``/``RELAYNET_TOKEN`` in the settings' ``env`` (Claude Code sets them for
    the session's hooks and tools)."""
    from relaynet.edit_hook import MATCHER

    hook = {"type": "command", "command": f"{command} hook", "timeout": 5}
    edits = {"type": "command", "command": f"{command} hook --edits claim", "timeout": 5}
    return {
        "env": {"RELAYNET_URL": url, "RELAYNET_TOKEN": token},
        "hooks": {
            "UserPromptSubmit": [{"hooks": [dict(hook)]}],
            "PreToolUse": [{"matcher": MATCHER, "hooks": [edits]}],
            "PostToolUse": [{"matcher": "*", "hooks": [dict(hook)]}],
            "Stop": [{"hooks": [dict(hook)]}],
            "SessionEnd": [{"hooks": [dict(hook)]}],
        },
    }


def main(edits: str = "claim") -> int:
    """Entry point used by ``relaynet hook [--edits claim|check]``."""
    return run(sys.stdin, sys.stdout, os.environ, edits)
