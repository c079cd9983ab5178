"""``relaynet worker``: a supervisor that starts an agent when work arrives for its instance
(issue 27 part 2; docs/protocol.md 9).

``relaynet worker --url URL --token TOKEN [--max-runs 1] [--run-timeout 3600] [--log-dir DIR]
[--grace 30] -- COMMAND [ARGS...]`` waits on the instance's events (``GET /v1/events`` through the
SDK's iterator: no polling; what waits when it starts counts too) and, when a task offer, an ask
or a wake-up (control_wake_agent) arrives and fewer than ``--max-runs`` runs are active, starts
COMMAND with ``RELAYNET_URL``, ``RELAYNET_TOKEN`` and ``RELAYNET_PROMPT`` (what waits, and to call
``network_inbox`` first) in its environment and ``{prompt}`` in ARGS replaced by the same text, so
``-- claude -p {prompt}`` and ``-- codex exec {prompt}`` work as written.

- **Runs**: each run's output goes to its own log file in ``--log-dir`` (default
  ``.relaynet/worker``); each end is one JSON line in ``runs.jsonl`` there (``{run, instanceId,
  started, ended, exit, timedOut, log, blocked}``). A run past ``--run-timeout`` seconds is
  stopped (SIGTERM, then SIGKILL 5 s later) and recorded with ``timedOut``.
- **A run that ends while a task it accepted is still in progress** (``accepted`` or
  ``working``, assigned to this instance, accepted by it while the run ran) leaves that task
  ``blocked`` with a reason naming the run's exit status and log file; the creator is told, as
  for any block. Runs share the instance's token, so with ``--max-runs`` above 1 the hub cannot
  say which run accepted a task: it is blocked once every run alive at its acceptance has ended,
  the reason naming each of them.
- **When a run ends** and asks or task offers still wait (``GET /v1/inbox/summary``), another
  run starts: work that came while the runs were busy is not left waiting; work events queued
  before the end (at least :data:`STALE_AFTER` s) that the inbox no longer holds start nothing
  (a run took them). A run that ended
  within :data:`QUICK_RUN` seconds leaving the work it was started for, with none new since it
  started (a command that fails at once, or reads nothing), delays the next start: 1 s, doubled
  each time, at most :data:`MAX_BACKOFF`.
  A COMMAND that cannot be started is recorded with exit 127 and backed off the same way.
- **Run state**: each change (started, a run started or ended, stopping, stopped) and a
  heartbeat every :data:`HEARTBEAT` seconds are reported with ``PUT /v1/supervisor``
  (:meth:`Supervisor.report`), which ``control_list_agents`` shows per instance (``lost`` when
  the reports stop: docs/protocol.md 10.8).
- **SIGTERM or SIGINT**: start nothing more, give the active runs ``--grace`` seconds (default
  30), then stop them; exit 0.
- **A kill -9 of the supervisor** loses nothing and starts no second run for accepted work: what
  a run took with ``network_inbox`` no longer waits, so a restarted supervisor is not told of it;
  an offer no run read is still waiting, and starts a run.

Exit status: 0 after a signal; 2 for bad arguments (a COMMAND not found), an unreachable hub at
start, or a token the hub refuses (ApiError). Finished tasks are found with the plugin surface's
``tasks list`` (an instance token may call it, PROTOCOL.md 1).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from relaynet.client import ApiError, RelaynetClient

__all__ = ["Supervisor", "Run", "STARTS_A_RUN", "prompt_for", "to_blame"]

log = logging.getLogger("relaynet.worker")

#: Events that start a run: a task offer, an ask (a message of kind ask) and a wake-up.
STARTS_A_RUN = ("task_offer", "wake")
_IN_PROGRESS = ("accepted", "working")
_KILL_AFTER = 5.0
QUICK_RUN = 10.0  #: seconds: a run shorter than this that leaves work waiting delays the next start
HEARTBEAT = 60.0  #: seconds between run-state reports without a change (relaynet.supervision expires one at 180)
MAX_BACKOFF = 60.0  #: seconds: the longest delay between such starts
STALE_AFTER = 2.0  #: seconds: work events older than a run's end are dropped when the inbox holds no work


def _iso(epoch_s: float) -> str:
    """Epoch seconds as RFC 3339 UTC with milliseconds (PROTOCOL.md's time format)."""
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def starts_a_run(event: dict[str, Any]) -> bool:
    """Whether an event of ``GET /v1/events`` is work for a run."""
    return event.get("event") in STARTS_A_RUN or (event.get("event") == "message" and event.get("kind") == "ask")


def prompt_for(agent: str, instance_id: str, events: list[dict[str, Any]]) -> str:
    """What a run is told (``RELAYNET_PROMPT``): what waits, and to call network_inbox first."""
    counts = Counter("ask" if e.get("event") == "message" else e.get("event") for e in events)
    parts = [f"{n} {name}{'s' if n > 1 else ''}" for name, n in sorted(counts.items())]
    tasks = list(dict.fromkeys(e["taskId"] for e in events if e.get("event") == "task_offer" and e.get("taskId")))
    waits = ", ".join(parts) if parts else "mail"
    if tasks:
        waits += f" (task {', '.join(tasks)})"
    return (f"You are Relaynet agent {agent} (instance {instance_id}). Waiting for you: {waits}. Call "
            f"network_inbox first and act on what it says: accept a task with network_task_update before "
            f"working on it, report progress, and complete it with the evidence; answer asks with "
            f"network_reply. Only tool calls reach the other agents.")


def to_blame(accepted_at: float, runs: list["Run"]) -> list["Run"]:
    """The runs a task accepted at ``accepted_at`` (epoch seconds, the history's milliseconds)
    and left in progress is blamed on: every run alive at that instant (started at or before it,
    ended at or after it), once all of them have ended; ``[]`` while one of them still runs (it
    may be working on it) or when none was alive (not this supervisor's run)."""
    at = int(accepted_at * 1000) / 1000
    alive = [r for r in runs if int(r.started * 1000) / 1000 <= at and (r.ended is None or r.ended >= at)]
    return [] if any(r.ended is None for r in alive) else alive


@dataclass
class Run:
    """One started COMMAND: its number, process, log file and when it started (epoch seconds)."""

    number: int
    process: subprocess.Popen
    log_path: Path
    started: float
    deadline: float
    timed_out: bool = False
    stopping_since: float | None = None
    blocked: list[str] = field(default_factory=list)
    ended: float | None = None  #: when it exited (epoch seconds); None while it runs
    code: int | None = None  #: its exit status once ended

    def why(self) -> str:
        """How it ended, for a blocked task's reason."""
        return "timed out" if self.timed_out else f"exited with status {self.code}"


class Supervisor:
    """Starts COMMAND for one instance when work arrives (see the module docstring).

    Args:
        url, token: the hub and the instance's ``rn_inst_`` token.
        command: COMMAND and ARGS (``{prompt}`` in ARGS is replaced).
        max_runs: active runs at most (>= 1).
        run_timeout: seconds a run may take (> 0).
        log_dir: where run logs and ``runs.jsonl`` go.
        grace: seconds active runs get after SIGTERM.
        env: variables added to each run's environment (after the supervisor's own, before
            ``RELAYNET_URL``, ``RELAYNET_TOKEN`` and ``RELAYNET_PROMPT``, which always win).
    Raises ValueError for an empty command or bad numbers.
    """

    def __init__(self, url: str, token: str, command: list[str], *, max_runs: int = 1,
                 run_timeout: float = 3600.0, log_dir: str | os.PathLike[str] = ".relaynet/worker",
                 grace: float = 30.0, env: dict[str, str] | None = None):
        if not command:
            raise ValueError("a COMMAND to run is required after --")
        if not 1 <= max_runs <= 16 or run_timeout <= 0 or grace < 0:
            raise ValueError("--max-runs must be 1 to 16, --run-timeout above 0 and --grace at least 0")
        if shutil.which(command[0]) is None:
            raise ValueError(f"COMMAND {command[0]!r} is not an executable file or on PATH")
        self.url, self.token, self.command = url, token, list(command)
        self.env = dict(env or {})
        self.max_runs, self.run_timeout, self.grace = max_runs, float(run_timeout), float(grace)
        self.log_dir = Path(log_dir)
        self.stopping = threading.Event()
        self.events: queue.Queue = queue.Queue()
        self.runs: list[Run] = []
        self.waiting: list[dict[str, Any]] = []  # work events not yet handed to a run
        self._queued: list[float] = []  # when each of ``waiting`` came (epoch seconds)
        self._ended_runs: list[Run] = []  # the latest ended runs, for blaming a task left in progress
        self._count = 0
        self._delay = 0.0  # the restart backoff (s), 0 after a run that did its work
        self._not_before = 0.0
        self._hub = RelaynetClient(url, token)
        self.agent = self.instance_id = ""
        self.last_run: dict[str, Any] | None = None  # lastRun of the run-state report
        self._reported_at = 0.0  # when the run state was last sent (0: never)
        self._reporting = True  # False once the hub has no PUT /v1/supervisor (an older hub)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Supervise until SIGTERM/SIGINT (or :attr:`stopping` is set); 0, or 2 when the hub
        refuses the token."""
        try:
            me = self._hub.whoami()
        except ApiError as err:
            what = "cannot reach the hub" if err.is_transport_error else "the hub refused the token"
            log.error("relaynet worker: %s (%s: %s)", what, err.code, err.message)  # the token names nobody yet
            return 2
        self.agent, self.instance_id = me["agent"]["name"], me["instance"]["id"]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        listener = threading.Thread(target=self._listen, daemon=True, name="relaynet-worker-events")
        listener.start()
        log.info("relaynet worker: supervising %s (%s): %s", self.agent, self.instance_id, self.command)
        self.report()
        while not self.stopping.is_set():
            try:
                item = self.events.get(timeout=self._next_wake())
            except queue.Empty:
                item = None
            if isinstance(item, ApiError):
                log.error("relaynet worker: %s: events refused (%s: %s); stopping", self.instance_id, item.code,
                          item.message)
                self.stopping.set()
                self._wind_down()
                return 2
            if item is not None and starts_a_run(item):
                self.waiting.append(item)
                self._queued.append(time.time())
            self._reap()
            self._start_if_due()
            if time.time() - self._reported_at >= HEARTBEAT:
                self.report()
        self._wind_down()
        return 0

    def state(self) -> str:
        """``idle`` | ``running`` | ``stopping``, as :meth:`report` sends it."""
        if self.stopping.is_set():
            return "stopping"
        return "running" if self.runs else "idle"

    def report(self, state: str | None = None) -> None:
        """Send the run state (``PUT /v1/supervisor``, docs/protocol.md 10.8) that
        ``control_list_agents`` shows: at each change and every :data:`HEARTBEAT` seconds. Best
        effort: a failure is logged and the next change or heartbeat tries again; a hub without
        the endpoint (404) is not asked again."""
        if not self._reporting:
            return
        self._reported_at = time.time()
        try:
            self._hub.report_supervisor(state or self.state(), active_runs=len(self.runs), max_runs=self.max_runs,
                                        runs_started=self._count, last_run=self.last_run)
        except ApiError as err:
            if err.status == 404:
                self._reporting = False
                log.warning("relaynet worker: this hub takes no run-state reports (PUT /v1/supervisor: 404)")
            else:
                log.warning("relaynet worker: the run-state report failed (%s: %s)", err.code, err.message)

    def _next_wake(self) -> float:
        """Seconds until the loop must act without being told: a run's deadline or the SIGKILL
        after its stop, a delayed start, or the next heartbeat report (at most :data:`HEARTBEAT`).
        Events and run ends (each run has a thread that waits for its process) wake it at once."""
        times = [r.deadline if r.stopping_since is None else r.stopping_since + _KILL_AFTER for r in self.runs]
        if self.waiting and self._not_before > time.time():
            times.append(self._not_before)
        times.append(self._reported_at + HEARTBEAT)
        return max(0.05, min(times) - time.time())

    def _listen(self) -> None:
        """The instance's events into :attr:`events` until :attr:`stopping`; a refusal (ApiError)
        is handed over and ends it. A stream another of the instance's streams replaced, or a
        failure of the iterator itself, is opened again 5 s later: the supervisor never goes deaf."""
        while not self.stopping.is_set():
            try:
                for event in self._hub.events(last_event_id="", stop=self.stopping):
                    self.events.put(event)
                if not self.stopping.is_set():
                    log.warning("relaynet worker: another stream of this instance replaced this one; again in 5 s")
            except ApiError as err:
                self.events.put(err)
                return
            except Exception:  # noqa: BLE001 - listening again is what keeps the supervisor useful
                log.exception("relaynet worker: the event stream failed; again in 5 s")
            self.stopping.wait(5.0)

    def _start_if_due(self) -> None:
        if self.stopping.is_set() or not self.waiting or len(self.runs) >= self.max_runs \
                or time.time() < self._not_before:
            return
        events, queued, self.waiting, self._queued = self.waiting, self._queued, [], []
        try:
            self._start(events)
        except OSError as exc:  # COMMAND gone or not executable since the start
            log.error("relaynet worker: %s: cannot start %s: %s", self.instance_id, self.command[0], exc)
            now = _iso(time.time())
            self._record({"run": self._count, "instanceId": self.instance_id, "started": now, "ended": now,
                          "exit": 127, "timedOut": False, "log": None, "blocked": [], "error": str(exc)})
            self.last_run = {"number": self._count, "exit": 127, "timedOut": False, "endedAt": now, "blocked": [],
                             "log": f"not started: {exc}"[:1024]}
            self.report()  # the operator sees the failed start, not a quiet "idle"
            self.waiting, self._queued = events, queued
            self._back_off()

    def _back_off(self) -> None:
        """The next start waits: 1 s, doubled per quick failure, at most :data:`MAX_BACKOFF`."""
        self._delay = min(max(1.0, self._delay * 2), MAX_BACKOFF)
        self._not_before = time.time() + self._delay
        log.warning("relaynet worker: the next run waits %.0f s (the last one ended within %.0f s and work "
                    "still waits)", self._delay, QUICK_RUN)

    def _start(self, events: list[dict[str, Any]]) -> Run:
        self._count += 1
        prompt = prompt_for(self.agent, self.instance_id, events)
        started = time.time()
        log_path = self.log_dir / f"{self.instance_id}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(started))}" \
                                  f"-{os.getpid()}-{self._count:04d}.log"  # a restarted supervisor's differ
        env = {**os.environ, **self.env, "RELAYNET_URL": self.url, "RELAYNET_TOKEN": self.token,
               "RELAYNET_PROMPT": prompt}
        args = [part.replace("{prompt}", prompt) for part in self.command]
        with open(log_path, "ab") as out:
            try:
                process = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError:
                log_path.unlink(missing_ok=True)  # no run, no log
                raise
        run = Run(self._count, process, log_path, started, started + self.run_timeout)
        self.runs.append(run)
        threading.Thread(target=lambda: (process.wait(), self.events.put(None)), daemon=True,
                         name=f"relaynet-worker-run-{run.number}").start()  # wakes the loop to reap it
        log.info("relaynet worker: run %d started (pid %d, log %s)", run.number, process.pid, log_path)
        self.report()
        return run

    def _reap(self) -> None:
        now = time.time()
        for run in list(self.runs):
            code = run.process.poll()
            if code is None:
                if now >= run.deadline and run.stopping_since is None:
                    run.timed_out = True
                    self._stop_run(run)
                elif run.stopping_since is not None and now - run.stopping_since >= _KILL_AFTER:
                    self._signal(run, signal.SIGKILL)
                continue
            self.runs.remove(run)
            self._ended(run, code)

    def _ended(self, run: Run, code: int) -> None:
        ended = time.time()
        run.ended, run.code = ended, code
        self._ended_runs = [*self._ended_runs[-31:], run]
        try:
            run.blocked = self._block_in_progress()
        except Exception:  # noqa: BLE001 - the supervisor outlives a hub's odd answer
            log.exception("relaynet worker: blocking the tasks left by run %d failed", run.number)
        self._record({"run": run.number, "instanceId": self.instance_id, "started": _iso(run.started),
                      "ended": _iso(ended), "exit": code, "timedOut": run.timed_out, "log": str(run.log_path),
                      "blocked": run.blocked})
        log.info("relaynet worker: %s: run %d exited %d%s", self.instance_id, run.number, code,
                 f", blocked {run.blocked}" if run.blocked else "")
        self.last_run = {"number": run.number, "exit": code, "timedOut": run.timed_out, "endedAt": _iso(ended),
                         "blocked": run.blocked[:100], "log": str(run.log_path)[:1024]}
        self.report()
        if self.stopping.is_set():
            return
        # What was queued before this run ended may be what it (or another run) just handled: a
        # run starts again only if the inbox still holds work. Events of the last STALE_AFTER s
        # are kept whatever the summary says (an index a moment behind the write, in AWS).
        # An unanswered summary (None: a 429, a hub restarting) drops nothing.
        waits = self._work_waits()
        if waits is False:
            kept = [(e, t) for e, t in zip(self.waiting, self._queued) if t > ended - STALE_AFTER]
            self.waiting, self._queued = [e for e, _ in kept], [t for _, t in kept]
        elif waits and not self.waiting:
            # work the run did not take: as old as the run (it counts as left, not as new)
            self.waiting, self._queued = [{"event": "message", "kind": "ask", "id": "waiting"}], [run.started - 0.001]
        # A quick run that left the work it was started for (nothing new came while it ran) is a
        # command that fails at once or reads nothing: back off. Work that came during the run starts
        # the next one at once.
        came_during = any(t >= run.started for t in self._queued)
        if self.waiting and not came_during and ended - run.started < QUICK_RUN:
            self._back_off()
            return
        self._delay = 0.0

    def _record(self, record: dict[str, Any]) -> None:
        with open(self.log_dir / "runs.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")

    def _accepted_at(self, task_id: str) -> float | None:
        """When this instance last accepted the task (epoch seconds; its history's last
        ``accepted`` entry), None when that entry is another instance's or there is none."""
        history = self._hub.task_get(task_id)["task"].get("history") or []
        for entry in reversed(history):
            if entry.get("state") == "accepted":
                if (entry.get("actor") or {}).get("instanceId") != self.instance_id:
                    return None
                return datetime.fromisoformat(str(entry.get("at", "")).replace("Z", "+00:00")).timestamp()
        return None

    def _block_in_progress(self) -> list[str]:
        """Block every task assigned to this instance, still accepted or working, that only ended
        runs can have accepted: the runs alive when it was accepted (started at or before that
        instant, ended at or after it) have all ended. A task an active run may hold waits for
        that run's end; a task accepted while no run of this supervisor ran (by a run of a
        supervisor killed with -9, or by hand) is not blamed on any. The reason names the run (or,
        with ``--max-runs`` above 1, the runs) that can have left it, with exit status and log.
        Returns the ids blocked."""
        blocked: list[str] = []
        try:
            listed = self._hub.call("tasks", {"action": "list", "scope": "own", "state": "active", "limit": 100})
        except ApiError as err:
            log.warning("relaynet worker: %s: could not list its tasks (%s)", self.instance_id, err)
            return blocked
        for task in listed.get("tasks") or []:  # summaries: ``assignee`` is an instance id (PROTOCOL.md 3)
            if task.get("state") not in _IN_PROGRESS or task.get("assignee") != self.instance_id:
                continue
            at = self._accepted_at(task["id"])
            if at is None:
                continue
            alive = to_blame(at, [*self._ended_runs, *self.runs])
            if not alive:
                continue
            runs = "; ".join(f"run {r.number} {r.why()} (log {r.log_path})" for r in alive)
            reason = (f"the agent's run ended while this task was {task['state']}: {runs} (relaynet worker)"
                      if len(alive) == 1 else
                      f"one of the agent's runs ended while this task was {task['state']}: {runs} (relaynet worker)")
            try:
                self._hub.task_update(task["id"], "blocked", reason)
                blocked.append(task["id"])
            except ApiError as err:  # it moved meanwhile (completed by someone, cancelled)
                log.warning("relaynet worker: task %s not blocked (%s)", task["id"], err)
        return blocked

    def _work_waits(self) -> bool | None:
        """Whether an ask or a task offer is undelivered (``GET /v1/inbox/summary``); None when
        the hub did not answer it (then nothing is dropped on its word)."""
        try:
            by_kind = self._hub.inbox_summary().get("byKind") or {}
        except ApiError as err:
            log.warning("relaynet worker: %s: the inbox summary failed (%s)", self.instance_id, err.code)
            return None
        return bool(by_kind.get("ask") or by_kind.get("task_offer"))

    # -- stopping ----------------------------------------------------------------------------

    def _signal(self, run: Run, sig: int) -> None:
        try:
            os.killpg(run.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _stop_run(self, run: Run) -> None:
        run.stopping_since = time.time()
        self._signal(run, signal.SIGTERM)

    def _wind_down(self) -> None:
        """No new runs; the active ones get the grace period, then are stopped (SIGTERM, SIGKILL
        5 s later)."""
        self.report("stopping")
        deadline = time.time() + self.grace
        while self.runs and time.time() < deadline:
            self._wait_a_little(deadline)
            self._reap()
        for run in self.runs:
            if run.stopping_since is None:
                self._stop_run(run)
        while self.runs:
            self._wait_a_little(time.time() + 0.5)
            self._reap()
        self.report("stopped")
        self._hub.close()

    def _wait_a_little(self, until: float) -> None:
        try:
            self.runs[0].process.wait(timeout=max(0.01, min(0.5, until - time.time())))
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """Start nothing more; :meth:`run` gives the active runs the grace period, stops them and
        returns (what SIGTERM does; callable from any thread)."""
        self.stopping.set()
        self.events.put(None)

    def install_signals(self) -> None:
        """SIGTERM and SIGINT call :meth:`stop` (the main thread only)."""
        def stop(signum: int, _frame: Any) -> None:
            log.info("relaynet worker: signal %d: no new runs; %d active get %.0f s", signum, len(self.runs), self.grace)
            self.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
