"""A table kept on disk with claims in the layout before issue 25 (one HEAD counter and every
claim at ``NET#<net>#CLAIMS`` / ``CLAIM#<clm>``) keeps working: relaynet.claims.migrate, which
``relaynet serve`` runs at start, moves each live claim into the claim tree with its id, holder,
expiry, task and fencing token, and each lapsed one to the ended partition. On DynamoDB Local.
"""

from __future__ import annotations

import pytest

from relaynet import claims, clock, tasks
from relaynet.errors import ClaimConflict
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import apply

SPEC = "network: old\nagents:\n  - {name: boss, instances: 1}\n  - {name: coder, instances: 2}\n"


def _old_claim(net_id: str, claim_id: str, holder, scope: str, expires: int, token: int, task_id=None) -> None:
    """An item exactly as the layout before issue 25 wrote it (relaynet.store.claims.new_claim then)."""
    pk, sk = k.claim(net_id, claim_id)
    t.put({"PK": pk, "SK": sk, "kind": "claim", "id": claim_id, "scopeType": "path", "scope": scope,
           "resourceId": None, "taskId": task_id, "holder": holder.actor, "expiresAt": expires,
           "fencingToken": token, "createdAt": clock.iso(expires - 3_600_000), "ttl": expires // 1000 + 86_400})


@pytest.fixture
def old_table(server_table):
    net = apply(SPEC)
    a, b = net.principals["coder0"], net.principals["coder1"]
    task = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective="x", toInstance=a.instance_id))
    now = clock.now_ms()
    t.put({"PK": k.claims_pk(net.network_id), "SK": "HEAD", "kind": "head", "counter": 3})
    _old_claim(net.network_id, "clm_01OLDLIVE0000000000000001", a, "src/**", now + 600_000, 2, task["taskId"])
    _old_claim(net.network_id, "clm_01OLDLAPSED00000000000002", b, "docs/**", now - 1_000, 3)
    return net, a, b, task


def test_a_live_old_claim_is_honoured_after_migration_and_a_lapsed_one_has_ended(old_table):
    net, a, b, task = old_table
    assert claims.migrate() == 1
    assert claims.migrate() == 0  # idempotent
    assert t.get(*k.claims_head(net.network_id)) is None
    with pytest.raises(ClaimConflict) as err:
        claims.claim(b, w.ClaimRequest(scope="src/app.py"))
    assert [c["claimId"] for c in err.value.details["conflicts"]] == ["clm_01OLDLIVE0000000000000001"]
    assert [c["claimId"] for c in claims.active_for_task(net.network_id, task["taskId"])] == [
        "clm_01OLDLIVE0000000000000001"]
    renewed = claims.claim(a, w.ClaimRequest(scope="src/**"))  # the holder renews it: same id and token
    assert (renewed["claimId"], renewed["fencingToken"]) == ("clm_01OLDLIVE0000000000000001", 2)
    docs = claims.claim(b, w.ClaimRequest(scope="docs/a.md"))  # the lapsed one blocks nothing
    assert docs["fencingToken"] > 3
    assert claims.release(b, w.ReleaseRequest(claimId="clm_01OLDLAPSED00000000000002")) == {
        "claimId": "clm_01OLDLAPSED00000000000002", "released": False, "reason": "expired"}
    assert claims.release(a, w.ReleaseRequest(claimId="clm_01OLDLIVE0000000000000001"))["released"] is True
    assert claims.claim(b, w.ClaimRequest(scope="src/app.py"))["fencingToken"] > 2


def test_a_release_of_an_old_claim_before_any_migration_migrates_its_network(old_table):
    net, a, b, _ = old_table
    assert claims.release(a, w.ReleaseRequest(claimId="clm_01OLDLIVE0000000000000001"))["released"] is True
    assert t.get(*k.claims_head(net.network_id)) is None
    assert claims.claim(b, w.ClaimRequest(scope="src/**"))["claimId"].startswith("clm_")
