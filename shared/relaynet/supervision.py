"""A supervised instance's run state (docs/protocol.md 10.8, issue 27): what ``relaynet worker``
reports with ``PUT /v1/supervisor`` and ``control_list_agents`` (and ``network_whoami``) show.

The supervisor runs on the operator's machine, so the hub knows its state only from its reports:
one at each change (started, a run started or ended, stopping, stopped) and a heartbeat every
:data:`HEARTBEAT_SECONDS`. The report is stored on the instance item (``supervisor``, and the
last run apart as ``supervisorLastRun``, so a restarted supervisor's first report keeps it; one
UpdateItem: no new item, nothing to clean up) with an expiry :data:`EXPIRES_AFTER_SECONDS` later;
a reader past it sees ``state: "lost"`` (a supervisor killed with kill -9, or cut off from the
hub), since nothing else would ever correct the last report. ``stopped`` never expires: the
supervisor said it ended. Like every instance call, a report refreshes the instance's presence
(PROTOCOL.md 3), so a supervised instance stays ``online`` and routable while its supervisor
lives, which is what a supervisor is for: work sent to it starts a run.
"""

from __future__ import annotations

from typing import Any

from relaynet import clock
from relaynet.identity import Principal
from relaynet.store import identity as store

__all__ = ["EXPIRES_AFTER_SECONDS", "HEARTBEAT_SECONDS", "set_state", "view"]

HEARTBEAT_SECONDS = 60  #: how often a live supervisor reports without a change (relaynet.worker)
EXPIRES_AFTER_SECONDS = 180  #: a report older than this (three heartbeats) reads as ``lost``


def set_state(principal: Principal, req: Any) -> dict[str, Any]:
    """``PUT /v1/supervisor``: store ``req`` (a :class:`relaynet.models.worker.SupervisorStateRequest`)
    as the calling instance's run state. Returns ``{supervisor: <view>}`` (:func:`view`). One
    UpdateItem of the instance item, conditional on the item existing (its token was just
    authorised, so the condition only keeps a concurrent delete from leaving a bare item).
    Raises nothing of its own: the request model already bounds every field (400 before this)."""
    now = clock.now_ms()
    report = {
        "state": req.state, "activeRuns": req.activeRuns, "maxRuns": req.maxRuns, "runsStarted": req.runsStarted,
        "updatedAt": clock.iso(now),
        "expiresAtMs": None if req.state == "stopped" else now + EXPIRES_AFTER_SECONDS * 1000,
    }
    if req.lastRun is None:  # a supervisor that ran nothing yet (a restarted one): the last run stays known
        item = store.set_supervisor(principal.network_id, principal.instance_id, report)
        last = (item or {}).get("supervisorLastRun")
    else:
        last = req.lastRun.model_dump()
        store.set_supervisor(principal.network_id, principal.instance_id, report, last)
    return {"supervisor": view(report, now, last)}


def view(report: dict[str, Any] | None, now_ms: int, last_run: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A stored report (the instance item's ``supervisor``, with its ``supervisorLastRun`` as
    ``last_run``) as answered: ``{state, activeRuns, maxRuns, runsStarted, lastRun, updatedAt,
    expiresAt}``, ``state`` ``lost`` once ``expiresAt`` (RFC 3339; None for ``stopped``) has
    passed; None for an instance no supervisor ever reported on."""
    if not report:
        return None
    expires = report.get("expiresAtMs")
    state = report["state"]
    if expires is not None and now_ms > int(expires):
        state = "lost"
    return {"state": state, "activeRuns": int(report["activeRuns"]), "maxRuns": int(report["maxRuns"]),
            "runsStarted": int(report["runsStarted"]), "lastRun": last_run,
            "updatedAt": report["updatedAt"], "expiresAt": clock.iso(int(expires)) if expires is not None else None}
