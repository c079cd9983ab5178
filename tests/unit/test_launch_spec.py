"""The ``launch:`` entry of an agent definition (docs/protocol.md 9, issue 27): parsed and
checked with the spec, a string command split as a shell would, the supervisor's own variables
refused, never stored in the table; relaynet_local.launches plans one supervisor per instance
whose token the tokens file holds."""

from __future__ import annotations

import sys

import pytest

from relaynet import admin
from relaynet.errors import InvalidArgument
from relaynet.store import table as t
from relaynet_local import launches

SPEC = """\
network: launching
agents:
  - name: planner
    instances: 1
  - name: coder
    instances: 2
    launch: {launch}
"""


def _fields(text: str) -> list[dict]:
    with pytest.raises(InvalidArgument) as err:
        admin.parse(text, check_store=False)
    return err.value.details["fields"]


def test_a_command_string_is_split_as_a_shell_would_and_the_defaults_apply():
    (spec,) = admin.parse(SPEC.format(launch="{command: \"claude -p '{prompt}' --verbose\"}"), check_store=False)
    launch = spec.agents[1].launch
    assert launch.command == ["claude", "-p", "{prompt}", "--verbose"]
    assert (launch.timeout, launch.env, launch.max_runs, launch.grace) == (3600, {}, 1, 30)


@pytest.mark.parametrize("launch, field, message", [
    ("{command: []}", "launch.command", "at least 1"),
    ("{command: \"claude 'unclosed\"}", "launch.command", "not a command line"),
    ("{command: [claude], timeout: 0}", "launch.timeout", "greater than or equal to 1"),
    ("{command: [claude], env: {RELAYNET_TOKEN: x}}", "launch.env", "set by the supervisor"),
    ("{command: [claude], env: {'1BAD': x}}", "launch.env", "pattern"),
    ("{command: [claude], max_runs: 17}", "launch.max_runs", "less than or equal to 16"),
    ("{command: [claude], shell: true}", "launch.shell", "Extra inputs"),
])
def test_a_bad_launch_entry_is_refused_naming_its_field(launch, field, message):
    fields = _fields(SPEC.format(launch=launch))
    assert any(f["field"].startswith(f"documents[0].agents.1.{field}") and message in f["message"] for f in fields), fields


def test_the_entry_never_reaches_the_table(table):
    admin.apply_spec(SPEC.format(launch="{command: [claude, -p, '{prompt}'], env: {SECRET_FLAG: hush}}"))
    items = t.client().scan(TableName=t.table_name())["Items"]  # a handful: one page
    stored = [t.decode(item) for item in items if item.get("type", {}).get("S") == "agent"]
    assert len(stored) == 2 and all("launch" not in item for item in stored)
    assert "hush" not in repr(items) and "SECRET_FLAG" not in repr(items)


def test_plan_supervises_each_instance_whose_token_the_file_holds():
    (spec,) = admin.parse(SPEC.format(launch=f"{{command: [{sys.executable}]}}"), check_store=False)
    tokens = {"networks": {"launching": {"instances": {
        "planner": [{"instanceId": "inst_p", "token": "rn_inst_p"}],
        "coder": [{"instanceId": "inst_c0", "token": "rn_inst_c0"}]}}}}  # coder's second token is missing
    planned = launches.plan([spec], tokens)
    assert [(p.agent, p.instance_id, p.token) for p in planned] == [("coder", "inst_c0", "rn_inst_c0")]
    assert launches.plan([spec], {}) == []


def test_a_command_not_on_path_is_refused_before_anything_starts():
    (spec,) = admin.parse(SPEC.format(launch="{command: [no-such-agent-binary]}"), check_store=False)
    with pytest.raises(InvalidArgument) as err:
        launches.check_commands([spec])
    assert err.value.details["fields"] == [{"field": "documents[0].agents.1.launch.command",
                                            "message": "'no-such-agent-binary' is not an executable file or on PATH"}]
