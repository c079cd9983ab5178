"""The A2A bridge (issue 28 part 3, docs/protocol.md 13.4): a remote A2A agent as a member of a
Relaynet network.

An agent definition with ``a2a: {url, authentication?}`` (its Agent Card's URL) has exactly one
instance, which no token names: the hub acts as it. Routing offers it tasks like any instance
(any surface's delegation: network_delegate, control_delegate, AG2's, A2A's own SendMessage), and
the scheduled bridge function (:func:`run`; locally every ``--sweep-interval``, in AWS every
minute) does for each member (its tasks on :data:`WORKERS` threads, each task's steps in order):

1. **Presence.** Read the remote's card (relaynet.a2a.remote.resolve). Readable: the instance's
   ``lastSeenAt`` is refreshed, so it stays live and eligible; not: it is not, so after the
   presence timeout it is ``offline`` and gets no offers. Either way its ``a2a`` status block
   (``{ok, error?, at}``) says so when it changes, and control_list_agents shows it.
2. **Dispatch.** Each task offered to it that has no remote record yet: the record's conditional
   put (relaynet.store.a2a.take) is the lease, then the hub accepts the offer as the instance and
   sends ``SendMessage`` with ``returnImmediately``: the objective as the first text part, each
   acceptance criterion as a further one (the inverse of 13.3's inbound mapping), the Relaynet
   task id as ``messageId`` and ``metadata.relaynetTaskId``. A run that dies between the
   acceptance and the answer leaves ``sent`` false and the next run sends again with the same
   ``messageId`` (at least once; a remote that deduplicates on ``messageId`` sees it once).
3. **Mirror.** Each remote record due (``nextPollAt``): ``GetTask`` and the remote state applied
   to the Relaynet task as its assignee would (:func:`_mirror`): WORKING -> working;
   INPUT_REQUIRED and AUTH_REQUIRED -> blocked with the status message as the reason; COMPLETED
   -> each artifact ``url`` part published as an artifact of the task, then completed with the
   status message and the text parts as evidence; FAILED, REJECTED and CANCELED -> failed with
   the reason. A remote that answered ``SendMessage`` with a ``Message`` (no task) completed it
   there and then. Polls back off from :data:`BASE_POLL_MS` doubling to :data:`MAX_POLL_MS`
   while nothing changes, and start again from the base when something does.
4. **Cancel.** A Relaynet task cancelled by its creator (a terminal state the bridge did not
   make) becomes ``CancelTask`` on the remote (TaskNotCancelable and TaskNotFound are fine: the
   remote had finished or forgotten it), and its record is dropped.
5. **Push.** When the hub can be reached (``RELAYNET_PUBLIC_URL``) and the remote's card says
   ``pushNotifications``, SendMessage carries a push config (:func:`push_url`, a fresh token whose
   SHA-256 the record keeps). A notification the token proves (:func:`receive_push`, the
   ``A2aPushInFunction`` route) puts a push receipt; its stream record runs the bridge for that
   member with the receipt (``pushed``), and the run follows that task at once whatever its poll
   backoff; a run that finds the task's lease held leaves the receipt to the holder, which reads
   it once it lets go (:func:`_after_release`). The notification is only a hint: the state applied is what GetTask answers, so a
   notification's body is never trusted beyond naming the task. Polls go on as before, the
   backstop for a notification that never came (A2A push is best effort).

A run touches a remote record only while it holds the record's lease (relaynet.store.a2a,
:data:`LEASE_MS`), so of overlapping runs (the schedule's, an offer's, each notification's) one
sends or mirrors a task at a time: a COMPLETED is mirrored, and its artifacts published, once.

Every move goes through relaynet.tasks.update as the member's instance, so the state machine,
history, claims release and notifications are exactly those of any other assignee.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import secrets
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from aws_lambda_powertools import Logger

from relaynet import claims, clock, tasks
from relaynet.a2a import remote as rmt
from relaynet.directory import Directory, load
from relaynet.config import settings
from relaynet.errors import NotFound, RelaynetError, Unauthenticated
from relaynet.identity import Principal, touch
from relaynet.models.worker import PublishArtifactRequest, TaskUpdateRequest
from relaynet.store import a2a as store
from relaynet.store.keys import mailbox_pk
from relaynet.taskstate import TERMINAL

log = Logger(child=True)

WORKERS = 8  # threads of one member's tasks (remote calls and their writes) in one run
BASE_POLL_MS = 2_000
#: How long a run holds a remote record's lease (relaynet.store.a2a.lease) while it sends or
#: follows that task: two remote calls of TIMEOUT_S and the Relaynet writes fit in it, and a run
#: that died holding it delays that task by this much at most.
LEASE_MS = 30_000
#: Leases one job takes of one record in a row: a notification that comes while a run follows the
#: task is followed by that run once it lets go (no other run could take it); past this many the
#: polls carry on.
FOLLOW_ROUNDS = 4
PUSH_CONFIG_ID = "relaynet"
MAX_POLL_MS = 60_000
REASON_MAX = 8_000  # a reason/evidence is at most 8192 characters (TaskUpdateRequest)
#: A2A states that end a remote task, and the Relaynet move each makes.
_FINAL = {"TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
          "TASK_STATE_REJECTED": "failed", "TASK_STATE_CANCELED": "failed"}
_BLOCKING = ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED")
_GONE = (-32001, -32002)  # TaskNotFoundError, TaskNotCancelableError: nothing left to cancel


def run(now_ms: int | None = None, mailboxes: set[str] | None = None,
        pushed: list[dict[str, Any]] | None = None) -> dict[str, int]:
    """One bridge run over every A2A member (the module's steps), or, given ``mailboxes`` or
    ``pushed`` (what the stream brought), over the members they name: ``mailboxes`` are mailbox
    partition keys (``NET#<net>#MBOX#I#<instance>``, of offers), ``pushed`` push receipts
    (``{networkId, instanceId, taskId, at}``, relaynet.store.a2a.note_push), whose tasks are
    followed at once. Returns counts: ``members``, ``unreachable``, ``sent``, ``polled``,
    ``moved``, ``cancelled``, ``pushed`` (receipts followed), ``errors``. An error in one member
    or task is logged and counted; the run goes on with the next."""
    stats = {"members": 0, "unreachable": 0, "sent": 0, "polled": 0, "moved": 0, "cancelled": 0, "pushed": 0,
             "errors": 0}
    receipts: dict[tuple[str, str], dict[str, int]] = {}
    for r in pushed or []:
        receipts.setdefault((r["networkId"], r["instanceId"]), {})[r["taskId"]] = int(r["at"])
    by_net: dict[str, list[dict[str, Any]]] = {}
    for member in store.members():
        key = (member["networkId"], member["instanceId"])
        if (mailboxes is None and pushed is None or key in receipts
                or mailbox_pk(key[0], {"instanceId": key[1]}) in (mailboxes or ())):
            by_net.setdefault(member["networkId"], []).append(member)
    for net, members in by_net.items():
        d = load(net)
        for member in members:
            stats["members"] += 1
            try:
                _member(d, member, clock.now_ms() if now_ms is None else now_ms, stats,
                        receipts.get((net, member["instanceId"]), {}))
            except Exception:  # one broken member must not stop the others
                stats["errors"] += 1
                log.exception("a2a bridge: member failed", extra={"networkId": net, "agent": member["agent"]})
    return stats


def _member(d: Directory, member: dict[str, Any], now: int, stats: dict[str, int], pushed: dict[str, int]) -> None:
    agent, inst = d.agents.get(member["agent"]), d.instances.get(member["instanceId"])
    if not agent or not agent.get("a2a") or not inst or inst.get("status") == "stopped":
        return
    config = agent["a2a"]
    principal = Principal("instance", d.network_id, inst["id"], inst["agent"])
    try:
        remote = rmt.resolve(config["url"], config.get("authentication"))
    except rmt.RemoteError as exc:
        stats["unreachable"] += 1
        _status(d.network_id, inst, {"ok": False, "error": exc.message}, now)
        return
    touch(principal, now)
    _status(d.network_id, inst, {"ok": True}, now)
    records = {rec["taskId"]: rec for rec in store.remotes(d.network_id, inst["id"])}
    active, held = set(inst.get("active") or ()), set(inst.get("held") or ())
    jobs: list[Callable[[dict[str, int]], None]] = [
        lambda tally, task_id=task_id: _dispatch(principal, remote, config, task_id, now, tally)
        for task_id in sorted(active - held - set(records))]
    # followed in this run whatever its poll backoff says: a record whose task left the instance's
    # active set (it ended in Relaynet: its creator cancelled it, so CancelTask leaves at once),
    # and one the remote notified about (if this run is the one that consumes the receipt)
    jobs += [lambda tally, rec=rec: _follow_leased(principal, remote, config, rec, now, tally,
                                                   rec["taskId"] not in active, pushed.get(rec["taskId"]))
             for rec in records.values()
             if rec["taskId"] not in active or rec["taskId"] in pushed or int(rec.get("nextPollAt", 0)) <= now]
    _in_parallel(jobs, stats)


def _in_parallel(jobs: list[Callable[[dict[str, int]], None]], stats: dict[str, int]) -> None:
    """Run each task's job on :data:`WORKERS` threads (each in a copy of the caller's context, so
    the entry point's declared DynamoDB actions hold in it) and add their counts to ``stats``; a
    job that raises is logged and counted in ``errors``. The tasks are independent: each has its
    own record and its own Relaynet task."""
    def run(job: Callable[[dict[str, int]], None]) -> Counter[str]:
        tally: Counter[str] = Counter()
        try:
            job(tally)
        except Exception:  # one broken task must not stop the others
            tally["errors"] += 1
            log.exception("a2a bridge: task failed")
        return tally

    if not jobs:
        return
    with ThreadPoolExecutor(min(WORKERS, len(jobs))) as pool:
        # the copies are made here, on the caller's thread: a worker's own context has no declaration
        futures = [pool.submit(contextvars.copy_context().run, run, job) for job in jobs]
        for future in futures:
            for key, n in future.result().items():
                stats[key] += n


def _status(net: str, inst: dict[str, Any], status: dict[str, Any], now: int) -> None:
    old = inst.get("a2a") or {}
    if (old.get("ok"), old.get("error")) != (status.get("ok"), status.get("error")):
        store.set_status(net, inst["id"], {**status, "at": clock.iso(now)})


def _update(p: Principal, task_id: str, status: str, reason: str | None = None) -> None:
    tasks.update(p, TaskUpdateRequest(taskId=task_id, status=status, reason=reason), on_terminal=claims.release_for_task)


def _message(task: dict[str, Any]) -> dict[str, Any]:
    parts = [{"text": task["objective"]}, *({"text": c} for c in task.get("acceptanceCriteria") or [])]
    return {"messageId": task["id"], "role": "ROLE_USER", "parts": parts,
            "metadata": {"relaynetTaskId": task["id"], "relaynetNetworkId": task["networkId"],
                         "title": task["title"]}}


def _dispatch(p: Principal, remote: rmt.RemoteAgent, config: dict[str, Any], task_id: str, now: int,
              stats: dict[str, int]) -> None:
    task = tasks.load_task(p.network_id, task_id)
    if task["state"] != "offered" or task.get("assignee") != p.instance_id:
        return
    token = _push_token(remote)  # its digest rides the record's first put
    rec = store.take(p.network_id, p.instance_id, task_id, now, secrets.token_hex(8), LEASE_MS,
                     _digest(token) if token else None)
    if rec is None:
        return  # another run holds it
    try:
        _update(p, task_id, "accepted")
    except RelaynetError as exc:  # the offer expired or the task was cancelled meanwhile
        log.info("a2a bridge: offer not taken", extra={"taskId": task_id, "reason": exc.message})
        store.drop(rec)
        return
    _send(p, remote, config, task, rec, now, stats, token)
    if token:  # a notification that came before SendMessage answered may name a newer state
        _after_release(p, remote, config, rec, now, stats)


def _follow_leased(p: Principal, remote: rmt.RemoteAgent, config: dict[str, Any], rec: dict[str, Any], now: int,
                   stats: dict[str, int], forced: bool, pushed_at: int | None, rounds: int = FOLLOW_ROUNDS) -> None:
    """Follow the remote record ``rec`` (a copy from the run's Query) while holding its lease:
    taken (relaynet.store.a2a.lease, which answers the record as stored now), the push receipt
    put at ``pushed_at`` consumed, the task followed (:func:`_follow`, whose last write lets the
    lease go) when ``forced``, this job consumed the receipt or the record is still due, then
    :func:`_after_release`. A lease another run holds ends the job: that run looks for receipts
    when it lets go. A receipt already consumed was followed by the run that consumed it, after
    it was put (that run held the lease first), so it is not followed again."""
    held = store.lease(rec, secrets.token_hex(8), max(now, clock.now_ms()), LEASE_MS)
    if held is None:
        return
    notified = pushed_at is not None and store.consume_push(p.network_id, p.instance_id, held["taskId"], pushed_at)
    stats["pushed"] += notified
    if forced or notified or int(held.get("nextPollAt", 0)) <= now:
        _follow(p, remote, config, held, now, stats)
    else:  # followed since this run's Query (or the receipt was): nothing is due
        store.save(held)
    if rounds > 1:
        _after_release(p, remote, config, held, now, stats, rounds - 1)


def _after_release(p: Principal, remote: rmt.RemoteAgent, config: dict[str, Any], rec: dict[str, Any], now: int,
                   stats: dict[str, int], rounds: int = FOLLOW_ROUNDS) -> None:
    """After a run let go of ``rec``'s lease: a push receipt put meanwhile (whose own run found
    the lease held and gave up) is followed now. Looking only after letting go closes the gap: a
    receipt put earlier is seen here, one put later finds the lease free."""
    if not rec.get("pushTokenHash"):
        return
    receipt = store.receipt(p.network_id, p.instance_id, rec["taskId"])
    if receipt:
        _follow_leased(p, remote, config, rec, now, stats, True, int(receipt["at"]), rounds)


def push_url(public_url: str, net: str, inst_id: str, task_id: str) -> str:
    """Where a remote posts its notifications about ``task_id`` (docs/protocol.md 13.4):
    ``<public_url>/a2a/<network>/push/<instance>/<task>``."""
    return f"{public_url.rstrip('/')}/a2a/{net}/push/{inst_id}/{task_id}"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _push_token(remote: rmt.RemoteAgent) -> str | None:
    """A fresh push token (module step 5), or None when the hub cannot be reached
    (``RELAYNET_PUBLIC_URL`` unset) or the remote's card takes no push config."""
    return secrets.token_urlsafe(32) if settings().public_url and remote.push else None


def receive_push(net: str, inst_id: str, task_id: str, token: str | None, now_ms: int | None = None) -> None:
    """A notification about the remote task the bridge follows for ``task_id`` (module step 5):
    ``token`` is its ``X-A2A-Notification-Token``. Puts the push receipt that runs the bridge for
    it. Raises NotFound when no remote task of that member is followed for ``task_id`` (it has
    settled, or never was) and Unauthenticated when ``token`` is missing or is not the one the
    bridge gave (a record sent without a push config has none); neither writes anything."""
    rec = store.remote(net, inst_id, task_id)
    if rec is None:
        raise NotFound(f"no remote A2A task is followed for task {task_id} of instance {inst_id} in network "
                       f"{net}: it has settled, or never was")
    expected = rec.get("pushTokenHash")
    if not token or not expected or not hmac.compare_digest(_digest(token), str(expected)):
        raise Unauthenticated("X-A2A-Notification-Token is missing or is not the token of this task's push config")
    store.note_push(net, inst_id, task_id, clock.now_ms() if now_ms is None else now_ms)


def _send(p: Principal, remote: rmt.RemoteAgent, config: dict[str, Any], task: dict[str, Any],
          rec: dict[str, Any], now: int, stats: dict[str, int], token: str | None = None) -> None:
    """SendMessage for ``task`` (module step 2) and its answer applied. ``token`` is the push token
    whose digest ``rec`` already holds; without one (a send again after a run died) a fresh token's
    digest is saved first, so a notification that comes before the answer is proven."""
    params: dict[str, Any] = {"message": _message(task), "configuration": {"returnImmediately": True}}
    if token is None:
        token = _push_token(remote)
        if token:
            rec["pushTokenHash"] = _digest(token)
            store.save(rec, release=False)
    if token:
        params["configuration"]["taskPushNotificationConfig"] = {
            "id": PUSH_CONFIG_ID, "url": push_url(settings().public_url or "", p.network_id, p.instance_id, task["id"]),
            "token": token}
    try:
        result = rmt.call(remote, "SendMessage", params, config.get("authentication"))
    except rmt.RemoteError as exc:
        if exc.code is not None:  # the remote refused the task itself: it will not take it later
            _settle(p, task["id"], "failed", f"the A2A agent {remote.name!r} refused the task ({exc.code}): {exc.message}")
            store.drop(rec)
            stats["moved"] += 1
            return
        if exc.denied:  # wrong credentials: no retry will be let in
            _settle(p, task["id"], "failed", f"the A2A agent {remote.name!r} was not sent the task: {exc.message}")
            store.drop(rec)
            stats["moved"] += 1
            return
        _backoff(rec, now, exc.message, changed=False)
        return
    stats["sent"] += 1
    rec["sent"] = True
    if isinstance(result.get("task"), dict):
        remote_task = result["task"]
        rec["remoteTaskId"], rec["contextId"] = remote_task.get("id"), remote_task.get("contextId")
        _apply(p, remote, task["id"], rec, remote_task, now, stats)
    else:  # a Message: the remote answered at once, no task to follow
        text = _texts((result.get("message") or {}).get("parts"))
        _settle(p, task["id"], "completed", text or f"answered by the A2A agent {remote.name!r}")
        store.drop(rec)
        stats["moved"] += 1


def _follow(p: Principal, remote: rmt.RemoteAgent, config: dict[str, Any], rec: dict[str, Any], now: int,
            stats: dict[str, int]) -> None:
    task = tasks.load_task(p.network_id, rec["taskId"])
    auth = config.get("authentication")
    if task["state"] in TERMINAL:  # cancelled by its creator (the bridge drops records it settles)
        if rec.get("remoteTaskId") and task["state"] == "cancelled":
            try:
                rmt.call(remote, "CancelTask", {"id": rec["remoteTaskId"]}, auth)
            except rmt.RemoteError as exc:
                if exc.code not in _GONE:
                    _backoff(rec, now, exc.message, changed=False)
                    return
            stats["cancelled"] += 1
        store.drop(rec)
        return
    if not rec.get("sent"):
        _send(p, remote, config, task, rec, now, stats)
        return
    stats["polled"] += 1
    try:
        remote_task = rmt.call(remote, "GetTask", {"id": rec["remoteTaskId"], "historyLength": 0}, auth)
    except rmt.RemoteError as exc:
        if exc.code == -32001 or exc.denied:
            _settle(p, task["id"], "failed", exc.message if exc.denied else
                    f"the A2A agent {remote.name!r} no longer knows task {rec['remoteTaskId']}")
            store.drop(rec)
            stats["moved"] += 1
        else:
            _backoff(rec, now, exc.message, changed=False)
        return
    _apply(p, remote, task["id"], rec, remote_task, now, stats)


def _apply(p: Principal, remote: rmt.RemoteAgent, task_id: str, rec: dict[str, Any], remote_task: dict[str, Any],
           now: int, stats: dict[str, int]) -> None:
    """Mirror ``remote_task`` onto the Relaynet task and keep ``rec`` (its lease let go) or drop it
    (the remote task ended)."""
    status = remote_task.get("status") or {}
    state = str(status.get("state") or "")
    changed = state != rec.get("state")
    if changed:
        _mirror(p, remote, task_id, rec, remote_task, state, _texts((status.get("message") or {}).get("parts")))
        stats["moved"] += 1
    if state in _FINAL:
        store.drop(rec)
        return
    rec["state"] = state
    _backoff(rec, now, None, changed)


def _mirror(p: Principal, remote: rmt.RemoteAgent, task_id: str, rec: dict[str, Any], remote_task: dict[str, Any],
            state: str, said: str) -> None:
    """The Relaynet moves for the remote's ``state`` (the module's step 3), from wherever the
    Relaynet task is now; a move the task is already past is skipped."""
    current = tasks.load_task(p.network_id, task_id)["state"]
    name = remote.name
    if state == "TASK_STATE_WORKING" and current in ("accepted", "blocked"):
        _update(p, task_id, "working")
    elif state in _BLOCKING and current in ("accepted", "working"):
        _update(p, task_id, "blocked", said or f"the A2A agent {name!r} needs input ({state})")
    elif state == "TASK_STATE_COMPLETED":
        texts = _publish(p, task_id, rec, remote_task.get("artifacts") or [])
        store.save(rec, release=False)  # a run that dies now does not publish these again
        _settle(p, task_id, "completed", "\n\n".join(t for t in [said, *texts] if t)
                or f"completed by the A2A agent {name!r}")
    elif state in _FINAL:
        _settle(p, task_id, "failed", said or f"the A2A agent {name!r} ended the task: {state}")


def _settle(p: Principal, task_id: str, final: str, reason: str) -> None:
    """Move the task to ``final`` (completed or failed) through working when needed."""
    current = tasks.load_task(p.network_id, task_id)["state"]
    if current in TERMINAL:
        return
    if current in ("accepted", "blocked"):
        _update(p, task_id, "working")
    _update(p, task_id, final, reason[:REASON_MAX])


def _publish(p: Principal, task_id: str, rec: dict[str, Any], artifacts: list[Any]) -> list[str]:
    """Publish each artifact's ``url`` parts (once: ``rec['artifacts']`` remembers them) and
    return the text of its text parts, ``"<name>: <text>"``."""
    from relaynet import artifacts as arts

    texts, done = [], set(rec.get("artifacts") or ())
    for art in artifacts:
        if not isinstance(art, dict):
            continue
        label = str(art.get("name") or art.get("artifactId") or "artifact")[:200]
        for i, part in enumerate(art.get("parts") or []):
            if not isinstance(part, dict):
                continue
            if part.get("text"):
                texts.append(f"{label}: {part['text']}")
            key = f"{art.get('artifactId')}#{i}"
            if part.get("url") and key not in done:
                try:
                    arts.publish(p, PublishArtifactRequest(uri=str(part["url"]), label=str(part.get("filename") or label)[:200],
                                                           taskId=task_id))
                except RelaynetError as exc:  # a URI Relaynet does not take: say so in the evidence
                    texts.append(f"{label}: {part['url']} (not published: {exc.message})")
                done.add(key)
    rec["artifacts"] = sorted(done)
    return texts


def _texts(parts: Any) -> str:
    return "\n".join(str(part["text"]) for part in parts or [] if isinstance(part, dict) and part.get("text"))


def _backoff(rec: dict[str, Any], now: int, error: str | None, changed: bool) -> None:
    delay = BASE_POLL_MS if changed or not rec.get("delayMs") else min(MAX_POLL_MS, int(rec["delayMs"]) * 2)
    rec["delayMs"], rec["nextPollAt"] = delay, now + delay
    if error:
        rec["lastError"] = error[:500]
    else:
        rec.pop("lastError", None)
    store.save(rec)
