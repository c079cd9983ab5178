"""The supervisors ``relaynet serve --spec`` runs for the spec's ``launch:`` entries (issue 27;
docs/protocol.md 9).

An agent definition with ``launch: {command, timeout, env, max_runs, grace}`` has every instance
whose token the tokens file holds supervised in this process, as ``relaynet worker --url <hub>
--token <token> --run-timeout <timeout> --max-runs <max_runs> --grace <grace> -- <command>``
would (relaynet.worker.Supervisor, one thread each): a task offer, an ask or a wake-up for the
instance starts ``command`` with ``RELAYNET_URL``, ``RELAYNET_TOKEN``, ``RELAYNET_PROMPT`` and
``env``. Runs start in the directory ``relaynet serve`` runs in; their logs and ``runs.jsonl``
go to ``<tokens file's directory>/worker/<network>/<agent>/``. An instance whose token the file
does not hold (one launched later with control_launch_agent, its token shown once) is not
supervised, and the log says so. When the hub stops, the supervisors stop first: no new runs,
the active ones get ``grace`` seconds, then are stopped.
"""

from __future__ import annotations

import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relaynet.errors import InvalidArgument

if TYPE_CHECKING:  # types only: the specs come parsed (relaynet.admin.parse)
    from relaynet.admin import LaunchSpec, NetworkSpec

__all__ = ["Launch", "Launches", "check_commands", "plan"]

log = logging.getLogger("relaynet_local.launches")


@dataclass(frozen=True)
class Launch:
    """One instance to supervise: its network and agent names, instance id, token and entry."""

    network: str
    agent: str
    instance_id: str
    token: str
    spec: LaunchSpec


def check_commands(specs: list[NetworkSpec]) -> None:
    """Refuse (InvalidArgument, a field per entry) a ``launch.command`` whose program is neither
    an executable file nor on PATH: said at start, before the store starts, not at the first run."""
    fields = []
    for n, spec in enumerate(specs):
        for i, agent in enumerate(spec.agents):
            if agent.launch is not None and shutil.which(agent.launch.command[0]) is None:
                fields.append({"field": f"documents[{n}].agents.{i}.launch.command",
                               "message": f"{agent.launch.command[0]!r} is not an executable file or on PATH"})
    if fields:
        raise InvalidArgument("a launch command cannot be run", fields)


def plan(specs: list[NetworkSpec], tokens: dict[str, Any]) -> list[Launch]:
    """The instances to supervise: for each agent with ``launch:``, each of its instances in the
    tokens document (``{"networks": {name: {"instances": {agent: [{instanceId, token}]}}}}``)."""
    out = []
    for spec in specs:
        held = ((tokens.get("networks") or {}).get(spec.network) or {}).get("instances") or {}
        for agent in spec.agents:
            if agent.launch is None:
                continue
            instances = held.get(agent.name) or []
            if len(instances) < agent.instances:
                log.warning("launch: %s/%s has %d instances but the tokens file holds %d tokens: only those "
                            "are supervised", spec.network, agent.name, agent.instances, len(instances))
            out += [Launch(spec.network, agent.name, inst["instanceId"], inst["token"], agent.launch)
                    for inst in instances]
    return out


class Launches:
    """The running supervisors of :func:`plan`'s launches against the hub at ``url``."""

    def __init__(self, launches: list[Launch], url: str, log_root: Path):
        from relaynet.worker import Supervisor

        self.supervisors = [
            Supervisor(url, launch.token, launch.spec.command, max_runs=launch.spec.max_runs,
                       run_timeout=launch.spec.timeout, grace=launch.spec.grace, env=launch.spec.env,
                       log_dir=log_root / launch.network / launch.agent)
            for launch in launches]
        self.launches = list(launches)
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Each supervisor in its own thread (relaynet.worker.Supervisor.run)."""
        for n, (supervisor, launch) in enumerate(zip(self.supervisors, self.launches)):
            thread = threading.Thread(target=self._run, args=(supervisor, launch), daemon=True,
                                      name=f"relaynet-launch-{n}")
            thread.start()
            self._threads.append(thread)
        if self.supervisors:
            log.info("launch: supervising %d instances", len(self.supervisors))

    @staticmethod
    def _run(supervisor: Any, launch: Launch) -> None:
        code = supervisor.run()
        if code != 0:
            log.error("launch: the supervisor of %s/%s (%s) ended (%d): its instance is no longer started on "
                      "work. A restarted instance (control_restart_agent) has a new token: put it in the tokens "
                      "file and restart the hub", launch.network, launch.agent, launch.instance_id, code)

    def stop(self) -> None:
        """No new runs anywhere; wait while the active ones get their grace and are stopped."""
        for supervisor in self.supervisors:
            supervisor.stop()
        for thread in self._threads:
            thread.join()
