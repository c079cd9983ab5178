"""`relaynet worker` (issue 27 part 2; relaynet.worker) supervising real instances of a
`relaynet serve` on DynamoDB Local: a delegated task is taken and completed by a scripted agent
the supervisor starts, with no other process involved; a run that exits after accepting leaves
its task blocked with the reason; a kill -9 of the supervisor mid-run and a restart start no
second run for the accepted work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import RELAYNET, tool, until

AGENT = str(Path(__file__).with_name("agents") / "scripted_agent.py")


def _supervise(hub, agent: str, n: int, log_dir: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [RELAYNET, "worker", "--url", hub.url, "--token", hub.token(agent, n), "--log-dir", str(log_dir),
         "--grace", "5", "--", sys.executable, AGENT],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=open(log_dir.with_suffix(".stderr"), "ab"))



def _task(hub, task_id: str) -> dict:
    return tool(hub, "network_task_get", {"taskId": task_id}, hub.token("planner"))["task"]


def _supervisor(hub, agent: str, n: int) -> dict | None:
    """The instance's run state in control_list_agents (None: never reported)."""
    listed = tool(hub, "control_list_agents", {}, hub.tokens["representatives"]["ops"])
    (inst,) = [i for a in listed["agents"] if a["name"] == agent for i in a["instances"]
               if i["id"] == hub.instance(agent, n)]
    return inst.get("supervisor")


def _runs(log_dir: Path) -> list[dict]:
    path = log_dir / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def test_a_delegated_task_is_completed_by_the_agent_the_supervisor_starts(hub, tmp_path):
    log_dir = tmp_path / "coder0"
    supervisor = _supervise(hub, "coder", 0, log_dir)
    try:
        task = tool(hub, "network_delegate", {"objective": "add /v1/ping", "toInstance": hub.instance("coder", 0),
                                              "acceptanceCriteria": ["an artifact"]}, hub.token("planner"))
        done = until(lambda: (t := _task(hub, task["taskId"]))["state"] == "completed" and t, "the task completed")
        assert [a["label"] for a in done["artifacts"]] == ["result"]
        (run,) = until(lambda: _runs(log_dir), "the run recorded")
        assert (run["exit"], run["timedOut"], run["blocked"], run["instanceId"]) == (0, False, [], hub.instance("coder", 0))
        out = Path(run["log"]).read_text()
        assert "PROMPT: You are Relaynet agent coder" in out and f"task {task['taskId']}" in out
        assert f"COMPLETED {task['taskId']}" in out
        # the run state, as an operator sees it (docs/protocol.md 10.8): idle again, the run's exit
        shown = until(lambda: (s := _supervisor(hub, "coder", 0)) and s["lastRun"] and s, "the run state reported")
        assert (shown["state"], shown["activeRuns"], shown["runsStarted"]) == ("idle", 0, 1)
        assert (shown["lastRun"]["exit"], shown["lastRun"]["log"]) == (0, run["log"])
    finally:
        assert _stop(supervisor) == 0
    assert _supervisor(hub, "coder", 0)["state"] == "stopped"


def test_a_run_that_exits_after_accepting_leaves_the_task_blocked_with_the_reason(hub, tmp_path):
    log_dir = tmp_path / "coder1"
    supervisor = _supervise(hub, "coder", 1, log_dir, SCRIPTED_AGENT="fail")
    try:
        task = tool(hub, "network_delegate", {"objective": "fail on purpose", "toInstance": hub.instance("coder", 1)},
                    hub.token("planner"))
        blocked = until(lambda: (t := _task(hub, task["taskId"]))["state"] == "blocked" and t, "the task blocked")
        (run,) = _runs(log_dir)
        assert run["exit"] == 1 and run["blocked"] == [task["taskId"]]
        reason = blocked["history"][-1].get("reason") or ""
        assert "exited with status 1" in reason and run["log"] in reason
    finally:
        assert _stop(supervisor) == 0


def test_a_kill_9_of_the_supervisor_mid_run_and_a_restart_start_no_second_run(hub, tmp_path):
    log_dir, go = tmp_path / "reviewer", tmp_path / "go"
    env = {"SCRIPTED_AGENT": "hold", "SCRIPTED_AGENT_GO": str(go)}
    first = _supervise(hub, "reviewer", 0, log_dir, **env)
    task = tool(hub, "network_delegate", {"objective": "review while killed", "toInstance": hub.instance("reviewer")},
                hub.token("planner"))
    until(lambda: _task(hub, task["taskId"])["state"] == "accepted", "the first run accepted")
    first.kill()  # kill -9: the run it started goes on
    first.wait(timeout=10)
    second = _supervise(hub, "reviewer", 0, log_dir, **env)
    try:
        # work that arrives after the restart starts a run; had the accepted offer been seen again,
        # a run for it would have come first (the replay precedes the live events)
        tool(hub, "network_ask", {"body": "still there?", "toAgent": "reviewer"}, hub.token("planner"))
        logs = until(lambda: sorted(log_dir.glob("*.log")) if len(list(log_dir.glob("*.log"))) >= 2 else None,
                      "a run for the ask")
        assert len(logs) == 2
        second_run = until(lambda: "PROMPT:" in logs[1].read_text() and logs[1].read_text(), "the second prompt")
        assert "1 ask" in second_run and "task_offer" not in second_run
        go.touch()  # the first run, orphaned by the kill, completes the task
        until(lambda: _task(hub, task["taskId"])["state"] == "completed", "the task completed")
    finally:
        go.touch()
        assert _stop(second) == 0


def test_control_wake_agent_starts_a_run(hub, tmp_path):
    log_dir = tmp_path / "planner"
    supervisor = _supervise(hub, "planner", 0, log_dir)
    try:
        tool(hub, "control_wake_agent", {"toInstance": hub.instance("planner"), "reason": "standup"},
             hub.tokens["representatives"]["ops"])
        (run,) = until(lambda: _runs(log_dir), "the woken run recorded")
        assert run["exit"] == 0 and "1 wake" in Path(run["log"]).read_text()
    finally:
        assert _stop(supervisor) == 0


def test_sigterm_gives_a_run_its_grace_then_stops_it_and_blocks_its_task(hub, tmp_path):
    log_dir = tmp_path / "coder0-held"
    supervisor = _supervise(hub, "coder", 0, log_dir, SCRIPTED_AGENT="hold", SCRIPTED_AGENT_GO=str(tmp_path / "never"))
    task = tool(hub, "network_delegate", {"objective": "never finishes", "toInstance": hub.instance("coder", 0)},
                hub.token("planner"))
    until(lambda: _task(hub, task["taskId"])["state"] == "accepted", "the run accepted")
    assert _stop(supervisor) == 0  # --grace 5: the held run is stopped after it
    (run,) = _runs(log_dir)
    assert run["exit"] == -signal.SIGTERM and run["blocked"] == [task["taskId"]]
    assert _epoch(run["ended"]) - _epoch(run["started"]) >= 5
    blocked = _task(hub, task["taskId"])
    assert blocked["state"] == "blocked" and f"exited with status {-signal.SIGTERM}" in blocked["history"][-1]["reason"]


def test_a_command_that_fails_at_once_is_started_again_only_after_a_growing_delay(hub, tmp_path):
    log_dir = tmp_path / "planner-false"
    tool(hub, "network_ask", {"body": "are you there?", "toInstance": hub.instance("planner")}, hub.token("reviewer"))
    supervisor = subprocess.Popen([RELAYNET, "worker", "--url", hub.url, "--token", hub.token("planner"),
                                   "--log-dir", str(log_dir), "--", "false"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        runs = until(lambda: r if len(r := _runs(log_dir)) >= 3 else None, "three runs of false")
        starts = [_epoch(r["started"]) for r in runs[:3]]
        assert all(r["exit"] == 1 for r in runs)
        assert starts[1] - starts[0] >= 1.0 and starts[2] - starts[1] >= 2.0  # 1 s, then 2 s: no hot loop
    finally:
        assert _stop(supervisor) == 0
        tool(hub, "network_inbox", {}, hub.token("planner"))


def test_a_command_that_does_not_exist_is_refused_at_start(hub, tmp_path):
    out = subprocess.run([RELAYNET, "worker", "--url", hub.url, "--token", hub.token("planner"), "--",
                          str(tmp_path / "no-such-agent")], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "is not an executable file or on PATH" in out.stderr
