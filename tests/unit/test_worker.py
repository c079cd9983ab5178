"""What `relaynet worker` starts a run for and tells it (relaynet.worker)."""

from __future__ import annotations

import pytest

from relaynet.worker import Supervisor, prompt_for, starts_a_run


def test_offers_asks_and_wake_ups_start_a_run_other_mail_does_not():
    assert starts_a_run({"event": "task_offer", "kind": "task_offer"})
    assert starts_a_run({"event": "wake", "kind": "notice"})
    assert starts_a_run({"event": "message", "kind": "ask"})
    assert not starts_a_run({"event": "message", "kind": "reply"})
    assert not starts_a_run({"event": "message", "kind": "notice"})
    assert not starts_a_run({"event": "task_update", "kind": "task_update"})


def test_the_prompt_says_who_the_agent_is_what_waits_and_to_read_the_inbox_first():
    prompt = prompt_for("coder", "inst_1", [{"event": "task_offer", "taskId": "task_9"},
                                             {"event": "message", "kind": "ask"}, {"event": "message", "kind": "ask"}])
    assert prompt.startswith("You are Relaynet agent coder (instance inst_1). Waiting for you: 2 asks, 1 task_offer "
                             "(task task_9). Call network_inbox first")


@pytest.mark.parametrize("kwargs, message", [
    ({"command": []}, "COMMAND"),
    ({"command": ["x"], "max_runs": 0}, "--max-runs"),
    ({"command": ["x"], "run_timeout": 0}, "--run-timeout"),
    ({"command": ["x"], "grace": -1}, "--grace"),
])
def test_bad_arguments_are_refused_before_anything_starts(kwargs, message):
    command = kwargs.pop("command")
    with pytest.raises(ValueError, match=message):
        Supervisor("http://127.0.0.1:9", "rn_inst_x", command, **kwargs)
