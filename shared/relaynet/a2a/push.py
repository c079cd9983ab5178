"""A2A push notification configs on Relaynet tasks, delivered as Relaynet's signed webhooks
(docs/protocol.md 13.6).

- **Configs**: ``CreateTaskPushNotificationConfig`` (A2A's ``TaskPushNotificationConfig``:
  ``taskId``, ``id`` (default the task id), ``url``, ``token``, ``authentication {scheme,
  credentials}``) on a task the endpoint's agent owns (relaynet.a2a.wire.belongs); Get, List
  and Delete. Configs are the caller's own (an instance: its agent's; a representative: its own),
  at most :data:`relaynet.store.a2a_push.MAX_PER_OWNER` per task; the same id replaces. The URL
  follows the webhook target rules (relaynet.push.check_url); ``token`` (16 to 256 characters) is
  required: it signs every POST, and is never shown again (answers carry ``{id, taskId, url,
  authentication: {scheme}}``).
- **What is sent**: for each change of the task a receiver has not had, the StreamResponses a
  stream would carry (relaynet.a2a.stream.updates: new artifacts, then a status update), each one
  POST of ``{"artifactUpdate": ...}`` or ``{"statusUpdate": ...}`` with A2A's
  ``X-A2A-Notification-Token: <token>``, Relaynet's ``X-Relaynet-Timestamp`` and
  ``X-Relaynet-Signature`` (relaynet.webhooks.verify checks them), ``X-Relaynet-Event:
  a2a_task``, ``X-Relaynet-Delivery`` (the same for every attempt of one event: deduplicate on
  it) and ``Authorization: <scheme> <credentials>`` when credentials are given.
- **When**: at each transition's history entry (the webhook notifier's stream filter selects the
  entries of tasks with a config; at the write locally). A config is leased while it is sent, so
  two paths never post one change twice; the sender that delivered reads the task again, so a
  change made meanwhile is not left behind (:func:`dispatch`). An artifact is pushed with the next transition (publishing
  writes no history entry), before the status that completes the task.
- **Retries**: a failed POST leaves the receiver's ``sent`` as it was and lists the config as due
  after ``base, 2 base, 4 base...`` (``RELAYNET_PUSH_RETRY_BASE_SECONDS``) from its first failure
  while ``RELAYNET_PUSH_RETRY_WINDOW_SECONDS`` has not passed (the scheduled push-retry run,
  :func:`retry_due`); after it, the config waits for the task's next change. Delivery is at least
  once.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from relaynet import clock
from relaynet import push as webhooks
from relaynet.a2a import stream, wire
from relaynet.a2a.wire import A2AError, PushConfig, PushConfigParams, belongs
from relaynet.errors import InvalidArgument
from relaynet.identity import Principal
from relaynet.store import a2a_push as store
from relaynet.store import events as event_store
from relaynet.tasks import artifact_view

LEASE_MS = 30_000  # a sender owns a config this long (longer than a few POSTs)
ROUNDS = 10        # reads of the task one sender makes at most while changes keep coming as it posts
EVENT = "a2a_task"
TOKEN_HEADER = "X-A2A-Notification-Token"
_CONFIG_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")


def owner(p: Principal) -> str:
    """Whose configs these are: an instance's agent (as ListTasks counts its tasks), or a
    representative."""
    return f"agent:{p.agent}" if p.kind == "instance" else f"rep:{p.rep}"


def _invalid(field: str, message: str) -> A2AError:
    return A2AError(wire.INVALID_PARAMS, f"{field}: {message}", {"fields": [{"field": field, "message": message}]})


def _public(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": item["configId"], "taskId": item["taskId"], "url": item["url"]}
    if item.get("authentication"):
        out["authentication"] = {"scheme": item["authentication"]["scheme"]}
    return out


def sent_of(view: dict[str, Any]) -> dict[str, Any]:
    """What a receiver has once it was sent ``view`` (an A2A Task view): its status signature
    (relaynet.a2a.stream.signature) and the artifact ids."""
    return {**stream.signature(view), "artifacts": [a["artifactId"] for a in view.get("artifacts") or []]}


def _view(task: dict[str, Any], artifacts: list[dict[str, Any]]) -> dict[str, Any]:
    return wire.task_view(task, [artifact_view(a) for a in artifacts], None, 0)


def check(params: PushConfig, where: str = "") -> None:
    """The checks of a config that need no read (``where`` prefixes the field names, e.g.
    ``configuration.taskPushNotificationConfig.``). Raises A2AError InvalidParams."""
    if params.id is not None and not _CONFIG_ID.fullmatch(params.id):
        raise _invalid(where + "id", "1 to 128 letters, digits or . _ : @ -")
    try:
        webhooks.check_url(params.url)
    except InvalidArgument as exc:
        raise _invalid(where + "url", exc.message.removeprefix("url: ")) from None
    if not params.token or not 16 <= len(params.token) <= 256:
        raise _invalid(where + "token", "16 to 256 characters: it signs every notification (X-Relaynet-Signature) "
                                        "and is sent as X-A2A-Notification-Token")


def create(p: Principal, agent: str, params: PushConfigParams) -> dict[str, Any]:
    """CreateTaskPushNotificationConfig: the stored config (without its token). The receiver
    is sent the changes after this call. Raises A2AError (InvalidParams: url, token, id, too
    many configs; TaskNotFound; UnsupportedOperation: a terminal task has nothing to push)."""
    check(params)
    config_id = params.id or params.taskId
    net = p.network_id
    task, artifacts, configs = store.partition(net, params.taskId)
    if task is None or not belongs(task, agent):
        raise wire.task_not_found(params.taskId, agent)
    view = _view(task, artifacts)
    if view["status"]["state"] in stream.TERMINAL:
        raise A2AError(wire.UNSUPPORTED_OPERATION, f"task {task['id']!r} is {task['state']}: it has no more "
                       "updates to push", {"taskId": task["id"]})
    mine = [c for c in configs if c["owner"] == owner(p) and c["configId"] != config_id]
    if len(mine) >= store.MAX_PER_OWNER:
        raise _invalid("id", f"at most {store.MAX_PER_OWNER} push notification configs per task and caller")
    fields: dict[str, Any] = {"url": params.url, "token": params.token}
    if params.authentication is not None:
        fields["authentication"] = params.authentication.model_dump(exclude_none=True)
    if not store.put(net, task["id"], owner(p), config_id, fields, sent_of(view), clock.now_iso()):
        raise wire.task_not_found(params.taskId, agent)  # the task went away since it was read
    return _public({"configId": config_id, "taskId": task["id"], **fields})


def _owned(p: Principal, agent: str, task_id: str) -> list[dict[str, Any]]:
    """The caller's configs of a task the endpoint shows (one Query of the task's partition).
    Raises A2AError TaskNotFound."""
    task, _, configs = store.partition(p.network_id, task_id)
    if task is None or not belongs(task, agent):
        raise wire.task_not_found(task_id, agent)
    return [c for c in configs if c["owner"] == owner(p)]


def get(p: Principal, agent: str, params: wire.PushConfigRef) -> dict[str, Any]:
    """GetTaskPushNotificationConfig: the caller's config ``id`` of the task. Raises A2AError
    TaskNotFound (no such task, or no such config of the caller's: A2A names no other error)."""
    for item in _owned(p, agent, params.taskId):
        if item["configId"] == params.id:
            return _public(item)
    raise A2AError(wire.TASK_NOT_FOUND, f"no push notification config {params.id!r} on task {params.taskId!r}",
                   {"taskId": params.taskId, "id": params.id})


def list_configs(p: Principal, agent: str, params: wire.ListPushConfigsParams) -> dict[str, Any]:
    """ListTaskPushNotificationConfigs: ``{configs, nextPageToken: ""}`` (the caller's, at most
    :data:`store.MAX_PER_OWNER`: one page). Raises A2AError TaskNotFound."""
    return {"configs": [_public(i) for i in _owned(p, agent, params.taskId)], "nextPageToken": ""}


def delete(p: Principal, agent: str, params: wire.PushConfigRef) -> dict[str, Any]:
    """DeleteTaskPushNotificationConfig: ``{}`` (google.protobuf.Empty), also when the config
    was already gone (idempotent, as the SDK's stores are). Raises A2AError TaskNotFound."""
    _owned(p, agent, params.taskId)
    store.delete(p.network_id, params.taskId, owner(p), params.id)
    return {}


# --------------------------------------------------------------------------- delivery

def delivery_id(item: dict[str, Any], event: dict[str, Any]) -> str:
    """The same for every attempt of one event to one config."""
    if "artifactUpdate" in event:
        what = "artifact:" + event["artifactUpdate"]["artifact"]["artifactId"]
    else:
        update = event["statusUpdate"]
        what = f"status:{update['metadata']['relaynet']['state']}:{(update['status'].get('message') or {}).get('messageId')}"
    key = f"{item['networkId']}#{item['taskId']}#{item['owner']}#{item['configId']}#{what}"
    return "dlv_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _post(item: dict[str, Any], event: dict[str, Any]) -> tuple[int, str | None]:
    auth = item.get("authentication") or {}
    authorization = f"{auth['scheme']} {auth['credentials']}" if auth.get("credentials") else None
    return webhooks.signed_post(item["url"], item["token"], event, authorization,
                                     {TOKEN_HEADER: item["token"], "X-Relaynet-Event": EVENT,
                                      "X-Relaynet-Delivery": delivery_id(item, event)})


def _send(item: dict[str, Any], events: list[dict[str, Any]], now_sent: dict[str, Any]) -> str:
    """Post ``events`` to one leased config, then record the outcome: ``delivered``,
    ``retrying`` or ``failed`` (the window is over)."""
    status, error = 0, None
    for event in events:
        status, error = _post(item, event)
        if error is not None:
            break
    now = clock.now_ms()
    if error is None:
        store.delivered(item, now_sent, status, now)
        return "delivered"
    attempts = int(item.get("attempts") or 0) + 1
    first = int(item.get("firstFailureAt") or now)
    due = webhooks.next_attempt_at(first, attempts, now)
    store.failed(item, status, error, attempts, first, due)
    return "failed" if due is None else "retrying"


def dispatch(net: str, task_id: str) -> dict[str, int]:
    """Send every config of the task the changes its receiver has not had (module docstring);
    counts by outcome (``delivered``, ``retrying``, ``failed``, ``busy``: another sender holds
    it or delivered since the read). Raises on DynamoDB errors, never on a receiver's failure.

    Only a sender that delivered reads the task again: a change committed before a sender that
    lost its lease read the task is seen by the holder's read after its delivery (the holder
    delivered after that read, or still held the lease then), and a holder whose POST failed
    leaves the config to :func:`retry_due`, which sends the task as it then is."""
    stats: dict[str, int] = {}
    for _ in range(ROUNDS):
        task, artifacts, configs = store.partition(net, task_id)
        if task is None or not configs:
            break
        view, again = _view(task, artifacts), False
        for item in configs:
            sent = item.get("sent") or {}
            events = stream.updates(sent, view, set(sent.get("artifacts") or []))
            now = clock.now_ms()
            if not events:
                if store.listed_for_retry(item) and store.lease(item, now, now + LEASE_MS):
                    store.delivered(item, sent_of(view), int(item.get("lastStatus") or 0), now)  # caught up
                continue
            if not store.lease(item, now, now + LEASE_MS):  # the holder reads again after it delivers
                stats["busy"] = stats.get("busy", 0) + 1
                continue
            outcome = _send(item, events, sent_of(view))
            stats[outcome] = stats.get(outcome, 0) + 1
            again = again or outcome == "delivered"
        if not again:
            break
    return stats


def notify(entry: dict[str, Any]) -> dict[str, int]:
    """The deliveries one committed history entry makes (a stream INSERT's new image, at the write
    or from the stream): only a task transition's entry marked ``a2aPush``; others give ``{}``."""
    net = event_store.network_of(entry)
    if net is None or not entry.get("a2aPush") or not entry.get("taskId"):
        return {}
    return dispatch(net, entry["taskId"])


def retry_due(limit: int = 100) -> dict[str, int]:
    """The scheduled retry run: each task with a config whose retry is due is dispatched once."""
    stats = {"due": 0}
    seen: set[tuple[str, str]] = set()
    for item in store.due(clock.now_ms(), limit):
        task = (item["networkId"], item["taskId"])
        if task in seen:
            continue
        seen.add(task)
        stats["due"] += 1
        for outcome, n in dispatch(*task).items():
            stats[outcome] = stats.get(outcome, 0) + n
    return stats
