"""A ``launch:`` entry in the network spec (issue 27; docs/protocol.md 9): `relaynet serve --spec`
supervises every instance of the agent, so a task delegated to it is completed by the scripted
agent the hub starts, with no `relaynet worker` and no other process; the entry's ``env`` reaches
the run; the entry never reaches the table (peers do not see the command or its environment); a
command that cannot run is refused at start, naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import RELAYNET, start_hub, stop_hub, tool, until

AGENT = str(Path(__file__).with_name("agents") / "scripted_agent.py")

SPEC = """\
network: launched
agents:
  - name: planner
    instances: 1
  - name: coder
    instances: 2
    launch:
      command: ["{python}", "{agent}"]
      timeout: 120
      grace: 5
      env: {{SCRIPTED_AGENT: complete, SCRIPTED_AGENT_SAYS: "from the spec"}}
"""



@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launched")
    spec = tmp / "spec.yaml"
    spec.write_text(SPEC.format(python=sys.executable, agent=AGENT))
    h = start_hub(tmp, spec=spec)
    yield h
    stop_hub(h)


def _runs(log_dir: Path) -> list[dict]:
    path = log_dir / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_task_for_a_launched_agent_is_completed_by_the_run_the_hub_starts(hub):
    planner = hub.token("planner", network="launched")
    coder1 = hub.instance("coder", 1, network="launched")
    task = tool(hub, "network_delegate", {"objective": "add /v1/ping", "toInstance": coder1}, planner)
    done = until(lambda: (t := tool(hub, "network_task_get", {"taskId": task["taskId"]}, planner)["task"])
                  ["state"] == "completed" and t, "the task completed")
    assert [a["label"] for a in done["artifacts"]] == ["result"]
    log_dir = hub.cwd / "worker" / "launched" / "coder"
    (run,) = until(lambda: [r for r in _runs(log_dir) if r["instanceId"] == coder1], "the run recorded")
    assert (run["exit"], run["timedOut"], run["blocked"]) == (0, False, [])
    out = Path(run["log"]).read_text()
    assert f"COMPLETED {task['taskId']}" in out and "SAYS: from the spec" in out
    # the other instance was not started: the offer was for coder1 alone
    assert [r["instanceId"] for r in _runs(log_dir)] == [coder1]


def test_the_launch_entry_stays_on_the_operators_machine(hub):
    seen = tool(hub, "network_discover", {}, hub.token("planner", network="launched"))
    text = json.dumps(seen)
    assert "coder" in text and "scripted_agent" not in text and "from the spec" not in text


def test_a_launch_command_that_cannot_run_stops_serve_at_start_naming_the_field(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("network: broken\nagents:\n  - name: coder\n    instances: 1\n"
                    "    launch: {command: no-such-agent-binary --go}\n")
    done = subprocess.run([RELAYNET, "serve", "--port", "0", "--spec", str(spec)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "documents[0].agents.0.launch.command" in done.stderr and "no-such-agent-binary" in done.stderr
    assert not (tmp_path / ".relaynet" / "dynamodb").exists()  # refused before the store started
