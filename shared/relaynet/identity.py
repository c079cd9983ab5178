"""Tokens, principals, instances and presence (PROTOCOL.md 2 auth, 3 instances).

A token is an opaque random string with a readable prefix (``rn_inst_``, ``rn_rep_``); the table
keeps only its SHA-256. The authorizer maps the hash to a principal context, which handlers trust.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from relaynet import clock, ids
from relaynet.config import settings
from relaynet.errors import NotFound, Unauthenticated
from relaynet.store import identity as store

INSTANCE_PREFIX = "rn_inst_"
REPRESENTATIVE_PREFIX = "rn_rep_"
PRESENCE_WRITE_INTERVAL_MS = 60_000  # lastSeenAt is written at most once a minute (PROTOCOL.md 3)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest the table stores instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def mint_token(prefix: str) -> str:
    """A new token: ``prefix`` + 43 URL-safe characters (32 bytes of entropy)."""
    return prefix + secrets.token_urlsafe(32)


def well_formed(token: str) -> bool:
    """Whether ``token`` has a known prefix and a plausible length (no lookup)."""
    return (
        isinstance(token, str)
        and token.startswith((INSTANCE_PREFIX, REPRESENTATIVE_PREFIX))
        and 40 <= len(token) <= 128
        and token.isascii()
    )


@dataclass(frozen=True)
class Principal:
    """Who is calling, as the authorizer resolved it.

    ``kind`` is ``"instance"`` or ``"representative"``. For instances ``network_id``,
    ``instance_id`` and ``agent`` are set; for representatives ``rep`` (its name).
    """

    kind: str
    network_id: str | None = None
    instance_id: str | None = None
    agent: str | None = None
    rep: str | None = None

    @property
    def actor(self) -> dict[str, str]:
        """The protocol's actor shape: ``{"agent", "instanceId"}`` or ``{"representative"}``."""
        if self.kind == "instance":
            return {"agent": self.agent, "instanceId": self.instance_id}
        return {"representative": self.rep}

    @property
    def speaker(self) -> str:
        """The name this principal posts under in threads: its agent, or ``rep:<name>`` for a
        representative (a colon never occurs in agent names, so the two cannot collide)."""
        return self.agent if self.kind == "instance" else f"rep:{self.rep}"

    def context(self) -> dict[str, str]:
        """The flat string map the authorizer hands API Gateway (simple responses)."""
        return {key: value for key, value in {
            "kind": self.kind, "networkId": self.network_id, "instanceId": self.instance_id,
            "agent": self.agent, "rep": self.rep,
        }.items() if value}

    @classmethod
    def from_context(cls, ctx: dict[str, Any] | None) -> "Principal":
        """Rebuild from the authorizer context; raises Unauthenticated when it is not a principal."""
        if not ctx or ctx.get("kind") not in ("instance", "representative"):
            raise Unauthenticated("missing, malformed, unknown or revoked token")
        return cls(kind=ctx["kind"], network_id=ctx.get("networkId"), instance_id=ctx.get("instanceId"),
                   agent=ctx.get("agent"), rep=ctx.get("rep"))


def authorize(token: str | None) -> Principal | None:
    """The principal a bearer token belongs to, or None (unknown, revoked or malformed): one GetItem."""
    if not token or not well_formed(token):
        return None
    return authorize_hash(hash_token(token))


def authorize_hash(token_hash: str) -> Principal | None:
    """The principal of the token whose SHA-256 hex digest is ``token_hash``, or None (unknown or
    revoked): one eventually consistent GetItem. For a caller that keeps the hash, not the token
    (an AG2 connection re-checking the token it attached with, relaynet.ag2.ops)."""
    item = store.token(token_hash)
    if not item or item.get("revoked"):
        return None
    return Principal(kind=item["kind"], network_id=item.get("networkId"), instance_id=item.get("instanceId"),
                     agent=item.get("agent"), rep=item.get("rep"))


def bearer(header: str | None) -> str | None:
    """``"Bearer abc"`` -> ``"abc"``; anything else -> None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def token_item(token: str, principal: Principal) -> dict[str, Any]:
    """The token item for ``principal``: only the hash of ``token`` is stored."""
    return store.token_item(hash_token(token), principal.context(), clock.now_iso())


def launch_instance(network_id: str, agent: str) -> dict[str, str]:
    """Register a new instance of ``agent`` and mint its token, in one transaction.

    Returns ``{"instanceId", "token"}`` (the token is shown once). Raises NotFound for an
    unknown agent. ``lastSeenAt`` is set now, so the instance is live until the presence timeout.
    """
    if store.agent(network_id, agent) is None:
        raise NotFound(f"agent {agent!r} does not exist")
    inst_id = ids.new_id("inst")
    token = mint_token(INSTANCE_PREFIX)
    now = clock.now_ms()
    store.register_instance(network_id, inst_id, agent, token_hash=hash_token(token), now_ms=now,
                            created_at=clock.iso(now),
                            token=token_item(token, Principal("instance", network_id, inst_id, agent)))
    return {"instanceId": inst_id, "token": token}


_seen_lock = threading.Lock()
_last_written: dict[str, int] = {}
_MAX_REMEMBERED = 10_000  # instances one container remembers; past that it starts afresh


def touch(principal: Principal, now_ms: int | None = None) -> bool:
    """Refresh the instance's ``lastSeenAt``: at most one write a minute per instance.

    Called on every authenticated call (relaynet.http.api). Two guards keep it at one write a
    minute however many calls and containers there are (PROTOCOL.md 3):

    - the container remembers when it last tried for each instance and makes no request at all
      within a minute of that (so a busy instance costs one UpdateItem a minute per container);
    - the UpdateItem is conditional on the stored value being a minute old, so of several warm
      containers only one writes per minute (the others' conditional failure costs one request).

    Returns whether an UpdateItem request was made. Presence is best effort: the caller decides
    what a failure means (the handler logs it and answers the call anyway).
    """
    if principal.kind != "instance" or not principal.instance_id:
        return False
    now = clock.now_ms() if now_ms is None else now_ms
    with _seen_lock:
        if now - _last_written.get(principal.instance_id, -PRESENCE_WRITE_INTERVAL_MS) < PRESENCE_WRITE_INTERVAL_MS:
            return False
        if len(_last_written) >= _MAX_REMEMBERED:
            _last_written.clear()
        _last_written[principal.instance_id] = now
    store.touch(principal.network_id, principal.instance_id, now, now - PRESENCE_WRITE_INTERVAL_MS)
    return True


def forget_presence() -> None:
    """Forget when this container last wrote presence (tests; a new container starts empty)."""
    with _seen_lock:
        _last_written.clear()


# The Idempotency-Key of the creating write being served, scoped by tool and caller
# (``<tool>#<instance or representative>#<key>``), set by relaynet.http.idempotency around the
# domain call. Domain code that writes in several steps (a fan-out larger than one transaction)
# keys a durable record with it, so a retry with the same key resumes instead of starting over.
_request_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("relaynet_request_key", default=None)


@contextlib.contextmanager
def request_key(scoped_key: str | None) -> Iterator[None]:
    """Run the body with ``scoped_key`` as :func:`current_request_key`."""
    token = _request_key.set(scoped_key)
    try:
        yield
    finally:
        _request_key.reset(token)


def current_request_key() -> str | None:
    """The scoped Idempotency-Key of the creating write in progress, or None (no key sent)."""
    return _request_key.get()


def availability(inst: dict[str, Any], now_ms: int | None = None) -> str:
    """``stopped`` | ``offline`` | ``working`` | ``available``, derived at read time (PROTOCOL.md 3)."""
    if inst.get("status") == "stopped":
        return "stopped"
    now = clock.now_ms() if now_ms is None else now_ms
    if now - int(inst.get("lastSeenAt", 0)) > settings().presence_timeout * 1000:
        return "offline"
    if inst.get("held"):
        return "working"
    return "available"


def status(inst: dict[str, Any]) -> str:
    """The stored status as the protocol shows it: ``stopped``, ``working`` or ``available``."""
    if inst.get("status") == "stopped":
        return "stopped"
    return "working" if inst.get("held") else "available"
