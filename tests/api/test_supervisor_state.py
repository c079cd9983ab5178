"""PUT /v1/supervisor (docs/protocol.md 10.8, issue 27): a supervisor's run state, as
control_list_agents shows it per instance; ``lost`` once the reports stop; bad reports are a 400
that changes nothing; only an instance token may report."""

from __future__ import annotations

import pytest

from relaynet import clock, supervision

REPORT = {"state": "running", "activeRuns": 1, "maxRuns": 2, "runsStarted": 3,
          "lastRun": {"number": 2, "exit": 1, "timedOut": False, "endedAt": "2026-12-03T10:00:00.000Z",
                      "blocked": [], "log": "/tmp/worker/inst-0002.log"}}


def _listed(api, demo, agent: str, instance_id: str) -> dict:
    status, out, _ = api("control_list_agents", {}, demo.tokens["representatives"]["ops"])
    assert status == 200, out
    (found,) = [i for a in out["agents"] if a["name"] == agent for i in a["instances"] if i["id"] == instance_id]
    return found


def test_a_report_is_what_control_list_agents_shows_for_the_instance(api, demo):
    coder0 = demo.principals["coder0"].instance_id
    assert "supervisor" not in _listed(api, demo, "coder", coder0)  # never supervised: no entry
    status, out, _ = api("supervisor_state_set", REPORT, demo.token("coder0"))
    assert status == 200, out
    shown = _listed(api, demo, "coder", coder0)["supervisor"]
    assert shown == out["supervisor"]
    assert {k: shown[k] for k in ("state", "activeRuns", "maxRuns", "runsStarted", "lastRun")} == REPORT
    assert clock.parse_iso(shown["expiresAt"]) - clock.parse_iso(shown["updatedAt"]) == 180_000
    assert "supervisor" not in _listed(api, demo, "coder", demo.principals["coder1"].instance_id)

    stopped = {"state": "stopped", "activeRuns": 0, "maxRuns": 2, "runsStarted": 3}
    assert api("supervisor_state_set", stopped, demo.token("coder0"))[0] == 200
    shown = _listed(api, demo, "coder", coder0)["supervisor"]
    assert (shown["state"], shown["expiresAt"]) == ("stopped", None)
    assert shown["lastRun"] == REPORT["lastRun"]  # a report without a last run keeps the one known
    restarted = {"state": "idle", "activeRuns": 0, "maxRuns": 2, "runsStarted": 0}
    status, out, _ = api("supervisor_state_set", restarted, demo.token("coder0"))
    assert out["supervisor"]["lastRun"] == REPORT["lastRun"] == _listed(api, demo, "coder", coder0)["supervisor"]["lastRun"]


def test_a_report_past_its_expiry_reads_as_lost_and_stopped_never_does():
    now = 1_800_000_000_000
    report = {"state": "idle", "activeRuns": 0, "maxRuns": 1, "runsStarted": 0, "lastRun": None,
              "updatedAt": clock.iso(now), "expiresAtMs": now + supervision.EXPIRES_AFTER_SECONDS * 1000}
    assert supervision.view(report, now + 180_000)["state"] == "idle"
    assert supervision.view(report, now + 180_001)["state"] == "lost"
    assert supervision.view({**report, "state": "stopped", "expiresAtMs": None}, now + 10**9)["state"] == "stopped"
    assert supervision.view(None, now) is None


def test_the_heartbeat_comes_well_before_a_report_expires():
    from relaynet import worker

    assert worker.HEARTBEAT * 3 <= supervision.EXPIRES_AFTER_SECONDS


@pytest.mark.parametrize("change, field", [
    ({"state": "asleep"}, "state"),
    ({"activeRuns": -1}, "activeRuns"),
    ({"maxRuns": 0}, "maxRuns"),
    ({"maxRuns": 17}, "maxRuns"),
    ({"activeRuns": 3, "maxRuns": 2}, "body"),
    ({"runsStarted": "3"}, "runsStarted"),
    ({"lastRun": {"number": 0, "endedAt": "2026-12-03T10:00:00.000Z"}}, "lastRun.number"),
    ({"lastRun": {"number": 1, "endedAt": "2026-12-03T10:00:00.000Z", "log": "x" * 1025}}, "lastRun.log"),
    ({"pid": 4242}, "pid"),
])
def test_a_bad_report_is_a_400_naming_the_field_and_changes_nothing(api, demo, change, field):
    token = demo.token("coder1")
    status, out, _ = api("supervisor_state_set", {**REPORT, **change}, token)
    assert status == 400 and out["error"]["code"] == "invalid_argument", out
    assert field in [f["field"] for f in out["error"]["details"]["fields"]]
    assert "supervisor" not in _listed(api, demo, "coder", demo.principals["coder1"].instance_id)


def test_only_an_instance_reports(api, demo):
    status, out, _ = api("supervisor_state_set", REPORT, demo.tokens["representatives"]["ops"])
    assert status == 403 and out["error"]["code"] == "permission_denied"
    status, out, _ = api("supervisor_state_set", REPORT, None)
    assert status == 401 and out["error"]["code"] == "unauthenticated"


def test_stopping_or_restarting_the_instance_drops_its_run_state(api, demo):
    """Both revoke the token a supervisor reports with: what it said last is no longer true."""
    ops = demo.tokens["representatives"]["ops"]
    for n, step in ((0, "control_restart_agent"), (1, "control_stop_agent")):
        inst = demo.principals[f"coder{n}"].instance_id
        assert api("supervisor_state_set", REPORT, demo.token(f"coder{n}"))[0] == 200
        first = api(step, {"instanceId": inst}, ops)[1]
        status, out, _ = api(step, {"instanceId": inst, "confirmationId": first["confirmationId"]}, ops)
        assert status == 200, out
        assert "supervisor" not in _listed(api, demo, "coder", inst)
