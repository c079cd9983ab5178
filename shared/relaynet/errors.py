"""Domain errors, mapped to the protocol's error envelope in one place (relaynet.http.api).

PROTOCOL.md 2: ``{"error": {"code", "message", "details"?}}`` with the HTTP statuses below.
The domain raises these; it never builds HTTP responses itself.
"""

from __future__ import annotations

from typing import Any


class RelaynetError(Exception):
    """Base class. ``status`` and ``code`` are the protocol's; ``details`` is optional JSON."""

    status = 500
    code = "internal"
    #: True when the call's writes had committed before this answer (channels ``open`` whose seed
    #: was refused: the channel exists, closed). A retry with the same Idempotency-Key then gets
    #: this answer again and runs nothing (PROTOCOL.md 2; relaynet.http.idempotency).
    committed = False

    def __init__(self, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.details = details
        self.headers = headers or {}

    def envelope(self) -> dict[str, Any]:
        """The JSON error body of PROTOCOL.md 2."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            err["details"] = self.details
        return {"error": err}


class Answered(RelaynetError):
    """An error answer kept for a retry with the same Idempotency-Key (a ``committed`` error,
    relaynet.http.idempotency): the first answer's status, code, message, details and headers."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message, details, headers)
        self.status, self.code = status, code


class InvalidArgument(RelaynetError):
    """400 ``invalid_argument``; ``fields`` is ``[{"field", "message"}]``, one per bad field."""

    status = 400
    code = "invalid_argument"

    def __init__(self, message: str, fields: list[dict[str, str]] | None = None):
        super().__init__(message, {"fields": fields or []})

    @classmethod
    def field(cls, field: str, message: str) -> "InvalidArgument":
        """One bad field: ``InvalidArgument.field("scope", "unclosed '['")``."""
        return cls(f"{field}: {message}", [{"field": field, "message": message}])


class Unauthenticated(RelaynetError):
    """401 ``unauthenticated``: no, malformed, unknown or revoked token."""

    status = 401
    code = "unauthenticated"


class PermissionDenied(RelaynetError):
    """403 ``permission_denied``: wrong surface, not the holder, not a participant, no grant."""

    status = 403
    code = "permission_denied"


class NotFound(RelaynetError):
    """404 ``not_found``: the named object does not exist in the caller's network."""

    status = 404
    code = "not_found"


class PayloadTooLarge(RelaynetError):
    """413 ``payload_too_large``: the request body is over 64 KiB."""

    status = 413
    code = "payload_too_large"


class Conflict(RelaynetError):
    """409 ``conflict`` with ``details.reason`` (PROTOCOL.md 2 lists the reasons)."""

    status = 409
    code = "conflict"

    def __init__(self, reason: str, message: str, headers: dict[str, str] | None = None, **details: Any):
        super().__init__(message, {"reason": reason, **details}, headers)
        self.reason = reason


class ClaimConflict(Conflict):
    """409 ``claim_conflict``; ``conflicts`` lists the active claims in the way (PROTOCOL.md 4.9)."""

    def __init__(self, conflicts: list[dict[str, Any]]):
        holders = ", ".join(f"{c['holder']['agent']}/{c['holder']['instanceId']} ({c['scope']})" for c in conflicts)
        super().__init__("claim_conflict", f"scope is claimed by {holders}", conflicts=conflicts)


class InvalidTransition(Conflict):
    """409 ``invalid_transition``; ``allowed`` lists what the caller may request now (PROTOCOL.md 4.8)."""

    def __init__(self, current: str, requested: str, allowed: list[str]):
        super().__init__(
            "invalid_transition",
            f"a task in state {current!r} cannot move to {requested!r}",
            allowed=allowed,
            current=current,
        )


class RateLimited(RelaynetError):
    """429 ``rate_limited``; carries a ``Retry-After`` header."""

    status = 429
    code = "rate_limited"
