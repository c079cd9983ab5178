"""Claims on moto (PROTOCOL.md 4.9, 4.10, 8), sentence by sentence.

Races between threads are in test_claim_races.py (moto in server mode); the glob overlap
decision itself is in tests/test_globs.py (named examples and a brute-force oracle). Time is a
fake clock here, moved by hand, so expiry is exact to the millisecond and nothing sleeps.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from relaynet import claims, clock, globs, tasks
from relaynet.errors import ClaimConflict, InvalidArgument, NotFound, PermissionDenied
from relaynet.identity import Principal
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import TEMPLATE, apply
from tests.test_globs import paths, patterns

SPEC = """\
network: claims
agents:
  - {name: boss, instances: 1}
  - {name: coder, instances: 3}
  - {name: tester, instances: 1}
"""

_networks = itertools.count()


@pytest.fixture(scope="module")
def module_aws():
    """moto for the whole module, and the table's CreateTable request read from template.yaml
    once: starting moto and parsing the template are most of a test's cost."""
    import boto3
    from moto import mock_aws

    from relaynet_local.template import load_template, table_request

    request = table_request(load_template(TEMPLATE).table, "relaynet-test")
    with mock_aws():
        yield boto3.client("dynamodb"), request


@pytest.fixture
def net(module_aws):
    """A fresh table (moto copies the whole table in every transaction, so tests do not share
    one) and a network with a boss, three coders and a tester on it."""
    client, request = module_aws
    t.reset()
    client.create_table(**request)
    try:
        yield apply(SPEC.replace("network: claims", f"network: claims{next(_networks)}"))
    finally:
        client.delete_table(TableName="relaynet-test")
        t.reset()


@pytest.fixture
def now(monkeypatch):
    """The fake clock: ``now[0]`` is what :func:`relaynet.clock.now_ms` answers. It starts at
    the real time (so the network's instances are live) and moves only when a test moves it."""
    cell = [clock.now_ms()]
    monkeypatch.setattr(clock, "now_ms", lambda: cell[0])
    return cell


def claim(p: Principal, scope: str, **kw):
    return claims.claim(p, w.ClaimRequest(scope=scope, **kw))


def release(p: Principal, claim_id: str, **kw):
    return claims.release(p, w.ReleaseRequest(claimId=claim_id), **kw)


def stored(net_id: str) -> list[dict]:
    """Every claim item of the network (tree items of every namespace, references, the task
    index, ended claims), by key: what a refused call must leave as it was. An anchor's mark is
    left out: an announcement writes it, and it stays (it says where claims may be, and holds no
    claim; relaynet.store.claims)."""
    resp = t.client().scan(TableName=t.table_name())
    items = [t.decode(i) for i in resp["Items"]]
    return sorted((i for i in items if i["PK"].startswith(f"NET#{net_id}#CLAIM") and i.get("kind") != "claim_hw"),
                  key=lambda i: (i["PK"], i["SK"]))


def tree_claims(net_id: str, scope_type: str = "path", resource_id: str | None = None) -> list[dict]:
    """The claim items (any state) in one namespace's claim tree, oldest id first."""
    items = t.query(k.claim_tree_pk(net_id, scope_type, resource_id))
    return sorted((i for i in items if i.get("kind") == "claim"), key=lambda i: i["id"])


# ------------------------------------------------------------------ the table of named cases


@dataclass(frozen=True)
class Scope:
    scope: str
    scopeType: str = "path"
    resourceId: Optional[str] = None

    def request(self, **kw) -> w.ClaimRequest:
        return w.ClaimRequest(scope=self.scope, scopeType=self.scopeType, resourceId=self.resourceId, **kw)


API = "github.com/acme/api"
WEB = "github.com/acme/web"

# (why, held by coder0, then claimed by, requested, outcome): outcome is "conflict" (409 naming
# the held claim, nothing written), "granted" (a new claim) or "renewed" (same id and token).
CASES = [
    # overlap is exact (PROTOCOL.md 8), for path scopes
    ("a path inside a claimed directory overlaps it", Scope("src/api/**"), "coder1", Scope("src/api/handlers.py"), "conflict"),
    ("sibling directories do not overlap", Scope("src/api/**"), "coder1", Scope("src/web/**"), "granted"),
    ("src/*.py and src/a* overlap (src/a.py), which heuristics miss", Scope("src/*.py"), "coder1", Scope("src/a*"), "conflict"),
    ("src/* and src/a/b.py do not overlap, which heuristics refuse", Scope("src/*"), "coder1", Scope("src/a/b.py"), "granted"),
    ("**/test_*.py and tests/** overlap (tests/test_x.py)", Scope("**/test_*.py"), "coder1", Scope("tests/**"), "conflict"),
    ("a/*/c and a/b/* overlap (a/b/c)", Scope("a/*/c"), "coder1", Scope("a/b/*"), "conflict"),
    ("src/*.go and src/*.py do not overlap", Scope("src/*.go"), "coder1", Scope("src/*.py"), "granted"),
    ("docs/** and src/** do not overlap", Scope("docs/**"), "coder1", Scope("src/**"), "granted"),
    ("a plain path names one file: src does not overlap src/x.py", Scope("src"), "coder1", Scope("src/x.py"), "granted"),
    ("a trailing / claims the directory, src itself included", Scope("src/"), "coder1", Scope("src"), "conflict"),
    ("scopes are normalised before comparing", Scope("./src//api/./"), "coder1", Scope("/src/api/x.py"), "conflict"),
    ("an empty scope is the whole tree", Scope(""), "coder1", Scope("deep/down/file.txt"), "conflict"),
    ("alternatives may hold /", Scope("{src,lib}/**"), "coder1", Scope("lib/util.py"), "conflict"),
    ("classes are exact", Scope("src/[!a]*.py"), "coder1", Scope("src/a*.py"), "granted"),
    ("scopes are case-sensitive", Scope("Src/**"), "coder1", Scope("src/a.py"), "granted"),
    # task scopes: exact strings after trimming
    ("task scopes overlap when equal after trimming", Scope("deploy", "task"), "coder1", Scope("  deploy ", "task"), "conflict"),
    ("task scopes are not globs", Scope("deploy*", "task"), "coder1", Scope("deploy-prod", "task"), "granted"),
    ("task scopes are case-sensitive", Scope("deploy", "task"), "coder1", Scope("Deploy", "task"), "granted"),
    # namespaces: the same scopeType and the same resourceId only
    ("a path claim and a task claim never conflict", Scope("deploy"), "coder1", Scope("deploy", "task"), "granted"),
    ("a path claim and a resource claim never conflict", Scope("src/**"), "coder1", Scope("src/**", "resource", API), "granted"),
    ("resource claims on the same resource conflict", Scope("src/**", "resource", API), "coder1", Scope("src/a.py", "resource", API), "conflict"),
    ("resourceId is normalised (a git remote is its key)", Scope("src/**", "resource", API), "coder1",
     Scope("src/a.py", "resource", "git@github.com:acme/api.git"), "conflict"),
    ("resource claims on different resources do not conflict", Scope("src/**", "resource", API), "coder1", Scope("src/**", "resource", WEB), "granted"),
    ("an absent resourceId is its own namespace", Scope("src/**", "resource"), "coder1", Scope("src/**", "resource", API), "granted"),
    ("a path claim with a resourceId is apart from one without", Scope("src/**", "path", API), "coder1", Scope("src/**"), "granted"),
    ("task claims on different resources do not conflict", Scope("deploy", "task", API), "coder1", Scope("deploy", "task", WEB), "granted"),
    # holders: instances, not agents
    ("another instance of the same agent conflicts", Scope("src/**"), "coder2", Scope("src/a.py"), "conflict"),
    ("another agent conflicts", Scope("src/**"), "tester0", Scope("src/a.py"), "conflict"),
    ("a claim never conflicts with a claim of the same instance", Scope("src/**"), "coder0", Scope("src/a.py"), "granted"),
    ("claiming exactly the same scope again renews it", Scope("src/api/**"), "coder0", Scope("src/api/**"), "renewed"),
    ("... the same scope as normalised", Scope("src/"), "coder0", Scope("./src/**"), "renewed"),
    ("... the same task key after trimming", Scope("deploy", "task"), "coder0", Scope(" deploy", "task"), "renewed"),
    ("... in the same namespace only", Scope("src/**", "resource", API), "coder0", Scope("src/**", "resource", WEB), "granted"),
    ("... even a scope no path matches", Scope("src/[.]"), "coder0", Scope("src/[.]"), "renewed"),
    ("a scope no path matches overlaps nothing", Scope("src/[.]"), "coder1", Scope("src/**"), "granted"),
]


@pytest.mark.parametrize(("held", "who", "requested", "outcome"),
                         [pytest.param(h, p, r, o, id=why) for why, h, p, r, o in CASES])
def test_named_claim_cases(net, now, held, who, requested, outcome):
    first = claims.claim(net.principals["coder0"], held.request(ttlSeconds=60))
    now[0] += 1000
    before = stored(net.network_id)
    if outcome == "conflict":
        with pytest.raises(ClaimConflict) as err:
            claims.claim(net.principals[who], requested.request())
        assert err.value.status == 409 and err.value.reason == "claim_conflict"
        assert [c["claimId"] for c in err.value.details["conflicts"]] == [first["claimId"]]
        assert stored(net.network_id) == before  # nothing left written
        assert [i["id"] for i in tree_claims(net.network_id, held.scopeType, held.resourceId)] == [first["claimId"]]
        return
    got = claims.claim(net.principals[who], requested.request())
    if outcome == "renewed":
        assert got["claimId"] == first["claimId"] and got["fencingToken"] == first["fencingToken"]
        assert clock.parse_iso(got["expiresAt"]) == now[0] + 3600 * 1000 > clock.parse_iso(first["expiresAt"])
    else:
        assert got["claimId"] != first["claimId"] and got["fencingToken"] > first["fencingToken"]
        assert got["scopeType"] == requested.scopeType


def _valid(scope):
    try:
        return globs.normalise(scope)
    except globs.GlobError:
        return None


@settings(max_examples=300, deadline=None)
@given(patterns, paths)
def test_every_path_a_scope_matches_lies_under_its_anchor(pattern, path):
    """The layout's one assumption (relaynet.claims): a claim's anchor is a segment prefix of
    every path its glob matches, so a claim need only read its anchor's ancestors and subtree."""
    scope = _valid(pattern)
    if scope is None or not globs.matches(globs.compile_scope(scope), path):
        return
    at = claims.anchor("path", scope)
    assert tuple(path.split("/")[:len(at)]) == at


_examples = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2), patterns, st.booleans()), min_size=1, max_size=7))
def test_claims_on_the_tree_answer_as_the_brute_force_oracle(net, now, steps):
    """Each step is (instance, glob, release it after): claimed in order, on the real layout, the
    answers are exactly the oracle's over the live claims (relaynet.globs.overlaps, itself tested
    against brute force in tests/test_globs.py): granted with a token above every earlier
    overlapping claim's, renewed, or 409 naming exactly the overlapping claims of other
    instances. Each example gets a namespace of its own (a resourceId)."""
    ns = f"github.com/acme/example{next(_examples)}"
    live: dict[tuple[int, str], dict] = {}  # (instance, scope) -> claim view
    issued: list[tuple[str, int]] = []  # (scope, token) of every grant so far
    for who, pattern, drop in steps:
        scope = _valid(pattern)
        if scope is None:
            continue
        p = net.principals[f"coder{who}"]
        expected = sorted(c["claimId"] for (i, sc), c in live.items() if i != who and globs.overlaps(scope, sc))
        try:
            got = claim(p, scope, scopeType="resource", resourceId=ns)
        except ClaimConflict as err:
            assert sorted(c["claimId"] for c in err.details["conflicts"]) == expected
            assert expected
            continue
        assert expected == []
        if (who, scope) in live:
            assert got["claimId"] == live[(who, scope)]["claimId"]  # a renewal
        else:
            assert all(got["fencingToken"] > tok for sc, tok in issued if globs.overlaps(scope, sc))
            issued.append((scope, got["fencingToken"]))
        live[(who, scope)] = got
        if drop:
            assert release(p, got["claimId"])["released"] is True
            del live[(who, scope)]
    on_tree = {c["id"] for c in tree_claims(net.network_id, "resource", ns)}
    assert on_tree == {c["claimId"] for c in live.values()}  # nothing pending or refused is left behind


# ------------------------------------------------------------------ 4.9 sentence by sentence


def test_success_returns_the_claim_with_its_normalised_scope_and_no_holder(net, now):
    task = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective="x", toAgent="coder"))
    got = claim(net.principals["coder0"], " ./src//api/ ", scopeType="resource",
                resourceId="https://github.com/acme/api.git", taskId=task["taskId"], ttlSeconds=90)
    assert set(got) == {"claimId", "scopeType", "scope", "resourceId", "taskId", "expiresAt", "fencingToken"}
    assert got["claimId"].startswith("clm_") and got["scope"] == "src/api/**"
    assert got["scopeType"] == "resource" and got["resourceId"] == API and got["taskId"] == task["taskId"]
    assert got["expiresAt"] == clock.iso(now[0] + 90_000) and got["fencingToken"] == now[0]  # the ms floor


def test_scope_type_defaults_to_path_and_ttl_to_an_hour(net, now):
    got = claim(net.principals["coder0"], "src/**")
    assert got["scopeType"] == "path" and got["resourceId"] is None and got["taskId"] is None
    assert got["expiresAt"] == clock.iso(now[0] + 3_600_000)


def test_ttl_seconds_is_1_to_86400():
    for bad in (0, 86401, -5):
        with pytest.raises(ValidationError):
            w.ClaimRequest(scope="x", ttlSeconds=bad)
    assert w.ClaimRequest(scope="x", ttlSeconds=86400).ttlSeconds == 86400


def test_a_conflict_names_every_overlapping_claim_of_other_instances_and_writes_nothing(net, now):
    a, b, c = (net.principals[f"coder{i}"] for i in range(3))
    mine = claim(c, "src/lib/x.py")  # c's own claim is never a conflict for c
    first = claim(a, "src/api/**")
    second = claim(b, "src/web/*.py")
    claim(b, "docs/**")
    before = stored(net.network_id)
    with pytest.raises(ClaimConflict) as err:
        claim(c, "src/**")
    conflicts = err.value.details["conflicts"]
    assert [x["claimId"] for x in conflicts] == [first["claimId"], second["claimId"]]
    assert conflicts[0] == {"claimId": first["claimId"], "scope": "src/api/**", "expiresAt": first["expiresAt"],
                            "holder": {"agent": "coder", "instanceId": a.instance_id}}
    assert mine["claimId"] not in {x["claimId"] for x in conflicts}
    assert stored(net.network_id) == before


def test_a_task_id_must_name_a_task_of_the_network(net, now):
    with pytest.raises(NotFound):
        claim(net.principals["coder0"], "src/**", taskId="task_01ABCDEFGHJKMNPQRSTVWXYZ01")
    assert stored(net.network_id) == []


def test_an_unknown_task_is_404_before_a_conflict_is_409_and_a_renewal_checks_it_too(net, now):
    mine = claim(net.principals["coder0"], "src/**")
    before = stored(net.network_id)
    with pytest.raises(NotFound):  # would also conflict with coder0's claim: existence first (PROTOCOL.md 2)
        claim(net.principals["coder1"], "src/api/**", taskId="task_01ABCDEFGHJKMNPQRSTVWXYZ01")
    with pytest.raises(NotFound):  # coder0 renewing its own claim under a task that does not exist
        claim(net.principals["coder0"], "src/**", taskId="task_01ABCDEFGHJKMNPQRSTVWXYZ01")
    assert stored(net.network_id) == before
    assert claim(net.principals["coder0"], "src/**")["claimId"] == mine["claimId"]


MALFORMED = [
    ("src/[ab", "an unclosed class"),
    ("src/{a,b", "an unclosed brace"),
    ("src/../etc", "a .. segment"),
    ("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}", "more than 32 alternatives"),
    ("src/[z-a].py", "a reversed range"),
    ("src/[].py", "an empty class"),
]


@pytest.mark.parametrize("scope_type", ["path", "resource"])
@pytest.mark.parametrize("scope", [pytest.param(s, id=why) for s, why in MALFORMED])
def test_a_malformed_glob_is_400_naming_the_scope_field(net, scope, scope_type):
    with pytest.raises(InvalidArgument) as err:
        claim(net.principals["coder0"], scope, scopeType=scope_type)
    assert err.value.status == 400
    (field,) = err.value.details["fields"]
    assert field["field"] == "scope" and field["message"]
    assert stored(net.network_id) == []


def test_a_scope_over_1024_characters_is_400_in_the_model_and_in_the_domain(net):
    with pytest.raises(ValidationError):
        w.ClaimRequest(scope="a" * 1025)
    for scope_type in ("path", "resource", "task"):  # the domain checks too, whoever calls it
        req = w.ClaimRequest.model_construct(scope="a" * 1025, scopeType=scope_type, resourceId=None,
                                             taskId=None, ttlSeconds=60)
        with pytest.raises(InvalidArgument) as err:
            claims.claim(net.principals["coder0"], req)
        assert err.value.details["fields"][0]["field"] == "scope"
    assert claim(net.principals["coder0"], "a" * 1024)["scope"] == "a" * 1024


def test_an_empty_task_scope_and_a_bad_resource_id_are_400(net):
    with pytest.raises(InvalidArgument) as err:
        claim(net.principals["coder0"], "   ", scopeType="task")
    assert err.value.details["fields"][0]["field"] == "scope"
    with pytest.raises(InvalidArgument) as err:
        claim(net.principals["coder0"], "src/**", scopeType="resource", resourceId="/home/me/repo")
    assert err.value.details["fields"][0]["field"] == "resourceId"


def test_a_renewal_gets_a_new_expiry_and_keeps_id_and_token_while_new_claims_keep_counting(net, now):
    a, b = net.principals["coder0"], net.principals["coder1"]
    t0 = now[0]
    first = claim(a, "src/**", ttlSeconds=10)
    claim(b, "docs/**")
    now[0] = t0 + 5000
    again = claim(a, "src/", ttlSeconds=8)
    assert (again["claimId"], again["fencingToken"]) == (first["claimId"], first["fencingToken"])
    assert again["expiresAt"] == clock.iso(t0 + 13_000)
    now[0] = t0 + 12_999  # alive only thanks to the renewal
    with pytest.raises(ClaimConflict):
        claim(b, "src/a.py")
    now[0] = t0 + 13_000
    assert claim(b, "src/a.py")["fencingToken"] > first["fencingToken"]


def test_a_renewal_may_shorten_the_claim(net, now):
    a, b = net.principals["coder0"], net.principals["coder1"]
    t0 = now[0]
    claim(a, "src/**", ttlSeconds=60)
    assert claim(a, "src/**", ttlSeconds=1)["expiresAt"] == clock.iso(t0 + 1000)  # now + ttl, whatever it was
    now[0] = t0 + 1000
    claim(b, "src/**")


def test_a_renewal_may_attach_the_claim_to_a_task(net, now):
    task = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective="x", toAgent="coder"))
    a = net.principals["coder0"]
    first = claim(a, "src/**")
    again = claim(a, "src/**", taskId=task["taskId"])
    assert again["claimId"] == first["claimId"] and again["taskId"] == task["taskId"]
    assert [c["claimId"] for c in claims.active_for_task(net.network_id, task["taskId"])] == [first["claimId"]]
    assert claim(a, "src/**")["taskId"] == task["taskId"]  # renewing without taskId keeps it


def test_fencing_tokens_strictly_increase_across_overlapping_claims_whoever_holds_them(net, now):
    """docs/protocol.md 4.9: a claim whose scope overlaps an earlier claim's gets a larger token,
    even when the earlier one was released or lapsed, at another anchor, and the clock stands
    still or goes back (the anchors' high-water marks carry the tokens)."""
    ps = [net.principals[f"coder{i}"] for i in range(3)]
    tokens = []
    scopes = ["src/**", "src/a.py", "**/*.py", "src/a.py", "src/{a,b}.py", "src/", "*/a.py", "src/a.py"]
    for n, scope in enumerate(scopes):
        got = claim(ps[n % 3], scope, ttlSeconds=1)
        tokens.append(got["fencingToken"])
        if n % 3 == 2:
            now[0] += 1000  # it lapses
        else:
            release(ps[n % 3], got["claimId"])
            now[0] -= 5000  # ... and the next caller's clock is behind
    assert all(x < y for x, y in zip(tokens, tokens[1:])), tokens


def test_claims_that_cannot_overlap_are_not_ordered_and_never_read_each_other(net, now):
    a, b = net.principals["coder0"], net.principals["coder1"]
    first = claim(a, "soak/a1/**")
    second = claim(b, "soak/b2/**")
    assert first["fencingToken"] == second["fencingToken"] == now[0]  # both the ms floor: no shared counter


def test_two_claims_of_one_instance_that_overlap_are_both_held(net, now):
    a = net.principals["coder0"]
    wide, narrow = claim(a, "src/**"), claim(a, "src/a.py")
    assert wide["claimId"] != narrow["claimId"]
    with pytest.raises(ClaimConflict) as err:
        claim(net.principals["coder1"], "src/a.py")
    assert {c["claimId"] for c in err.value.details["conflicts"]} == {wide["claimId"], narrow["claimId"]}


# ------------------------------------------------------------------ expiry


def test_a_claim_with_ttl_2_blocks_then_lapses_and_another_instance_gets_the_scope(net, now):
    a, b = net.principals["coder0"], net.principals["coder1"]
    t0 = now[0]
    held = claim(a, "src/**", ttlSeconds=2)
    now[0] = t0 + 1999
    with pytest.raises(ClaimConflict):
        claim(b, "src/a.py")
    now[0] = t0 + 2000  # expiresAt reached: inactive at once
    item = t.get(*k.claim(net.network_id, held["claimId"]))
    assert item is not None and item["ttl"] > now[0] // 1000  # DynamoDB still has it; TTL is far off
    got = claim(b, "src/a.py")
    assert got["fencingToken"] > held["fencingToken"]
    # ... and the item still exists, moved out of the hot partition by that claim's transaction
    ended = t.get(*k.ended_claim(net.network_id, held["claimId"]))
    assert ended["endReason"] == "expired" and ended["endedAt"] == t0 + 2000
    assert release(a, held["claimId"]) == {"claimId": held["claimId"], "released": False, "reason": "expired"}


def test_every_read_ignores_claims_past_expires_at(net, now):
    task = tasks.delegate(net.principals["boss0"], w.DelegateRequest(objective="x", toAgent="coder"))
    a = net.principals["coder0"]
    held = claim(a, "src/**", taskId=task["taskId"], ttlSeconds=30)
    now[0] += 30_000
    assert t.get(*k.claim(net.network_id, held["claimId"])) is not None  # still in the hot partition
    assert claims.active_for_task(net.network_id, task["taskId"]) == []  # network_task_get
    assert release(a, held["claimId"])["reason"] == "expired"  # network_release
    assert claims.release_for_task(net.network_id, task["taskId"]) == 0  # a terminal task
    again = claim(a, "src/**")  # no renewal of a lapsed claim: a new claim with a new token
    assert again["claimId"] != held["claimId"] and again["fencingToken"] > held["fencingToken"]


# ------------------------------------------------------------------ 4.10 and terminal tasks


def test_only_the_holder_instance_may_release(net, now):
    a, b, other_agent = net.principals["coder0"], net.principals["coder1"], net.principals["tester0"]
    held = claim(a, "src/**")
    for intruder in (b, other_agent):
        with pytest.raises(PermissionDenied):
            release(intruder, held["claimId"])
    assert release(a, held["claimId"]) == {"claimId": held["claimId"], "released": True}
    with pytest.raises(PermissionDenied):  # still 403 once released (permission before state)
        release(b, held["claimId"])
    assert release(a, held["claimId"]) == {"claimId": held["claimId"], "released": False, "reason": "already_released"}
    assert claim(b, "src/a.py")["fencingToken"] > held["fencingToken"]


def test_a_representative_releases_any_claim_of_the_network(net, now):
    held = claim(net.principals["coder0"], "src/**")
    rep = Principal(kind="representative", network_id=net.network_id, rep="ops")
    assert release(rep, held["claimId"], any_holder=True)["released"] is True
    assert release(net.principals["coder0"], held["claimId"])["reason"] == "already_released"


def test_an_unknown_claim_is_404_and_so_is_another_networks(net, now):
    with pytest.raises(NotFound):
        release(net.principals["coder0"], "clm_01ABCDEFGHJKMNPQRSTVWXYZ01")
    held = claim(net.principals["coder0"], "src/**")
    elsewhere = apply(SPEC.replace("network: claims", f"network: other{next(_networks)}"))
    with pytest.raises(NotFound):
        release(elsewhere.principals["coder0"], held["claimId"])


def test_a_terminal_task_releases_its_active_claims_and_only_those(net, now):
    boss = net.principals["boss0"]
    task = tasks.delegate(boss, w.DelegateRequest(objective="x", toAgent="coder"))
    coder = next(p for p in net.principals.values() if p.instance_id == task["assignee"])
    tasks.update(coder, w.TaskUpdateRequest(taskId=task["taskId"], status="accepted"))
    mine = [claim(coder, s, taskId=task["taskId"])["claimId"] for s in ("src/**", "deploy")]
    lapsing = claim(coder, "docs/**", taskId=task["taskId"], ttlSeconds=1)
    unrelated = claim(coder, "lib/**")
    now[0] += 1000
    tasks.update(coder, w.TaskUpdateRequest(taskId=task["taskId"], status="working"))
    tasks.update(coder, w.TaskUpdateRequest(taskId=task["taskId"], status="completed", reason="done"),
                 on_terminal=claims.release_for_task)
    assert claims.active_for_task(net.network_id, task["taskId"]) == []
    assert [release(coder, c)["reason"] for c in mine] == ["already_released"] * 2
    assert release(coder, lapsing["claimId"])["reason"] == "expired"
    assert release(coder, unrelated["claimId"])["released"] is True


# ------------------------------------------------------------------ serialisation


def _interleave(monkeypatch, rival, *, at):
    """Run ``rival()`` once, inside our claim, right after our step ``at``: ``announce`` (our
    pending item is written, nothing read) or ``read`` (we read the region, nothing decided)."""
    from relaynet.store import claims as store

    name = {"announce": "announce", "read": "read_around"}[at]
    real = getattr(store, name)
    out = {}

    def step(*args, **kw):
        got = real(*args, **kw)
        if not out:
            out["rival"] = None
            monkeypatch.setattr(store, name, real)
            out["rival"] = rival()
        return got

    monkeypatch.setattr(store, name, step)
    return out


@pytest.mark.parametrize("at", ["announce", "read"])
def test_a_rival_granted_between_our_steps_wins_and_we_get_409_naming_it(net, now, monkeypatch, at):
    """Write, then read: a rival that claims an overlapping scope after our announcement, before
    we read (it sees us pending and defeats us) or after we read (it defeats us after we saw
    nothing of it) wins, and our grant is cancelled and answered 409 naming it."""
    a, b = net.principals["coder0"], net.principals["coder1"]
    raced = _interleave(monkeypatch, lambda: claim(b, "src/a.py"), at=at)
    with pytest.raises(ClaimConflict) as err:
        claim(a, "src/**")
    assert [c["claimId"] for c in err.value.details["conflicts"]] == [raced["rival"]["claimId"]]
    assert [c["id"] for c in tree_claims(net.network_id)] == [raced["rival"]["claimId"]]


def test_a_renewal_and_a_new_claim_judged_by_different_clocks_never_both_succeed(net, now, monkeypatch):
    """The holder's clock says its claim is still alive and renews it; another instance's clock
    says it lapsed and claims the scope, committing between the holder's read and its write.
    The new claim moved the lapsed item on ``expiresAt = :seen``, so the renewal (on the same
    condition) is cancelled, announces again, and is answered 409."""
    a, b = net.principals["coder0"], net.principals["coder1"]
    t0 = now[0]
    held = claim(a, "src/**", ttlSeconds=10)
    real_transact = t.transact
    rival = {}

    def transact_late(actions, token=None):
        if not rival:
            rival["claim"] = None
            now[0] = t0 + 10_001  # b's clock: a's claim lapsed
            rival["claim"] = claim(b, "src/a.py")
            now[0] = t0 + 9_999  # a's clock again
        return real_transact(actions, token)

    now[0] = t0 + 9_999
    monkeypatch.setattr(t, "transact", transact_late)
    with pytest.raises(ClaimConflict) as err:
        claim(a, "src/**", ttlSeconds=10)  # a renewal, by a's clock
    assert [c["claimId"] for c in err.value.details["conflicts"]] == [rival["claim"]["claimId"]]
    ended = t.get(*k.ended_claim(net.network_id, held["claimId"]))
    assert ended["endReason"] == "expired" and ended["expiresAt"] == t0 + 10_000  # not renewed


def test_a_release_racing_a_renewal_loses_nothing(net, now, monkeypatch):
    """The holder renews while its release is in flight: the release's conditional delete sees
    the new expiry, looks again and still releases."""
    a = net.principals["coder0"]
    held = claim(a, "src/**", ttlSeconds=10)
    real_transact = t.transact
    raced = []

    def renew_first(actions, token=None):
        if not raced:
            raced.append(None)
            raced[0] = claim(a, "src/**", ttlSeconds=100)
        return real_transact(actions, token)

    monkeypatch.setattr(t, "transact", renew_first)
    assert release(a, held["claimId"])["released"] is True
    assert raced[0]["claimId"] == held["claimId"]
    assert t.get(*k.claim(net.network_id, held["claimId"])) is None


# ------------------------------------------------------------------ the hot partition stays small


def test_released_and_lapsed_claims_leave_the_tree_when_a_claim_reads_their_region(net, now):
    a = net.principals["coder0"]
    kept = claim(a, "src/keep/**", ttlSeconds=3600)
    for n in range(10):
        release(a, claim(a, f"src/released{n}/**")["claimId"])
    lapsing = [claim(a, f"src/lapsing{n}/**", ttlSeconds=1)["claimId"] for n in range(claims.MOVE_PER_CALL + 4)]
    assert [i["id"] for i in tree_claims(net.network_id)] == [kept["claimId"], *lapsing]
    now[0] += 1000
    elsewhere = claim(a, "docs/**")  # reads nothing under src/: moves nothing
    assert [i["id"] for i in tree_claims(net.network_id)] == [kept["claimId"], *lapsing, elsewhere["claimId"]]
    first = claim(a, "src/**")  # moves MOVE_PER_CALL lapsed claims it does not overlap... it overlaps them all
    assert [i["id"] for i in tree_claims(net.network_id)] == [kept["claimId"], elsewhere["claimId"], first["claimId"]]
    for c in lapsing:
        assert t.get(*k.ended_claim(net.network_id, c))["endReason"] == "expired"


def test_a_claim_reads_only_its_region_whatever_the_network_holds_elsewhere(net, now):
    """Announce, the marks of the anchor's ancestors beside one Query of its subtree, a Query of
    each marked ancestor only, one grant; 30 released and 5 live claims elsewhere are never read
    (ScannedCount)."""
    a = net.principals["coder0"]
    for n in range(30):
        release(a, claim(a, f"old{n}/**")["claimId"])
    for n in range(5):
        claim(a, f"live{n}/**")
    calls = []

    def record(http_response, parsed, model, **_):
        calls.append((model.name, parsed.get("ScannedCount")))

    client = t.client()
    client.meta.events.register("after-call.dynamodb", record, unique_id="test-claims-count")
    try:
        claim(net.principals["coder1"], "src/api/**")
        granted = list(calls)
        calls.clear()
        with pytest.raises(ClaimConflict):
            claim(net.principals["coder1"], "live0/a.py")
    finally:
        client.meta.events.unregister("after-call.dynamodb", unique_id="test-claims-count")
    def in_order(seen):  # the reads go out at once: their answers come back in any order
        return [seen[0], *sorted(seen[1:-1], key=str), seen[-1]]

    # announce (with src/api's mark); the marks of root and src (none) beside src/api's subtree
    # (our announcement and its mark); grant
    assert in_order(granted) == [("TransactWriteItems", None), ("BatchGetItem", None), ("Query", 2),
                                 ("TransactWriteItems", None)]
    # announce; the marks (live0 has one, from coder0's claim) beside live0/a.py's subtree (ours
    # and its mark); live0's items (coder0's claim and the mark); withdrawn
    assert in_order(calls) == [("TransactWriteItems", None), ("BatchGetItem", None), ("Query", 2), ("Query", 2),
                               ("DeleteItem", None)]
