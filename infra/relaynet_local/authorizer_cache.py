"""The local stack's cache of authorizer answers, as API Gateway keeps one.

API Gateway (HTTP API, simple responses) caches a Lambda authorizer's answer per identity source
(here the ``Authorization`` header) for the authorizer's ``ReauthorizeEvery`` seconds
(template.yaml: 10). The local stack does the same, so a tool call costs one Lambda invoke and no
GetItem of the token once its token has been seen, and one difference AWS has is not hidden by
the local stack: a revocation. In AWS a revoked token can pass for the rest of its cached answer
(docs/architecture.md, "stopping revokes the token item at once"); locally every function runs in
a process of the hub, so :class:`AuthorizerCache` sees each write of a token item (``TOKEN#<hash>``:
a revocation, a new token) as botocore sends it and drops every cached answer once it has
succeeded. With several hub processes (``relaynet serve --workers``) the writer also bumps a
:class:`SharedGeneration` the others compare before each answer, so no process of the hub
answers from a cache older than a revocation it acknowledged. A token item changed by a process
outside the hub (a script on the store's port) is seen after at most ``ttl`` seconds, as in AWS.

Every simple response is kept, a refusal too, as API Gateway keeps them, and it is reused for
every route (API Gateway's cache key is the identity source, not the route). A failing authorizer
is asked again next time. Relaynet's authorizer answers an unknown token with an anonymous
context; a token item written later (the token minted) empties the cache, so that answer never
outlives it.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["AuthorizerCache", "SharedGeneration", "touches_tokens"]

TOKEN_PREFIX = "TOKEN#"  # relaynet.store.keys.token
_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
_HOOK_ID = "relaynet-local-authorizer-cache"


def _pk(key: Any) -> str:
    value = (key or {}).get("PK")
    return value.get("S", "") if isinstance(value, dict) else str(value or "")


def touches_tokens(operation: str, params: dict[str, Any]) -> bool:
    """Whether a DynamoDB write's parameters (botocore's, low-level: ``{"PK": {"S": ...}}``)
    write an item whose partition key is a token's (``TOKEN#...``)."""
    if operation in ("PutItem",):
        return _pk(params.get("Item")).startswith(TOKEN_PREFIX)
    if operation in ("UpdateItem", "DeleteItem"):
        return _pk(params.get("Key")).startswith(TOKEN_PREFIX)
    if operation == "TransactWriteItems":
        for action in params.get("TransactItems", []):
            for kind, body in action.items():
                if kind != "ConditionCheck" and _pk(body.get("Item") or body.get("Key")).startswith(TOKEN_PREFIX):
                    return True
        return False
    if operation == "BatchWriteItem":
        for requests in params.get("RequestItems", {}).values():
            for request in requests:
                body = request.get("PutRequest") or request.get("DeleteRequest") or {}
                if _pk(body.get("Item") or body.get("Key")).startswith(TOKEN_PREFIX):
                    return True
    return False


class SharedGeneration:
    """A counter every process of one hub reads without a system call: 8 bytes (little-endian
    unsigned) at the start of ``path``, mapped shared. :meth:`bump` is made under an exclusive
    ``flock`` of the file, so two processes' bumps are both counted. The hub's processes
    (``relaynet serve --workers``) bump it at each token write, and every cache compares it before
    it answers: a revocation made by one process drops the answers the others keep, before
    their next request is authorised."""

    _FORMAT = "<Q"

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < 8:
                os.ftruncate(fd, 8)
            self._map = mmap.mmap(fd, 8)
        finally:
            os.close(fd)

    def value(self) -> int:
        """The current count."""
        return struct.unpack_from(self._FORMAT, self._map, 0)[0]

    def bump(self) -> int:
        """Add one; returns the new count."""
        with open(self.path, "rb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                value = self.value() + 1
                struct.pack_into(self._FORMAT, self._map, 0, value)
                return value
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap the file (it stays on disk for the other processes)."""
        self._map.close()


class AuthorizerCache:
    """Authorizer answers per ``Authorization`` header for ``ttl`` seconds (0: no cache).

    ``answer(header, ask)`` returns the cached answer or ``ask()``'s, keeping it when it is a
    simple response (``isAuthorized`` a bool); ``ask()``'s exception propagates and nothing is
    kept. :meth:`install` hooks boto3's default session so that a write of a token item in this
    process empties the cache. Thread-safe; at most ``max_entries`` answers (the oldest go
    first)."""

    def __init__(self, ttl: float, *, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.ttl = float(ttl)
        self.max_entries = max_entries
        self._clock = clock
        self._answers: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every clear: an answer asked for before it is not kept
        self._session: Any = None
        self._listeners: list[Callable[[], None]] = []
        self._shared: SharedGeneration | None = None  # the hub's processes' token writes (share)
        self._seen = 0
        self._on_local_write: Callable[[], None] | None = None

    def share(self, generation: SharedGeneration | None, on_local_write: Callable[[], None] | None = None) -> None:
        """Be one of a hub's processes: a token write of any of them (counted in ``generation``)
        drops this cache's answers before the next one is given, and this process's token writes
        bump it and call ``on_local_write()`` (the bus tells the others' listeners). ``None``: a
        hub of one process again."""
        self._shared = generation
        self._seen = generation.value() if generation is not None else 0
        self._on_local_write = on_local_write

    def remote_write(self) -> None:
        """Another process of the hub wrote a token item (the bus says so): tell the
        :meth:`on_clear` listeners. The answers themselves go by the shared generation, which
        the writer bumped before its write was acknowledged."""
        for listener in list(self._listeners):
            listener()

    def _forget(self) -> None:
        with self._lock:
            self._answers.clear()
            self._generation += 1

    def _shared_now(self) -> int:
        """The hub's token-write count; a change since the last look empties the cache first."""
        shared = self._shared
        if shared is None:
            return 0
        now = shared.value()
        if now != self._seen:
            self._forget()
            self._seen = now
        return now

    def on_clear(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after each token write of this process succeeded (in the writing
        thread: it must be quick). :meth:`uninstall` forgets the listeners."""
        self._listeners.append(listener)

    def answer(self, header: str, ask: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The authorizer's answer for ``header``: cached while fresh, else ``ask()``'s."""
        if self.ttl <= 0:
            return ask()
        now = self._clock()
        shared = self._shared_now()
        with self._lock:
            hit = self._answers.get(header)
        if hit is not None and hit[0] > now:
            return {**hit[1], "context": dict(hit[1].get("context") or {})}  # a handler may change its copy
        generation = self._generation
        answer = ask()
        if isinstance(answer, dict) and isinstance(answer.get("isAuthorized"), bool):
            with self._lock:  # no token item was written, here or by another process, while we asked
                if generation == self._generation and (self._shared is None or self._shared.value() == shared):
                    if len(self._answers) >= self.max_entries:
                        self._answers.pop(next(iter(self._answers)))
                    self._answers[header] = (now + self.ttl, answer)
        return answer

    def clear(self) -> None:
        """Forget every answer (this process is writing a token item); with :meth:`share`, the
        hub's other processes forget theirs before their next answer."""
        if self._shared is not None:
            self._seen = self._shared.bump()
        self._forget()

    # -- seeing token writes ---------------------------------------------------------------

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if touches_tokens(model.name, params):
            context["relaynet_token_write"] = True
            self.clear()  # an answer cached while the write is on its way is dropped after it too

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        if context.get("relaynet_token_write"):
            self.clear()
            for listener in list(self._listeners):
                listener()
            if self._on_local_write is not None:
                self._on_local_write()

    def install(self) -> "AuthorizerCache":
        """Watch this process's DynamoDB writes (boto3's default session, as
        relaynet_local.dynamodb_local.TransactionBarrier does)."""
        import boto3

        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        self._session = boto3.DEFAULT_SESSION
        for op in _WRITES:
            self._session.events.register(f"before-parameter-build.dynamodb.{op}", self._before, unique_id=f"{_HOOK_ID}-b-{op}")
            self._session.events.register(f"after-call.dynamodb.{op}", self._after, unique_id=f"{_HOOK_ID}-a-{op}")
        return self

    def uninstall(self) -> None:
        """Stop watching; the cache is emptied."""
        if self._session is not None:
            for op in _WRITES:
                self._session.events.unregister(f"before-parameter-build.dynamodb.{op}", unique_id=f"{_HOOK_ID}-b-{op}")
                self._session.events.unregister(f"after-call.dynamodb.{op}", unique_id=f"{_HOOK_ID}-a-{op}")
            self._session = None
        self._listeners.clear()
        self.share(None)
        self.clear()
