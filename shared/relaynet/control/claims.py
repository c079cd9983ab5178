"""control_release_claim (PROTOCOL.md 6, grant ``operate``): any claim of the network, released
through relaynet.claims as network_release releases it."""

from __future__ import annotations

from typing import Any

from relaynet import claims
from relaynet.control.grants import objects, scope
from relaynet.identity import Principal
from relaynet.models.worker import ReleaseRequest


def release_claim(principal: Principal, network_id: str | None, claim_id: str) -> dict[str, Any]:
    """control_release_claim: any claim of the network; the result as network_release."""
    _, p = scope(principal, network_id, "operate", objects(claim_id=claim_id), call_checks=True)
    return claims.release(p, ReleaseRequest(claimId=claim_id), any_holder=True)
