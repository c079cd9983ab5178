"""The worker surface's domain on moto, sentence by sentence of PROTOCOL.md 4."""

from __future__ import annotations

import time

import pytest

from relaynet import admin, artifacts, claims, directory, messaging, sweep, tasks
from relaynet.errors import ClaimConflict, InvalidArgument, InvalidTransition, NotFound, PermissionDenied
from relaynet.models import worker as w
from relaynet.store import keys as k
from relaynet.store import table as t
from tests.conftest import DEMO_SPEC, apply


def _ids(result):
    return [m["id"] for m in result["messages"]]


# 4.1 / 4.12 ---------------------------------------------------------------------------------

def test_whoami_names_instance_agent_and_network(demo):
    me = demo.principals["planner0"]
    out = directory.whoami(me)
    assert out["instance"]["id"] == me.instance_id
    assert out["instance"]["availability"] == "available"
    assert out["agent"]["name"] == "planner"
    assert out["agent"]["capabilities"][0]["id"] == "plan"
    assert out["network"] == {"id": demo.network_id, "name": "demo"}


def test_registered_capabilities_replace_the_previous_declaration_and_show_in_discovery(demo):
    me = demo.principals["coder0"]
    directory.register_capabilities(me, w.RegisterCapabilitiesRequest(capabilities=[{"id": "python", "name": "Python"}]))
    out = directory.register_capabilities(me, w.RegisterCapabilitiesRequest(capabilities=[{"id": "go", "name": "Go"}]))
    assert out == {"registered": [{"id": "go", "name": "Go"}], "count": 1}
    found = directory.discover(me, w.DiscoverRequest(), [])
    coder = next(a for a in found["agents"] if a["name"] == "coder")
    sources = {(c["id"], c["source"]) for c in coder["capabilities"]}
    assert ("implement", "definition") in sources and ("go", "instance") in sources
    assert ("python", "instance") not in sources
    assert directory.whoami(me)["agent"]["capabilities"] == [{"id": "implement", "name": "Implement",
                                                              "description": "Writes and changes code with tests"}]


def test_duplicate_capability_ids_are_refused():
    with pytest.raises(ValueError, match="duplicate capability id"):
        w.RegisterCapabilitiesRequest(capabilities=[{"id": "a", "name": "A"}, {"id": "a", "name": "B"}])


# 4.2 ----------------------------------------------------------------------------------------

def test_discover_ranks_candidates_for_a_resource_and_action(demo):
    me = demo.principals["planner0"]
    out = directory.discover(me, w.DiscoverRequest(resourceKey="git@github.com:acme/api.git", action="implement"), [])
    assert [c["agent"] for c in out["candidates"]] == ["coder"]
    cand = out["candidates"][0]
    assert cand["resourceMatch"] == "exact" and cand["matchingActions"] == ["implement"]
    assert cand["availability"] == "available" and cand["instanceId"].startswith("inst_")
    assert {g["slug"] for g in out["groups"]} == {"core", "reviewers"}
    assert out["resources"][0]["key"] == "github.com/acme/api"


def test_discover_refuses_a_local_path_as_resource_key(demo):
    with pytest.raises(InvalidArgument) as err:
        directory.discover(demo.principals["planner0"], w.DiscoverRequest(resourceKey="/home/me/api"), [])
    assert err.value.details["fields"][0]["field"] == "resourceKey"


# 4.3 / 4.4 / 4.5 ----------------------------------------------------------------------------

def test_ask_to_a_group_reaches_each_member_but_not_the_sender(demo):
    planner, coder0 = demo.principals["planner0"], demo.principals["coder0"]
    out = messaging.ask(coder0, w.AskRequest(body="standup?", toAgent="core"))
    assert out["recipients"] == [{"agent": "planner"}]
    got = messaging.inbox(planner)["messages"]
    assert [m["body"] for m in got] == ["standup?"]
    assert "network_reply" in got[0]["instructions"]
    assert messaging.inbox(demo.principals["coder1"])["messages"] == []


def test_a_message_goes_to_exactly_one_instance_and_is_never_shown_again(demo):
    planner = demo.principals["planner0"]
    messaging.ask(planner, w.AskRequest(body="who takes this?", toAgent="coder"))
    first = messaging.inbox(demo.principals["coder0"])["messages"]
    second = messaging.inbox(demo.principals["coder1"])["messages"]
    assert len(first) + len(second) == 1
    assert messaging.inbox(demo.principals["coder0"])["messages"] == []


def test_an_instance_never_receives_its_own_message(demo):
    coder0, coder1 = demo.principals["coder0"], demo.principals["coder1"]
    messaging.ask(coder0, w.AskRequest(body="note to my agent", toAgent="coder"))
    assert messaging.inbox(coder0)["messages"] == []
    assert [m["body"] for m in messaging.inbox(coder1)["messages"]] == ["note to my agent"]


def test_reading_never_removes_a_message_from_its_thread(demo):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    out = messaging.ask(planner, w.AskRequest(body="review?", toAgent="reviewer"))
    messaging.inbox(reviewer)
    stored = t.query(k.thread_pk(demo.network_id, out["threadId"]), sk_prefix="MSG#")
    assert [m["body"] for m in stored] == ["review?"]


def test_inbox_is_oldest_first_and_capped_at_100_with_more(demo):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    sent = [messaging.ask(planner, w.AskRequest(body=f"m{i}", toAgent="reviewer"))["messageId"] for i in range(105)]
    first = messaging.inbox(reviewer)
    assert _ids(first) == sent[:100] and first["more"] is True
    second = messaging.inbox(reviewer)
    assert _ids(second) == sent[100:] and second["more"] is False


def test_unknown_recipient_thread_or_task_is_404_and_stores_nothing(demo):
    planner = demo.principals["planner0"]
    before = len(t.query(f"NET#{demo.network_id}#MBOX#A#nobody"))
    for req in (w.AskRequest(body="x", toAgent="nobody"), w.AskRequest(body="x", toInstance="inst_01ABCDEFGHJKMNPQRSTVWXYZ01"),
                w.AskRequest(body="x", threadId="thr_01ABCDEFGHJKMNPQRSTVWXYZ01"),
                w.AskRequest(body="x", toAgent="coder", taskId="task_01ABCDEFGHJKMNPQRSTVWXYZ01")):
        with pytest.raises(NotFound):
            messaging.ask(planner, req)
    assert before == 0
    assert messaging.inbox(demo.principals["coder0"])["messages"] == []


def test_only_participants_may_write_in_a_thread(demo):
    planner, coder = demo.principals["planner0"], demo.principals["coder0"]
    thread = messaging.ask(planner, w.AskRequest(body="private", toAgent="reviewer"))["threadId"]
    with pytest.raises(PermissionDenied):
        messaging.reply(coder, w.ReplyRequest(threadId=thread, body="me too"))
    with pytest.raises(PermissionDenied):
        messaging.ask(coder, w.AskRequest(body="me too", threadId=thread))


def test_reply_goes_to_the_most_recent_other_participant(demo):
    planner, reviewer = demo.principals["planner0"], demo.principals["reviewer0"]
    thread = messaging.ask(planner, w.AskRequest(body="review please", toAgent="reviewers"))["threadId"]
    messaging.inbox(reviewer)
    out = messaging.reply(reviewer, w.ReplyRequest(threadId=thread, body="looks good"))
    assert out["recipients"] == [{"agent": "planner"}]
    assert [m["body"] for m in messaging.inbox(planner)["messages"]] == ["looks good"]
    # the planner posted first; now it replies, and the reviewer (last other poster) gets it
    assert messaging.reply(planner, w.ReplyRequest(threadId=thread, body="thanks"))["recipients"] == [{"agent": "reviewer"}]


def test_reply_when_the_caller_posted_everything_goes_to_the_last_addressee(demo):
    planner = demo.principals["planner0"]
    thread = messaging.ask(planner, w.AskRequest(body="anyone?", toAgent="reviewer"))["threadId"]
    assert messaging.reply(planner, w.ReplyRequest(threadId=thread, body="ping"))["recipients"] == [{"agent": "reviewer"}]


# 4.6 / 4.7 / 4.8 ----------------------------------------------------------------------------

def _delegate(p, **kw):
    return tasks.delegate(p, w.DelegateRequest(objective=kw.pop("objective", "Add a health endpoint"), **kw))


def test_delegating_to_an_agent_offers_to_one_live_instance(demo):
    planner = demo.principals["planner0"]
    out = _delegate(planner, toAgent="coder", acceptanceCriteria=["GET /health answers 200"])
    assert out["state"] == "offered"
    assert out["assignee"] in {demo.principals["coder0"].instance_id, demo.principals["coder1"].instance_id}
    offers = [m for p in ("coder0", "coder1") for m in messaging.inbox(demo.principals[p])["messages"]]
    assert [m["kind"] for m in offers] == ["task_offer"]
    assert "accept" in offers[0]["instructions"]


def test_delegating_to_an_unknown_target_is_404_and_creates_nothing(demo):
    with pytest.raises(NotFound) as err:
        _delegate(demo.principals["planner0"], toAgent="ghost")
    assert "coder" in err.value.details["available"]
    assert tasks.recent(demo.network_id) == []


def test_an_untargeted_task_needs_a_resource(demo):
    with pytest.raises(InvalidArgument) as err:
        _delegate(demo.principals["planner0"])
    assert err.value.details["fields"][0]["field"] == "resource"


def test_untargeted_tasks_go_to_agents_responsible_for_the_resource_never_the_creator(demo):
    planner = demo.principals["planner0"]
    out = _delegate(planner, resource="https://github.com/acme/api.git")
    task = tasks.load_task(demo.network_id, out["taskId"])
    assert task["target"] == {"resource": "github.com/acme/api"}
    assert out["assignee"] != planner.instance_id


def test_a_task_for_a_resource_nobody_owns_stays_pending(demo):
    out = _delegate(demo.principals["planner0"], resource="github.com/acme/other")
    assert out == {"taskId": out["taskId"], "state": "pending"}


def test_the_full_happy_path_records_history_and_notifies_the_creator(demo):
    planner = demo.principals["planner0"]
    out = _delegate(planner, toAgent="coder")
    coder = next(p for p in demo.principals.values() if p.instance_id == out["assignee"])
    for status, reason in (("accepted", None), ("working", None), ("completed", "tests pass: 12/12")):
        res = tasks.update(coder, w.TaskUpdateRequest(taskId=out["taskId"], status=status, reason=reason))
    assert res["task"]["state"] == "completed"
    assert [h["state"] for h in res["task"]["history"]] == ["pending", "offered", "accepted", "working", "completed"]
    assert res["task"]["history"][1]["actor"] == {"system": "router"}
    assert res["task"]["history"][-1]["reason"] == "tests pass: 12/12"
    notices = messaging.inbox(planner)["messages"]
    assert [m["kind"] for m in notices] == ["task_update"] * 3


def test_only_the_offered_instance_may_accept_an_offer(demo):
    out = _delegate(demo.principals["planner0"], toAgent="coder")
    other = next(p for n, p in demo.principals.items() if n.startswith("coder") and p.instance_id != out["assignee"])
    with pytest.raises(PermissionDenied):
        tasks.update(other, w.TaskUpdateRequest(taskId=out["taskId"], status="accepted"))


def test_a_disallowed_move_is_409_with_the_allowed_states(demo):
    out = _delegate(demo.principals["planner0"], toAgent="coder")
    coder = next(p for p in demo.principals.values() if p.instance_id == out["assignee"])
    with pytest.raises(InvalidTransition) as err:
        tasks.update(coder, w.TaskUpdateRequest(taskId=out["taskId"], status="working"))
    assert err.value.details["allowed"] == ["accepted", "cancelled"]


def test_completing_requires_evidence(demo):
    out = _delegate(demo.principals["planner0"], toAgent="coder")
    coder = next(p for p in demo.principals.values() if p.instance_id == out["assignee"])
    with pytest.raises(InvalidArgument):
        tasks.update(coder, w.TaskUpdateRequest(taskId=out["taskId"], status="completed", reason="  "))


def test_the_creator_may_cancel_and_a_terminal_task_releases_its_claims(demo):
    planner = demo.principals["planner0"]
    out = _delegate(planner, toAgent="coder")
    coder = next(p for p in demo.principals.values() if p.instance_id == out["assignee"])
    tasks.update(coder, w.TaskUpdateRequest(taskId=out["taskId"], status="accepted"))
    claims.claim(coder, w.ClaimRequest(scope="src/**", taskId=out["taskId"]))
    res = tasks.update(planner, w.TaskUpdateRequest(taskId=out["taskId"], status="cancelled", reason="scope changed"),
                       on_terminal=claims.release_for_task)
    assert res["task"]["state"] == "cancelled"
    assert claims.active_for_task(demo.network_id, out["taskId"]) == []
    assert any(m["kind"] == "task_update" for m in messaging.inbox(coder)["messages"])


def test_an_eligible_instance_may_pull_a_pending_task(table):
    net = apply("network: n\nagents:\n  - {name: boss, instances: 1}\n  - {name: worker}\n")
    out = _delegate(net.principals["boss0"], toAgent="worker")
    assert out["state"] == "pending"
    launched = admin.launch("n", "worker")
    from relaynet.identity import authorize
    worker = authorize(launched["token"])
    res = tasks.update(worker, w.TaskUpdateRequest(taskId=out["taskId"], status="accepted"))
    assert res["task"]["assignee"] == worker.instance_id


def test_the_sweep_offers_a_pending_task_once_an_instance_exists(table):
    net = apply("network: n\nagents:\n  - {name: boss, instances: 1}\n  - {name: worker}\n")
    out = _delegate(net.principals["boss0"], toAgent="worker")
    assert sweep.run()["offered"] == 0  # parked: nobody is eligible yet
    launched = admin.launch("n", "worker")
    assert sweep.run()["offered"] == 1
    assert tasks.load_task(net.network_id, out["taskId"])["assignee"] == launched["instanceId"]


def test_an_expired_offer_returns_to_pending_and_goes_to_another_instance(demo, monkeypatch):
    from relaynet.config import settings

    monkeypatch.setenv("RELAYNET_OFFER_TTL_SECONDS", "30")
    settings.cache_clear()
    out = _delegate(demo.principals["planner0"], toAgent="coder")
    first = out["assignee"]
    task = tasks.load_task(demo.network_id, out["taskId"])
    stats = sweep.run(now_ms=int(task["offerExpiresAt"]) + 1)
    assert stats["expired"] == 1 and stats["offered"] == 1
    after = tasks.load_task(demo.network_id, out["taskId"])
    assert after["state"] == "offered" and after["assignee"] != first and after["attempts"] == 2
    assert [h["state"] for h in after["history"]] == ["pending", "offered", "pending", "offered"]


def test_task_get_shows_artifacts_and_claims(demo):
    planner = demo.principals["planner0"]
    out = _delegate(planner, toAgent="coder")
    coder = next(p for p in demo.principals.values() if p.instance_id == out["assignee"])
    art = artifacts.publish(coder, w.PublishArtifactRequest(uri="https://ci.example.com/run/1", type="test_report",
                                                            taskId=out["taskId"]))
    assert art["ref"] == f"relaynet://{demo.network_id}/artifacts/{art['artifactId']}"
    claims.claim(coder, w.ClaimRequest(scope="src/api/**", taskId=out["taskId"]))
    got = tasks.get(planner, w.TaskGetRequest(taskId=out["taskId"]), claims.active_for_task)["task"]
    assert [a["artifactId"] for a in got["artifacts"]] == [art["artifactId"]]
    assert [c["scope"] for c in got["claims"]] == ["src/api/**"]


def test_artifacts_refuse_unknown_tasks_and_schemes(demo):
    coder = demo.principals["coder0"]
    with pytest.raises(NotFound):
        artifacts.publish(coder, w.PublishArtifactRequest(uri="https://x.example/a", taskId="task_01ABCDEFGHJKMNPQRSTVWXYZ01"))
    with pytest.raises(InvalidArgument):
        artifacts.publish(coder, w.PublishArtifactRequest(uri="ftp://x.example/a"))


# 4.9 / 4.10 ---------------------------------------------------------------------------------

def test_an_overlapping_claim_of_another_instance_is_409_naming_the_holder(demo):
    a, b = demo.principals["coder0"], demo.principals["coder1"]
    first = claims.claim(a, w.ClaimRequest(scope="src/api/**"))
    with pytest.raises(ClaimConflict) as err:
        claims.claim(b, w.ClaimRequest(scope="./src/api/handlers.py"))
    (conflict,) = err.value.details["conflicts"]
    assert conflict["claimId"] == first["claimId"] and conflict["holder"]["instanceId"] == a.instance_id


def test_claiming_the_same_scope_again_renews_it_with_the_same_id_and_token(demo):
    a = demo.principals["coder0"]
    first = claims.claim(a, w.ClaimRequest(scope="src/", ttlSeconds=60))
    again = claims.claim(a, w.ClaimRequest(scope="src/**", ttlSeconds=600))
    assert again["claimId"] == first["claimId"] and again["fencingToken"] == first["fencingToken"]
    assert again["expiresAt"] > first["expiresAt"]


def test_fencing_tokens_strictly_increase_and_own_claims_never_conflict(demo):
    a = demo.principals["coder0"]
    tokens = [claims.claim(a, w.ClaimRequest(scope=s))["fencingToken"] for s in ("src/**", "src/a.py", "docs/**")]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_claims_conflict_only_within_one_scope_type_and_resource(demo):
    a, b = demo.principals["coder0"], demo.principals["coder1"]
    claims.claim(a, w.ClaimRequest(scope="src/**", scopeType="resource", resourceId="github.com/acme/api"))
    claims.claim(b, w.ClaimRequest(scope="src/**", scopeType="resource", resourceId="github.com/acme/web"))
    claims.claim(b, w.ClaimRequest(scope="src/**"))
    claims.claim(a, w.ClaimRequest(scope="deploy", scopeType="task"))
    with pytest.raises(ClaimConflict):
        claims.claim(b, w.ClaimRequest(scope=" deploy ", scopeType="task"))


def test_a_malformed_glob_is_400(demo):
    with pytest.raises(InvalidArgument) as err:
        claims.claim(demo.principals["coder0"], w.ClaimRequest(scope="src/[ab"))
    assert err.value.details["fields"][0]["field"] == "scope"
    with pytest.raises(InvalidArgument):
        claims.claim(demo.principals["coder0"], w.ClaimRequest(scope="src/../etc"))


def test_an_expired_claim_stops_blocking_at_once(demo):
    a, b = demo.principals["coder0"], demo.principals["coder1"]
    held = claims.claim(a, w.ClaimRequest(scope="src/**", ttlSeconds=1))
    time.sleep(1.1)
    got = claims.claim(b, w.ClaimRequest(scope="src/a.py"))
    assert got["fencingToken"] > held["fencingToken"]
    # the item is still there (moved out of the hot claims partition by that claim, not deleted)
    assert t.get(*k.ended_claim(demo.network_id, held["claimId"]))["endReason"] == "expired"
    assert claims.release(a, w.ReleaseRequest(claimId=held["claimId"])) == {
        "claimId": held["claimId"], "released": False, "reason": "expired"}


def test_only_the_holder_may_release(demo):
    a, b = demo.principals["coder0"], demo.principals["coder1"]
    held = claims.claim(a, w.ClaimRequest(scope="src/**"))
    with pytest.raises(PermissionDenied):
        claims.release(b, w.ReleaseRequest(claimId=held["claimId"]))
    assert claims.release(a, w.ReleaseRequest(claimId=held["claimId"]))["released"] is True
    assert claims.release(a, w.ReleaseRequest(claimId=held["claimId"]))["reason"] == "already_released"
    claims.claim(b, w.ClaimRequest(scope="src/**"))
    with pytest.raises(NotFound):
        claims.release(a, w.ReleaseRequest(claimId="clm_01ABCDEFGHJKMNPQRSTVWXYZ01"))


# 9 ------------------------------------------------------------------------------------------

def test_apply_is_idempotent(demo):
    again = admin.apply_spec(DEMO_SPEC)
    assert again["networks"]["demo"] == {"networkId": demo.network_id, "instances": {}}
    assert again["representatives"] == {}


def test_an_invalid_spec_is_refused_with_the_bad_field(table):
    with pytest.raises(InvalidArgument) as err:
        admin.apply_spec("network: x\nagents:\n  - {name: Bad Name}\n")
    assert "agents.0.name" in err.value.details["fields"][0]["field"]
