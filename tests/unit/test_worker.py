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


def _run(number: int, started: float, ended: float | None, code: int | None = None):
    from pathlib import Path

    from relaynet.worker import Run

    return Run(number, None, Path(f"run-{number}.log"), started, started + 3600, ended=ended, code=code)


def test_a_task_left_in_progress_is_blamed_on_the_runs_alive_when_it_was_accepted():
    """--max-runs 2 (the runs share one token): run 3 from 0 to 12 s, run 4 from 2 to 6 s; a task
    accepted at 3 s could be either's, so it waits for both, then names both; one accepted at 1 s
    is run 3's alone; one accepted while no run ran is none's."""
    from relaynet.worker import to_blame

    three, four = _run(3, 0.0, None), _run(4, 2.0, 6.0, 1)
    assert to_blame(3.0, [four, three]) == []  # run 3 still runs: it may be working on it
    three.ended, three.code = 12.0, 0
    assert to_blame(3.0, [four, three]) == [four, three]
    assert to_blame(1.0, [four, three]) == [three]
    assert to_blame(13.0, [four, three]) == []  # accepted after every run ended: by hand, or an orphan
    assert to_blame(6.0, [four, three]) == [four, three]  # ended at that very millisecond: still alive then
    assert three.why() == "exited with status 0" and _run(5, 0, 1, -15).why() == "exited with status -15"
