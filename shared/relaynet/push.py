"""Webhooks (docs/protocol.md 10.3): tell an instance's push endpoint that mail, a task offer or a
wake-up arrived for it, signed, retried, and recorded where a representative sees it.

- **Configs** have A2A's push-notification-config shape (``url``, ``token``, optional
  ``authentication {schemes, credentials}``). The operator sets one per agent definition in the
  network spec (``push``); an instance sets its own with ``PUT /v1/push``, which wins over its
  definition's. ``token`` is the HMAC secret: stored, never sent, never shown.
- **Events** come from the table's change stream: every mailbox entry put (an INSERT into the
  mailbox view, relaynet.store.mailboxes.mailbox_item) is one piece of mail. An instance mailbox entry
  notifies that instance; an agent mailbox entry notifies each non-stopped instance of the agent
  except its sender. Each (message, instance) with a config is one delivery:
  ``{event, networkId, instanceId, messageId, taskId?, kind, createdAt, deliveryId}`` where
  ``event`` is ``wake`` (a control_wake_agent notice), ``task_offer`` or ``message``. Never the
  body: the receiver fetches mail with ``network_inbox``.
- **Signing** (relaynet.webhooks): ``X-Relaynet-Timestamp`` (Unix seconds) and
  ``X-Relaynet-Signature: v1=<hex HMAC-SHA256("<timestamp>.<body>", token)>``, timestamped at
  each attempt; the receiver refuses anything older than 5 minutes.
- **Retries**: the first attempt is made by whichever path reaches the mailbox entry first,
  the write's own (push at the write, docs/architecture.md) or the stream's, and never waits:
  :func:`take_first_attempt` puts the delivery item conditionally (a lease, due for a retry in
  :data:`LEASE_MS` should the taker die), the other path finds it and sends nothing, and a
  success leaves it as a ``delivered`` marker until the stream can no longer carry the entry
  (:data:`DELIVERED_KEEP_SECONDS`). A failed attempt (no 2xx within ``push_timeout``) lists
  the delivery item as due for a retry (relaynet.store.push), with delays ``base, 2 base, 4 base, ...`` from the first attempt
  (``RELAYNET_PUSH_RETRY_BASE_SECONDS``, 30) while less than ``RELAYNET_PUSH_RETRY_WINDOW_SECONDS``
  (900) has passed; :func:`retry_due` (the scheduled push-retry function) makes the retries. The
  attempt at or after the window's end that fails marks the delivery ``failed``.
- **Status**: every attempt records ``pushLastStatus`` (the HTTP status, 0 for none),
  ``pushLastAttemptAt`` and ``pushLastError`` on the instance item, a success
  ``pushLastDeliveredAt``, a delivery marked failed adds one to ``pushFailures``;
  relaynet.push_view.status_view shows them in control_list_agents and network_whoami.
- **Targets**: in AWS only ``https`` URLs whose host resolves to public addresses only (checked
  when set, by literal, and before every attempt, by resolution); redirects are not followed.
  With ``RELAYNET_PUSH_ALLOW_LOOPBACK`` (the local stack) ``http`` to a loopback host and private
  addresses are allowed too.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import socket
import time
import urllib.parse
from typing import Any

from relaynet import clock, webhooks
from relaynet.config import settings
from relaynet.directory import load
from relaynet.errors import InvalidArgument
from relaynet.identity import Principal
from relaynet.identity import status as instance_status
from relaynet.push_view import effective, public_config
from relaynet.store import directory as dir_store
from relaynet.store import mailboxes as mail_store
from relaynet.store import push as store

LEASE_MS = 60_000          # a retry run owns a due delivery this long (longer than one attempt)
FAILED_KEEP_SECONDS = 7 * 24 * 3600
DELIVERED_KEEP_SECONDS = 2 * 24 * 3600  # a delivered marker outlives the stream's 24 h of records
RETRY_BATCH = 100          # due deliveries one retry run takes at most
USER_AGENT = "relaynet-webhooks/1"


# --------------------------------------------------------------------------- configs

def _bad(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"{field}: {message}", [{"field": field, "message": message}])


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _is_loopback_host(host: str) -> bool:
    host = host.rstrip(".").lower()
    ip = _ip(host)
    return host == "localhost" or host.endswith(".localhost") or (ip is not None and ip.is_loopback)


def check_url(url: str, field: str = "url") -> str:
    """``url`` if it may be a push target here, else InvalidArgument naming ``field``.

    Rules (docs/protocol.md 10.3): an absolute ``https`` URL with a host and no user info; in
    AWS its host may not be a loopback, private, link-local or reserved address literal, nor
    ``localhost``. With ``push_allow_loopback`` (local stack) ``http`` to a loopback host is
    allowed and private addresses too.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    local = settings().push_allow_loopback
    if parts.scheme not in ("https", "http") or not host:
        raise _bad(field, "must be an absolute https URL")
    if parts.username is not None or parts.password is not None:
        raise _bad(field, "must not carry user info (use authentication)")
    if parts.scheme == "http" and not (local and _is_loopback_host(host)):
        raise _bad(field, "must be https" + (" (http only to a loopback host)" if local else ""))
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise _bad(field, "has an invalid port") from None
    if not local:
        ip = _ip(host)
        if _is_loopback_host(host) or (ip is not None and not ip.is_global):
            raise _bad(field, "must not be a loopback, private, link-local or reserved address")
    return url


@functools.cache
def outbound():
    """The process's one ``httpx.Client`` for calls to agents' URLs (webhook pushes, A2A remotes'
    cards and JSON-RPC): thread-safe, its connection pool and TLS context made once per process
    (a Lambda container keeps it across invocations). A client per call built a TLS context each
    time, a third of the local hub's CPU under bench_a2a_bridge --push. Callers pass each
    request's timeout and ``follow_redirects=False``, and check :func:`target_error` first."""
    import httpx

    return httpx.Client()


def close_outbound() -> None:
    """Close and forget :func:`outbound`'s client if it was made (after a SnapStart restore,
    relaynet.snapstart); the next call makes a new one."""
    if outbound.cache_info().currsize:
        client = outbound()
        outbound.cache_clear()
        client.close()


def target_error(url: str) -> str | None:
    """Why ``url`` may not be contacted now, or None: :func:`check_url`'s rules again, and in
    AWS every address its host resolves to must be public (a name that resolves to a private
    address is refused here, before connecting)."""
    try:
        check_url(url)
    except InvalidArgument as exc:
        return exc.message
    if settings().push_allow_loopback:
        return None
    parts = urllib.parse.urlsplit(url)
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"cannot resolve {parts.hostname}: {exc}"
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        if not ip.is_global or ip.is_multicast:
            return f"{parts.hostname} resolves to a non-public address ({ip})"
    return None


def config_item(url: str, token: str, authentication: dict[str, Any] | None) -> dict[str, Any]:
    """The stored config (``authentication`` as ``{schemes, credentials?}``, or absent)."""
    out: dict[str, Any] = {"url": url, "token": token}
    if authentication:
        out["authentication"] = {key: v for key, v in authentication.items() if v is not None}
    return out


def set_config(principal: Principal, req: Any) -> dict[str, Any]:
    """``PUT /v1/push``: this instance's own config (replaces the previous one).
    Returns ``{push: {url, authentication?}, source: "instance"}``. Raises InvalidArgument."""
    check_url(req.url)
    auth = req.authentication.model_dump() if req.authentication is not None else None
    config = config_item(req.url, req.token, auth)
    dir_store.mark_push_configured(principal.network_id)  # first: the notifier then looks (has_push_config)
    store.set_instance_config(principal.network_id, principal.instance_id, config)
    return {"push": public_config(config), "source": "instance"}


def delete_config(principal: Principal) -> dict[str, Any]:
    """``DELETE /v1/push``: remove this instance's own config; ``{removed: bool}`` (false when it
    had none). Its definition's config, if any, applies again."""
    return {"removed": store.remove_instance_config(principal.network_id, principal.instance_id)}


# --------------------------------------------------------------------------- events

def delivery_id(message_id: str, instance_id: str) -> str:
    """The same for every attempt of one (message, instance): receivers deduplicate on it."""
    return "dlv_" + hashlib.sha256(f"{message_id}#{instance_id}".encode("utf-8")).hexdigest()[:32]


def event_for(net: str, entry: dict[str, Any], instance_id: str) -> dict[str, Any]:
    """The event a mailbox entry makes for one instance (never the message body)."""
    message_id = mail_store.message_id(entry)
    kind = entry["kind"]
    name = "wake" if entry.get("wakeReason") else "task_offer" if kind == "task_offer" else "message"
    event = {"event": name, "networkId": net, "instanceId": instance_id, "messageId": message_id, "kind": kind,
             "createdAt": entry.get("createdAt"), "deliveryId": delivery_id(message_id, instance_id)}
    if entry.get("taskId"):
        event["taskId"] = entry["taskId"]
    return event


def post(config: dict[str, Any], event: dict[str, Any]) -> tuple[int, str | None]:
    """One signed POST of ``event`` to ``config``: ``(HTTP status or 0, error or None)``."""
    auth = config.get("authentication") or {}
    authorization = f"{auth['schemes'][0]} {auth['credentials']}" if auth.get("credentials") and auth.get("schemes") \
        else None
    return signed_post(config["url"], config["token"], event, authorization,
                       {"X-Relaynet-Event": event["event"], "X-Relaynet-Delivery": event["deliveryId"]})


def signed_post(url: str, token: str, doc: dict[str, Any], authorization: str | None,
                headers: dict[str, str]) -> tuple[int, str | None]:
    """POST ``doc`` as JSON to ``url``, signed with ``token`` (relaynet.webhooks: timestamp and
    HMAC headers of this attempt), with ``Authorization: <authorization>`` when given and
    ``headers``; the target rules of :func:`target_error` first, no redirects, the push timeout.
    Returns ``(HTTP status or 0, error or None)``: a 2xx is success; never raises for the
    receiver's failure."""
    import httpx

    problem = target_error(url)
    if problem:
        return 0, problem
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    stamp = int(time.time())
    sent = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers,
            webhooks.TIMESTAMP_HEADER: str(stamp), webhooks.SIGNATURE_HEADER: webhooks.sign(token, stamp, body)}
    if authorization:
        sent["Authorization"] = authorization
    try:
        response = outbound().post(url, content=body.encode("utf-8"), headers=sent,
                                   timeout=settings().push_timeout, follow_redirects=False)
    except httpx.HTTPError as exc:
        return 0, f"{type(exc).__name__}: {str(exc)[:200]}"
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}"


def _due(first_ms: int, attempts: int) -> int:
    """When retry number ``attempts`` (1-based) is due: base x (2^attempts - 1) after the first
    attempt, at most the window's end."""
    cfg = settings()
    offset = cfg.push_retry_base * (2 ** attempts - 1)
    return first_ms + int(min(offset, cfg.push_retry_window) * 1000)


def next_attempt_at(first_ms: int, failures: int, now_ms: int) -> int | None:
    """When the retry after ``failures`` failed attempts is due (ms; never before ``now_ms``), or
    None when the retry window that began at ``first_ms`` is over (docs/protocol.md 10.3: base,
    2 base, 4 base... after the first attempt, for ``RELAYNET_PUSH_RETRY_WINDOW_SECONDS``). The
    webhook deliveries and A2A push configs (relaynet.a2a.push) share it."""
    if now_ms - first_ms >= settings().push_retry_window * 1000:
        return None
    return max(_due(first_ms, failures), now_ms)


def _retrying(item: dict[str, Any], due: int) -> dict[str, Any]:
    """``item`` waiting for a retry due at ``due`` (ms), kept until the retry window that began
    at its first attempt is over, then :data:`FAILED_KEEP_SECONDS`."""
    return store.retrying(item, due, int(item["firstAttemptAt"]) // 1000 + int(settings().push_retry_window)
                          + FAILED_KEEP_SECONDS)


def take_first_attempt(net: str, inst_id: str, event: dict[str, Any], now_ms: int) -> bool:
    """Take the first attempt of ``event`` for ``inst_id``: a conditional put of its delivery
    item, leased as a retry due in :data:`LEASE_MS`. False when the item exists: the other path
    (the write's or the stream's, docs/architecture.md "Push at the write") made or is making the
    attempt. A taker that dies before its attempt leaves the lease to :func:`retry_due`, so no
    delivery is lost and none is made twice."""
    lease = _retrying(store.delivery(net, inst_id, event, attempts=0, firstAttemptAt=now_ms, lastAttemptAt=now_ms),
                      now_ms + LEASE_MS)
    return store.put_new(lease)


def attempt(net: str, inst_id: str, config: dict[str, Any], event: dict[str, Any], attempts: int = 0,
            first_ms: int | None = None) -> str:
    """Try one delivery now; schedule its retry or mark it failed. ``attempts`` is how many
    attempts failed before this one, ``first_ms`` when the first was made. The delivery item is
    left as a marker (``delivered``, expiring after :data:`DELIVERED_KEEP_SECONDS`, longer than a
    stream keeps its records) so a later path never sends it again. Returns ``"delivered"``,
    ``"retrying"`` or ``"failed"``."""
    now = clock.now_ms()
    first = now if first_ms is None else first_ms
    status, error = post(config, event)
    failures = attempts + (error is not None)
    item = store.delivery(net, inst_id, event, attempts=failures, firstAttemptAt=first, lastAttemptAt=now,
                          lastStatus=status)
    if error is None:
        store.put({**item, "state": "delivered", "ttl": now // 1000 + DELIVERED_KEEP_SECONDS})
        store.record_attempt(net, inst_id, status, None, now, False)
        return "delivered"
    item["lastError"] = error[:300]
    due = next_attempt_at(first, failures, now)
    final = due is None
    if due is None:
        item.update(state="failed", ttl=now // 1000 + FAILED_KEEP_SECONDS)
    else:
        item = _retrying(item, due)
    store.put(item)
    store.record_attempt(net, inst_id, status, error, now, final)
    return "failed" if final else "retrying"


def notify(entry: dict[str, Any]) -> dict[str, int]:
    """Deliver the events of one new mailbox entry (a stream INSERT's new image, at the write or
    from the stream); counts by outcome, ``duplicate`` for a delivery the other path took first
    (:func:`take_first_attempt`). Entries that are not mailbox entries are ignored. Raises on
    DynamoDB errors (the stream record is then retried), never on a receiver's failure."""
    parsed = mail_store.mailbox_of(entry)
    if parsed is None or mail_store.message_id(entry) is None or "kind" not in entry:
        return {}
    net, box = parsed
    if not dir_store.has_push_config(net):
        return {}
    d = load(net)
    if "instanceId" in box:
        inst = d.instances.get(box["instanceId"])
        targets = [inst] if inst is not None and instance_status(inst) != "stopped" else []
    else:
        targets = [i for i in d.instances_of(box["agent"])
                   if instance_status(i) != "stopped" and i["id"] != entry.get("senderInstance")]
    outcomes: dict[str, int] = {}
    for inst in targets:
        config, _ = effective(inst, d.agents.get(inst["agent"]))
        if config is None:
            continue
        event = event_for(net, entry, inst["id"])
        if take_first_attempt(net, inst["id"], event, clock.now_ms()):
            outcome = attempt(net, inst["id"], config, event)
        else:
            outcome = "duplicate"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


def retry_due(limit: int = RETRY_BATCH) -> dict[str, int]:
    """The scheduled push-retry run: every delivery whose retry is due, once. Each is leased
    first (a conditional update of its due key), so parallel runs never both send it; one
    whose instance is gone or stopped, or has no config any more, is dropped."""
    now = clock.now_ms()
    due = store.due(now, limit)
    dirs: dict[str, Any] = {}
    stats = {"due": len(due), "delivered": 0, "retrying": 0, "failed": 0, "dropped": 0}
    for item in due:
        net, inst_id = item["networkId"], item["instanceId"]
        if not store.lease(item, now + LEASE_MS):
            continue  # another run took it, or it was delivered (its marker has no due key)
        d = dirs.get(net) or dirs.setdefault(net, load(net))
        inst = d.instances.get(inst_id)
        live = inst is not None and instance_status(inst) != "stopped"
        config = effective(inst, d.agents.get(inst["agent"]))[0] if live else None
        if config is None:
            store.drop(item)
            stats["dropped"] += 1
            continue
        outcome = attempt(net, inst_id, config, item["event"], int(item["attempts"]), int(item["firstAttemptAt"]))
        stats[outcome] += 1
    return stats
