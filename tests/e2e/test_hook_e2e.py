"""`relaynet hook` as Claude Code runs it (docs/protocol.md 10.2): a subprocess reading the
documented hook input JSON on stdin, answering in Claude Code's hook output format, against
`relaynet serve`. Its speed is measured by benchmarks/bench_hook.py, not here."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from tests.e2e.conftest import RELAYNET, free_port, start_hub, stop_hub, tool


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


# --------------------------------------------------------------------------- claims at the edit (issue 25)

@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "src").mkdir()
    return tmp_path


def edit(repo, file: str, tool_name: str = "Edit", session: str = "s-1") -> dict:
    key = "notebook_path" if tool_name == "NotebookEdit" else "file_path"
    return {**event("PreToolUse", tool_name=tool_name, tool_input={key: str(repo / file), "old_string": "a",
                                                                   "new_string": "b"}, tool_use_id="toolu_02"),
            "cwd": str(repo), "session_id": session}


def run_edit_hook(hub, who: str, payload: dict, *flags: str, url: str | None = None, **env) -> subprocess.CompletedProcess:
    agent, _, n = who.partition(":")
    full = {"PATH": "/usr/bin:/bin", "RELAYNET_URL": url or hub.url, "RELAYNET_TOKEN": hub.token(agent, int(n)), **env}
    return subprocess.run([RELAYNET, "hook", *flags], input=json.dumps(payload), capture_output=True, text=True,
                          env=full, timeout=20)


def holders(hub, path: str, who: str = "planner") -> list[dict]:
    r = httpx.post(f"{hub.url}/v1/claims/check", json={"paths": [path]}, headers={"Authorization": f"Bearer {hub.token(who)}"})
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["conflicts"]


def test_an_edit_takes_the_file_and_an_edit_of_a_held_file_is_denied_naming_the_holder(hub, repo):
    for tool_name in ("Edit", "Write", "MultiEdit", "NotebookEdit"):
        first = run_edit_hook(hub, "coder:0", edit(repo, f"src/{tool_name}.py", tool_name, session="edit-1"))
        assert silent(first), first  # the edit goes on through Claude Code's own permission flow
    (held,) = holders(hub, "src/Edit.py")
    assert held["holder"]["instanceId"] == hub.instance("coder", 0) and held["scope"] == "src/Edit.py"
    again = run_edit_hook(hub, "coder:0", edit(repo, "src/Edit.py", session="edit-1"))
    (renewed,) = holders(hub, "src/Edit.py")
    assert silent(again) and renewed["claimId"] == held["claimId"]  # renewed, not a second
    assert renewed["expiresAt"] >= held["expiresAt"]
    denied = run_edit_hook(hub, "coder:1", edit(repo, "src/Edit.py", "Write", session="edit-2"))
    out = json.loads(denied.stdout)["hookSpecificOutput"]
    assert denied.returncode == 0 and out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    reason = out["permissionDecisionReason"]
    assert f"coder (instance {hub.instance('coder', 0)})" in reason and "'src/Edit.py'" in reason
    assert renewed["expiresAt"] in reason and "network_ask" in reason
    assert silent(run_edit_hook(hub, "coder:1", edit(repo, "src/free.py", session="edit-2")))
    assert silent(run_edit_hook(hub, "coder:1", {**edit(repo, "src/Edit.py"), "tool_name": "Bash"}))  # not an edit


def test_check_mode_only_checks(hub, repo):
    assert silent(run_edit_hook(hub, "coder:0", edit(repo, "src/checked.py", session="chk-0")))
    denied = run_edit_hook(hub, "coder:1", edit(repo, "src/checked.py", session="chk-1"), "--edits", "check")
    assert json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert silent(run_edit_hook(hub, "coder:1", edit(repo, "src/unclaimed.py", session="chk-1"), "--edits", "check"))
    assert holders(hub, "src/unclaimed.py") == []


def test_an_edit_claim_rides_on_the_one_task_in_progress_and_outlives_the_session_with_it(hub, repo):
    planner, coder0 = hub.token("planner"), hub.token("coder", 0)
    task = tool(hub, "network_delegate", {"objective": "edit things", "toInstance": hub.instance("coder", 0)}, planner)
    tool(hub, "network_task_update", {"taskId": task["taskId"], "status": "accepted"}, coder0)
    assert silent(run_edit_hook(hub, "coder:0", edit(repo, "src/tasked.py", session="task-0")))
    tool(hub, "network_task_update", {"taskId": task["taskId"], "status": "working"}, coder0)
    assert silent(run_edit_hook(hub, "coder:0", edit(repo, "src/loose.py", session="task-0"), RELAYNET_CLAIM_ROOT=str(repo)))
    (held,) = holders(hub, "src/tasked.py")
    assert held["taskId"] == task["taskId"]
    reason = json.loads(run_edit_hook(hub, "coder:1", edit(repo, "src/tasked.py", session="task-1")).stdout)
    assert f"for task {task['taskId']}" in reason["hookSpecificOutput"]["permissionDecisionReason"]
    # the session ends: both claims were taken while the task was in progress, so both are kept
    end = {**event("SessionEnd", reason="exit"), "session_id": "task-0"}
    assert silent(run_edit_hook(hub, "coder:0", end))
    assert len(holders(hub, "src/tasked.py")) == 1 and len(holders(hub, "src/loose.py")) == 1
    tool(hub, "network_task_update", {"taskId": task["taskId"], "status": "completed", "reason": "done"}, coder0)
    assert holders(hub, "src/tasked.py") == []  # a terminal task releases its claims (PROTOCOL.md 4.8)


def test_session_end_releases_the_claims_the_hook_took(hub, repo):
    assert silent(run_edit_hook(hub, "reviewer:0", edit(repo, "src/review.py", session="end-1")))
    assert len(holders(hub, "src/review.py")) == 1
    assert silent(run_edit_hook(hub, "reviewer:0", {**event("SessionEnd", reason="exit"), "session_id": "end-1"}))
    assert holders(hub, "src/review.py") == []


def test_a_hub_that_cannot_be_asked_allows_with_a_warning_and_strict_denies(hub, repo):
    down = "http://127.0.0.1:9"
    allowed = run_edit_hook(hub, "coder:1", edit(repo, "src/x.py", session="down"), url=down)
    assert allowed.returncode == 0 and "not checked" in json.loads(allowed.stdout)["systemMessage"]
    strict = run_edit_hook(hub, "coder:1", edit(repo, "src/x.py", session="down"), url=down, RELAYNET_GUARD="strict")
    assert json.loads(strict.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert silent(run_edit_hook(hub, "coder:1", edit(repo, "src/x.py", session="down"), url=down, RELAYNET_GUARD="off"))


def test_a_file_outside_the_root_is_not_checked_and_says_so_once(hub, repo, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere")
    payload = {**edit(repo, "src/a.py", session="outside"), "tool_input": {"file_path": str(outside / "notes.txt")}}
    first = run_edit_hook(hub, "coder:1", payload)
    assert "is not in a git repository" in json.loads(first.stdout)["systemMessage"]
    assert silent(run_edit_hook(hub, "coder:1", payload))  # once per session
    rooted = run_edit_hook(hub, "coder:1", {**payload, "session_id": "outside-2"}, RELAYNET_CLAIM_ROOT=str(repo))
    assert "outside the claims' root" in json.loads(rooted.stdout)["systemMessage"]


def test_an_edited_file_whose_name_spells_a_glob_is_claimed_as_that_file_only(hub, repo):
    assert silent(run_edit_hook(hub, "coder:0", edit(repo, "src/[xy].py", "Write", session="glob-0")))
    assert silent(run_edit_hook(hub, "coder:0", edit(repo, "src/*.md", "Write", session="glob-0")))
    assert silent(run_edit_hook(hub, "coder:1", edit(repo, "src/x.py", session="glob-1")))  # not what [xy] spells
    assert silent(run_edit_hook(hub, "coder:1", edit(repo, "src/README.md", session="glob-1")))
    denied = run_edit_hook(hub, "coder:1", edit(repo, "src/[xy].py", session="glob-1"))
    assert json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert [c["holder"]["instanceId"] for c in holders(hub, "src/[xy].py")] == [hub.instance("coder", 0)]  # the commit guard's check


def test_a_claim_two_sessions_use_is_released_when_the_last_one_ends(hub, repo):
    for session in ("both-1", "both-2"):
        assert silent(run_edit_hook(hub, "reviewer:0", edit(repo, "src/shared.py", session=session)))
    assert silent(run_edit_hook(hub, "reviewer:0", {**event("SessionEnd", reason="exit"), "session_id": "both-1"}))
    assert len(holders(hub, "src/shared.py")) == 1  # both-2 still edits it
    assert silent(run_edit_hook(hub, "reviewer:0", {**event("SessionEnd", reason="exit"), "session_id": "both-2"}))
    assert holders(hub, "src/shared.py") == []


def test_the_edit_claim_is_in_the_resource_namespace_the_guard_checks(hub, repo):
    ns = {"RELAYNET_CLAIM_RESOURCE": "github.com/acme/api"}
    assert silent(run_edit_hook(hub, "coder:0", edit(repo, "src/ns.py", session="ns-0"), **ns))
    assert holders(hub, "src/ns.py") == []  # not in the namespace without a resource
    r = httpx.post(f"{hub.url}/v1/claims/check", json={"paths": ["src/ns.py"], "resourceId": "github.com/acme/api"},
                   headers={"Authorization": f"Bearer {hub.token('planner')}"})
    assert r.json()["conflicting"] == 1
    denied = run_edit_hook(hub, "coder:1", edit(repo, "src/ns.py", session="ns-1"), "--edits", "check", **ns)
    assert json.loads(denied.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_root_is_the_repository_holding_the_file_whatever_the_sessions_cwd(hub, repo, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("not-a-repo")
    payload = {**edit(repo, "src/far.py", session="far-0"), "cwd": str(elsewhere)}
    assert silent(run_edit_hook(hub, "coder:0", payload))
    assert [c["scope"] for c in holders(hub, "src/far.py")] == ["src/far.py"]
