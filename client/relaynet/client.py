"""The Relaynet Python SDK: a thin httpx client for ``POST /v1/tools/<name>`` (PROTOCOL.md 2).

Usage::

    from relaynet.client import RelaynetClient, ApiError

    with RelaynetClient("http://127.0.0.1:8787", "rn_inst_...") as hub:
        me = hub.whoami()
        sent = hub.ask("Can you review src/api?", to_agent="reviewer")
        try:
            hub.claim("src/api/**")
        except ApiError as e:
            if e.reason == "claim_conflict":
                print(e.details["conflicts"])

Every call answers the hub's JSON object on 2xx and raises :class:`ApiError` otherwise. The
convenience methods take snake_case Python arguments, send the protocol's camelCase names
(``to_agent`` -> ``toAgent``) and leave out arguments that are ``None``, so the hub applies its
defaults. :class:`AsyncRelaynetClient` is the same over ``httpx.AsyncClient`` (the MCP bridge
uses it); its convenience methods return awaitables.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Awaitable
from typing import Any, Generic, TypeVar

import httpx

from relaynet.client_version import __version__
from relaynet.client_tables import CREATING_WORKER_TOOLS, ENDPOINT_ROUTES

__all__ = ["ApiError", "RelaynetClient", "AsyncRelaynetClient", "CREATING_WORKER_TOOLS"]

USER_AGENT = f"relaynet-python/{__version__}"

# The protocol code an HTTP status stands for, used when an error body is not the envelope
# (a proxy's HTML page, an API Gateway message, an empty body).
_STATUS_CODES = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    429: "rate_limited",
    500: "internal",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


class ApiError(Exception):
    """A tool call that did not answer 2xx, or never got an answer.

    Attributes:
        status: the HTTP status, or ``0`` when no response arrived (connection refused, DNS
            failure, timeout).
        code: the protocol's error code (``invalid_argument``, ``unauthenticated``,
            ``permission_denied``, ``not_found``, ``conflict``, ``payload_too_large``,
            ``rate_limited``, ``internal``), or ``unavailable`` when the hub could not be
            reached or a gateway answered 502/503/504 without an envelope.
        message: the hub's human-readable message.
        details: the envelope's ``details`` object or ``None``; e.g. ``{"fields": [{"field",
            "message"}]}`` for 400, ``{"reason": "claim_conflict", "conflicts": [...]}`` for 409.
        retry_after: seconds from the ``Retry-After`` header (429, 409 ``in_progress``), or
            ``None``.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retry_after = retry_after

    @property
    def reason(self) -> str | None:
        """``details.reason`` (set on every 409 ``conflict``), else ``None``."""
        if isinstance(self.details, dict):
            reason = self.details.get("reason")
            return reason if isinstance(reason, str) else None
        return None

    @property
    def is_transport_error(self) -> bool:
        """True when no HTTP response arrived (``status == 0``): safe to retry an idempotent call."""
        return self.status == 0

    def __repr__(self) -> str:
        return (
            f"ApiError(status={self.status!r}, code={self.code!r}, message={self.message!r}, "
            f"details={self.details!r}, retry_after={self.retry_after!r})"
        )


# --------------------------------------------------------------------------- shared plumbing


def _parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; ``None`` if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_from_response(response: httpx.Response) -> ApiError:
    """Build an :class:`ApiError` from a non-2xx response, envelope or not."""
    status = response.status_code
    retry_after = _parse_retry_after(response.headers.get("retry-after"))
    fallback_code = _STATUS_CODES.get(status, "internal" if status >= 500 else "invalid_argument")
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else fallback_code
        message = err.get("message") if isinstance(err.get("message"), str) else ""
        details = err.get("details") if isinstance(err.get("details"), dict) else None
        return ApiError(status, code, message or response.reason_phrase or code, details, retry_after)
    # Not our envelope: API Gateway's {"message": "..."}, a proxy's HTML, or nothing.
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]
    else:
        text = response.text.strip() if response.content else ""
        message = text[:500] if text else ""
    message = message or f"HTTP {status} {response.reason_phrase}".strip()
    return ApiError(status, fallback_code, message, None, retry_after)


def _result_from_response(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a response, or raise :class:`ApiError`."""
    if not response.is_success:
        raise _error_from_response(response)
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        raise ApiError(
            response.status_code,
            "internal",
            f"the hub answered {response.status_code} with a body that is not JSON",
        ) from None
    if not isinstance(body, dict):
        raise ApiError(
            response.status_code,
            "internal",
            f"the hub answered {response.status_code} with JSON that is not an object",
        )
    return body


def _transport_error(exc: httpx.TransportError, url: str) -> ApiError:
    """``unavailable`` for a request that got no response."""
    if isinstance(exc, httpx.TimeoutException):
        message = f"timed out talking to the Relaynet hub at {url} ({type(exc).__name__})"
    else:
        message = f"cannot reach the Relaynet hub at {url}: {exc or type(exc).__name__}"
    return ApiError(0, "unavailable", message, {"exception": type(exc).__name__})


def _headers(token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _body(arguments: dict[str, Any] | None) -> bytes:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError(f"tool arguments must be a dict, not {type(arguments).__name__}")
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _request_headers(idempotency_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    return headers


def _args(**kwargs: Any) -> dict[str, Any]:
    """Drop ``None`` values (the hub applies its defaults to absent arguments)."""
    return {k: v for k, v in kwargs.items() if v is not None}


R = TypeVar("R")


class _WorkerTools(Generic[R]):
    """The 12 ``network_*`` tools (PROTOCOL.md 4) over :meth:`call`.

    ``R`` is ``dict`` for the sync client and ``Awaitable[dict]`` for the async one.
    """

    def call(
        self, tool: str, arguments: dict[str, Any] | None = None, *, idempotency_key: str | None = None
    ) -> R:  # pragma: no cover - implemented by the clients
        raise NotImplementedError

    def whoami(self) -> R:
        """``network_whoami``: ``{instance, agent, network}``."""
        return self.call("network_whoami", {})

    def discover(self, resource_key: str | None = None, action: str | None = None) -> R:
        """``network_discover``: ``{agents, groups, resources, recentTasks}``, plus ``candidates``
        when ``resource_key`` and/or ``action`` is given. A key that cannot be normalised is 400."""
        return self.call("network_discover", _args(resourceKey=resource_key, action=action))

    def ask(
        self,
        body: str,
        to_agent: str | None = None,
        *,
        to_instance: str | None = None,
        thread_id: str | None = None,
        subject: str | None = None,
        task_id: str | None = None,
        resource: str | None = None,
        idempotency_key: str | None = None,
    ) -> R:
        """``network_ask``: ``{messageId, threadId, recipients}``, ``recipients`` a list of
        addresses (``{"agent": name}`` per mailbox reached, a group's members each as an agent,
        or ``{"instanceId": id}``). ``to_agent`` is an agent name or group slug; ``to_instance``
        wins over it. Unknown recipient/thread/task is 404; a thread the caller is not part of is 403."""
        return self.call(
            "network_ask",
            _args(body=body, toAgent=to_agent, toInstance=to_instance, threadId=thread_id,
                  subject=subject, taskId=task_id, resource=resource),
            idempotency_key=idempotency_key,
        )

    def inbox(self) -> R:
        """``network_inbox``: ``{messages, more}``; each message is delivered once, oldest first."""
        return self.call("network_inbox", {})

    def reply(self, thread_id: str, body: str, *, idempotency_key: str | None = None) -> R:
        """``network_reply``: ``{messageId, threadId, recipients}`` (addresses, as :meth:`ask`);
        403 if not a participant."""
        return self.call("network_reply", _args(threadId=thread_id, body=body), idempotency_key=idempotency_key)

    def delegate(
        self,
        objective: str,
        *,
        title: str | None = None,
        acceptance_criteria: list[str] | None = None,
        to_agent: str | None = None,
        to_instance: str | None = None,
        resource: str | None = None,
        idempotency_key: str | None = None,
    ) -> R:
        """``network_delegate``: ``{taskId, state, assignee?}``. Without a target ``resource`` is
        required (400); an unknown target is 404."""
        return self.call(
            "network_delegate",
            _args(objective=objective, title=title, acceptanceCriteria=acceptance_criteria,
                  toAgent=to_agent, toInstance=to_instance, resource=resource),
            idempotency_key=idempotency_key,
        )

    def task_get(self, task_id: str) -> R:
        """``network_task_get``: ``{task}`` with history, progress, artifacts and claims."""
        return self.call("network_task_get", {"taskId": task_id})

    def task_update(self, task_id: str, status: str, reason: str | None = None) -> R:
        """``network_task_update``: ``{task}``. ``status`` is accepted | working | blocked |
        completed | failed | cancelled; an illegal move is 409 ``invalid_transition`` with
        ``details.allowed``."""
        return self.call("network_task_update", _args(taskId=task_id, status=status, reason=reason))

    def claim(
        self,
        scope: str,
        *,
        scope_type: str | None = None,
        resource_id: str | None = None,
        task_id: str | None = None,
        ttl_seconds: int | None = None,
    ) -> R:
        """``network_claim``: ``{claimId, scopeType, scope, resourceId, taskId, expiresAt,
        fencingToken}``. An overlapping claim of another instance is 409 ``claim_conflict`` with
        ``details.conflicts``."""
        return self.call(
            "network_claim",
            _args(scope=scope, scopeType=scope_type, resourceId=resource_id, taskId=task_id,
                  ttlSeconds=ttl_seconds),
        )

    def release(self, claim_id: str) -> R:
        """``network_release``: ``{claimId, released, reason?}``; 403 unless the holder."""
        return self.call("network_release", {"claimId": claim_id})

    def publish_artifact(
        self,
        uri: str,
        *,
        label: str | None = None,
        type: str | None = None,  # noqa: A002 - the protocol's name
        task_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> R:
        """``network_publish_artifact``: ``{artifactId, uri, label, type, taskId, ref}``."""
        return self.call(
            "network_publish_artifact",
            _args(uri=uri, label=label, type=type, taskId=task_id),
            idempotency_key=idempotency_key,
        )

    def register_capabilities(self, capabilities: list[dict[str, Any]]) -> R:
        """``network_register_capabilities``: ``{registered, count}``. ``capabilities`` is a list
        of ``{"id", "name", "description"?}`` that replaces this instance's declaration."""
        return self.call("network_register_capabilities", {"capabilities": list(capabilities)})


# --------------------------------------------------------------------------- the clients


class RelaynetClient(_WorkerTools[dict[str, Any]]):
    """Synchronous client of one Relaynet hub.

    Args:
        url: the hub's base URL, e.g. ``http://127.0.0.1:8787`` or the API Gateway stage URL.
        token: an ``rn_inst_`` or ``rn_rep_`` token; ``None`` sends no ``Authorization`` header
            (only ``health()`` works without one).
        timeout: seconds per request (connect, read, write).
        transport: an ``httpx.BaseTransport`` (e.g. ``httpx.MockTransport`` in tests).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._http = httpx.Client(
            base_url=self.url, headers=_headers(token), timeout=timeout, transport=transport
        )

    def call(
        self, tool: str, arguments: dict[str, Any] | None = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """``POST {url}/v1/tools/{tool}`` with ``arguments`` (``{}`` when ``None``) as JSON.

        Args:
            tool: the tool name, e.g. ``network_ask``.
            arguments: the tool's arguments, named as the protocol names them (camelCase).
            idempotency_key: sent as ``Idempotency-Key``; a retry with the same key and body
                within an hour answers the first response (creating tools only).

        Returns:
            The response's JSON object.

        Raises:
            ApiError: non-2xx (fields from the error envelope), a 2xx body that is not a JSON
                object (``internal``), or no response at all (``status=0``, ``unavailable``).
        """
        try:
            response = self._http.post(
                f"/v1/tools/{tool}", content=_body(arguments), headers=_request_headers(idempotency_key)
            )
        except httpx.TransportError as exc:
            raise _transport_error(exc, self.url) from exc
        return _result_from_response(response)

    def pages(self, tool: str, arguments: dict[str, Any] | None = None, key: str | None = None):
        """Every item of a list tool (PROTOCOL.md 2 "Lists"), following ``nextCursor`` page by
        page: ``for task in hub.pages("tasks", {"action": "list"}, "tasks")``. ``key`` is the
        plural result key (default: the one list in the answer). Raises :class:`ApiError`."""
        args = dict(arguments or {})
        while True:
            page = self.call(tool, args)
            name = key or next(k for k, v in page.items() if isinstance(v, list))
            yield from page[name]
            if not page.get("nextCursor"):
                return
            args["cursor"] = page["nextCursor"]

    def health(self) -> dict[str, Any]:
        """``GET /v1/health``: ``{"status": "ok", "version": ...}``. Raises :class:`ApiError`."""
        return self.request("GET", "/v1/health")

    def request(self, method: str, path: str, arguments: dict[str, Any] | None = None, *,
                params: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """One request to an endpoint beside the tools (docs/protocol.md 10), e.g.
        ``request("GET", "/v1/inbox/summary")``; ``arguments`` is the JSON body (none when None),
        ``params`` the query string, ``timeout`` this request's seconds (default: the client's).
        Returns the JSON object; raises :class:`ApiError` as :meth:`call` does."""
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            response = self._http.request(method, path, content=None if arguments is None else _body(arguments),
                                          headers=None if arguments is None else {"Content-Type": "application/json"},
                                          params=params, **extra)
        except httpx.TransportError as exc:
            raise _transport_error(exc, self.url) from exc
        return _result_from_response(response)

    def inbox_summary(self) -> dict[str, Any]:
        """``GET /v1/inbox/summary``: ``{undelivered, byKind, oldestCreatedAt, complete}``,
        delivering nothing (docs/protocol.md 10.1)."""
        return self.request(*ENDPOINT_ROUTES["inbox_summary"])

    def inbox_wait(self, timeout: int = 20) -> dict[str, Any]:
        """``GET /v1/inbox/wait?timeout=S``: the inbox summary as soon as something is undelivered,
        or at ``timeout`` seconds (the hub holds at most its MaxWaitSeconds, 20 by default) with
        ``undelivered`` 0; delivers nothing (docs/protocol.md 10.7). ``timeout`` below 0 is a 400.
        The request's own timeout is 10 s more than the hub can hold it (``min(timeout, 25)``, 25 the
        ceiling of MaxWaitSeconds). Raises :class:`ApiError`."""
        return self.request(*ENDPOINT_ROUTES["inbox_wait"], params={"timeout": timeout},
                            timeout=min(timeout, 25) + 10.0)

    def check_claims(self, paths: list[str], resource_id: str | None = None) -> dict[str, Any]:
        """``POST /v1/claims/check``: ``{results: [{path, conflicts}], conflicting}``, each path's
        live claims held by other instances (docs/protocol.md 10.4); writes nothing. At most 1,000
        paths relative to the repository's top level; raises :class:`ApiError` (400 naming a bad path)."""
        body: dict[str, Any] = {"paths": list(paths)}
        if resource_id is not None:
            body["resourceId"] = resource_id
        return self.request(*ENDPOINT_ROUTES["claims_check"], body)

    def set_push(self, url: str, token: str, authentication: dict[str, Any] | None = None) -> dict[str, Any]:
        """``PUT /v1/push``: this instance's push endpoint (docs/protocol.md 10.3). ``token`` is
        the signing secret (:func:`relaynet.webhooks.verify` checks events with it);
        ``authentication`` is ``{"schemes": ["Bearer"], "credentials": "..."}`` or None."""
        body: dict[str, Any] = {"url": url, "token": token}
        if authentication is not None:
            body["authentication"] = authentication
        return self.request(*ENDPOINT_ROUTES["push_config_set"], body)

    def report_supervisor(self, state: str, *, active_runs: int, max_runs: int, runs_started: int,
                          last_run: dict[str, Any] | None = None) -> dict[str, Any]:
        """``PUT /v1/supervisor``: this instance's run state as its supervisor sees it (docs/protocol.md
        10.8): ``state`` idle | running | stopping | stopped; ``last_run`` ``{number, exit, timedOut,
        endedAt, blocked, log}``. Returns ``{supervisor: {state, activeRuns, maxRuns, runsStarted,
        lastRun, updatedAt, expiresAt}}``; raises :class:`ApiError` (400 for a bad field)."""
        body: dict[str, Any] = {"state": state, "activeRuns": active_runs, "maxRuns": max_runs,
                                "runsStarted": runs_started}
        if last_run is not None:
            body["lastRun"] = last_run
        return self.request(*ENDPOINT_ROUTES["supervisor_state_set"], body)

    def delete_push(self) -> dict[str, Any]:
        """``DELETE /v1/push``: ``{removed: bool}``."""
        return self.request(*ENDPOINT_ROUTES["push_config_delete"])

    def events(self, *, last_event_id: str | None = None, reconnect: bool = True, retry_seconds: float = 1.0,
               read_timeout: float = 45.0, stop: Any = None):
        """``GET /v1/events``: an iterator over this instance's live events, each once, resumed
        after a drop (docs/protocol.md 10.6; the arguments, what ends it and the errors raised:
        :func:`relaynet.client_events.iterate`)."""
        from relaynet.client_events import iterate

        return iterate(self, last_event_id=last_event_id, reconnect=reconnect, retry_seconds=retry_seconds,
                       read_timeout=read_timeout, stop=stop)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> "RelaynetClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncRelaynetClient(_WorkerTools[Awaitable[dict[str, Any]]]):
    """Asynchronous client (``httpx.AsyncClient``); same arguments and errors as
    :class:`RelaynetClient`. Convenience methods return awaitables: ``await hub.inbox()``."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=_headers(token), timeout=timeout, transport=transport
        )

    async def call(  # type: ignore[override]
        self, tool: str, arguments: dict[str, Any] | None = None, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """As :meth:`RelaynetClient.call`, awaited."""
        try:
            response = await self._http.post(
                f"/v1/tools/{tool}", content=_body(arguments), headers=_request_headers(idempotency_key)
            )
        except httpx.TransportError as exc:
            raise _transport_error(exc, self.url) from exc
        return _result_from_response(response)

    async def health(self) -> dict[str, Any]:
        """``GET /v1/health``. Raises :class:`ApiError`."""
        try:
            response = await self._http.get("/v1/health")
        except httpx.TransportError as exc:
            raise _transport_error(exc, self.url) from exc
        return _result_from_response(response)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    close = aclose

    async def __aenter__(self) -> "AsyncRelaynetClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
