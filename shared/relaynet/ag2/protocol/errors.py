"""AG2's network errors and their wire codes (AG2 1.2.1 ``ag2/network/errors.py``; the codes are
``ag2/network/hub/core.py`` ``_ERROR_CODE_MAP``, and the client's ``_ERROR_CLASSES`` re-raises
each code as the class of the same name). A failed request is answered ``ok=false`` with
:func:`error_code` of the exception; a failed ``hello`` with an ``ErrorFrame`` of that code."""

from __future__ import annotations

__all__ = ("AccessDeniedError", "AuthError", "ERROR_CODES", "NetworkError", "NotFoundError", "ProtocolError",
           "error_code")


class NetworkError(Exception):
    """The family: what an op raises to be answered with one of AG2's codes."""


class NotFoundError(NetworkError):
    """An identity, channel or task that does not exist (or is not visible): ``not_found``."""


class AccessDeniedError(NetworkError):
    """The connection may not act so (an agent not bound to it, not a participant): ``access_denied``."""


class AuthError(NetworkError):
    """A claim that proves nothing (bad, revoked or foreign token; another scheme): ``auth_failed``."""


class ProtocolError(NetworkError):
    """A request the protocol refuses (a send out of turn, a closed channel, a malformed
    envelope): ``protocol_error``."""


#: ``(class, code)`` in AG2's order; anything else is ``error``.
ERROR_CODES: tuple[tuple[type[NetworkError], str], ...] = (
    (NotFoundError, "not_found"), (AccessDeniedError, "access_denied"), (ProtocolError, "protocol_error"),
    (AuthError, "auth_failed"))


def error_code(exc: BaseException) -> str:
    """AG2's wire code for ``exc``: ``not_found``, ``access_denied``, ``protocol_error``,
    ``auth_failed``, else ``error`` (the client raises a bare ``NetworkError``)."""
    for cls, code in ERROR_CODES:
        if isinstance(exc, cls):
            return code
    return "error"
