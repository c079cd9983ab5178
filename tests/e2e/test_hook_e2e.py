"""`relaynet hook` as Claude Code runs it (docs/protocol.md 10.2): a subprocess reading the
documented hook input JSON on stdin, answering in Claude Code's hook output format, against
`relaynet serve`. Its speed is measured by benchmarks/bench_hook.py, not here."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from tests.e2e.conftest import RELAYNET, free_port, start_hub, stop_hub


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = start_hub(tmp_path_factory.mktemp("hook"))
    yield h
    stop_hub(h)


def event(name: str, **fields) -> dict:
    """Claude Code's common hook input fields plus the event's own (its hooks reference)."""
    return {"session_id": "abc123", "transcript_path": "/tmp/transcript.jsonl", "cwd": "/work/project",
            "permission_mode": "default", "hook_event_name": name, **fields}


PROMPT = event("UserPromptSubmit", prompt="carry on")
POST_TOOL = event("PostToolUse", tool_name="Bash", tool_input={"command": "ls"},
                  tool_response={"stdout": "a\nb", "stderr": ""}, tool_use_id="toolu_01")
STOP = event("Stop", stop_hook_active=False)


def run_hook(hub, who: str | None, payload, url: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "RELAYNET_URL": url or hub.url}
    if who:
        agent, _, n = who.partition(":")
        env["RELAYNET_TOKEN"] = hub.token(agent, int(n)) if n else who
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run([RELAYNET, "hook"], input=raw, capture_output=True, text=True, env=env, timeout=20)


def tool(hub, name: str, body: dict, token: str) -> dict:
    r = httpx.post(f"{hub.url}/v1/tools/{name}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def silent(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_the_hook_is_silent_with_an_empty_inbox(hub):
    for payload in (PROMPT, POST_TOOL, STOP):
        assert silent(run_hook(hub, "reviewer:0", payload))


def test_the_hook_adds_one_line_of_context_and_keeps_the_agent_going_on_an_offer(hub):
    planner, coder0 = hub.token("planner"), hub.token("coder", 0)
    tool(hub, "network_ask", {"toAgent": "coder", "body": "which port does the API use?"}, planner)
    tool(hub, "network_ask", {"toAgent": "coder", "body": "and the health path?"}, planner)
    tool(hub, "network_delegate", {"toInstance": hub.instance("coder", 0), "objective": "Add GET /health"}, planner)
    line = "Relaynet: 3 messages waiting, one a task_offer: call network_inbox."

    for payload in (PROMPT, POST_TOOL):
        proc = run_hook(hub, "coder:0", payload)
        assert proc.returncode == 0 and proc.stderr == ""
        assert json.loads(proc.stdout) == {"hookSpecificOutput": {
            "hookEventName": payload["hook_event_name"], "additionalContext": line}}

    proc = run_hook(hub, "coder:0", STOP)
    answer = json.loads(proc.stdout)
    assert proc.returncode == 0 and set(answer) == {"decision", "reason"}
    assert answer["decision"] == "block" and answer["reason"].startswith(line)
    assert "network_task_update" in answer["reason"]
    # already continuing because of a Stop hook: never block again (no loop)
    assert silent(run_hook(hub, "coder:0", {**STOP, "stop_hook_active": True}))

    # the hook delivered nothing: network_inbox hands out all three, and then the hook is quiet
    got = tool(hub, "network_inbox", {}, coder0)["messages"]
    assert sorted(m["kind"] for m in got) == ["ask", "ask", "task_offer"]
    for payload in (PROMPT, POST_TOOL, STOP):
        assert silent(run_hook(hub, "coder:0", payload))


def test_on_stop_mail_without_an_offer_does_not_keep_the_agent_going(hub):
    tool(hub, "network_ask", {"toAgent": "reviewer", "body": "please look at PR 7"}, hub.token("planner"))
    proc = run_hook(hub, "reviewer:0", PROMPT)
    assert json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] == (
        "Relaynet: 1 message waiting: call network_inbox.")
    assert silent(run_hook(hub, "reviewer:0", STOP))
    tool(hub, "network_inbox", {}, hub.token("reviewer"))


def test_the_hook_is_silent_when_it_cannot_say_anything(hub):
    tool(hub, "network_ask", {"toAgent": "planner", "body": "ping"}, hub.token("reviewer"))
    closed = f"http://127.0.0.1:{free_port()}"
    assert silent(run_hook(hub, "planner:0", PROMPT, url=closed))            # hub unreachable
    assert silent(run_hook(hub, "rn_inst_" + "x" * 43, PROMPT))              # token refused (401)
    assert silent(run_hook(hub, None, PROMPT))                                # no RELAYNET_TOKEN
    assert silent(run_hook(hub, "planner:0", "not json"))                     # not an event
    assert silent(run_hook(hub, "planner:0", event("PreToolUse", tool_name="Bash")))  # an event it does not serve
    assert json.loads(run_hook(hub, "planner:0", PROMPT).stdout)  # and with all that right, it speaks
