"""``POST /v1/claims/check`` through the handlers (docs/protocol.md 10.4; issue 25): each path's
live path claims held by other instances, in the caller's resource namespace; the caller's own
claims never conflict; bad paths are 400 naming each one; nothing is written."""

from __future__ import annotations

import pytest

from relaynet.store import table as t

pytestmark = pytest.mark.usefixtures("moto_fast_transactions")


def _items() -> dict[tuple[str, str], dict]:
    """Every item of the table but the instances' presence, which any authenticated call refreshes."""
    out, kwargs = {}, {"TableName": t.table_name()}
    while True:
        page = t.client().scan(**kwargs)
        for raw in page["Items"]:
            item = t.decode(raw)
            item.pop("lastSeenAt", None)
            out[(item["PK"], item["SK"])] = item
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _check(api, token, paths, **extra):
    return api("claims_check", {"paths": paths, **extra}, token)


def test_a_path_under_another_instances_claim_names_the_holder_scope_expiry_and_task(api, demo):
    coder0, coder1 = demo.token("coder0"), demo.token("coder1")
    task = api("network_delegate", {"objective": "fix the parser", "toInstance": demo.principals["coder0"].instance_id},
               demo.token("planner0"))[1]["taskId"]
    held = api("network_claim", {"scope": "src/parser/**", "taskId": task, "ttlSeconds": 600}, coder0)[1]
    api("network_claim", {"scope": "docs/*.md"}, coder1)  # the caller's own: never a conflict
    before = _items()
    status, out, _ = _check(api, coder1, ["src/parser/lexer.py", "./src/parser/", "src/app.py", "docs/a.md"])
    assert status == 200, out
    assert _items() == before
    conflict = {"claimId": held["claimId"], "scope": "src/parser/**", "expiresAt": held["expiresAt"], "taskId": task,
                "holder": {"agent": "coder", "instanceId": demo.principals["coder0"].instance_id}}
    assert out == {"results": [{"path": "src/parser/lexer.py", "conflicts": [conflict]},
                               {"path": "./src/parser/", "conflicts": [conflict]},
                               {"path": "src/app.py", "conflicts": []},
                               {"path": "docs/a.md", "conflicts": []}], "conflicting": 2}
    own = _check(api, coder0, ["src/parser/lexer.py"])[1]
    assert own == {"results": [{"path": "src/parser/lexer.py", "conflicts": []}], "conflicting": 0}
    api("network_release", {"claimId": held["claimId"]}, coder0)
    assert _check(api, coder1, ["src/parser/lexer.py"])[1]["conflicting"] == 0  # released: free again


def test_a_path_is_taken_literally_and_only_path_claims_in_its_resource_namespace_count(api, demo):
    coder0, coder1 = demo.token("coder0"), demo.token("coder1")
    api("network_claim", {"scope": "src/*.py", "resourceId": "https://github.com/Acme/api.git"}, coder0)
    api("network_claim", {"scope": "src/x.py", "scopeType": "resource"}, coder0)
    api("network_claim", {"scope": "lib/[ab].py"}, coder0)
    assert _check(api, coder1, ["src/x.py"])[1]["conflicting"] == 0  # another namespace, another scope type
    out = _check(api, coder1, ["src/x.py", "src/sub/x.py"], resourceId="git@github.com:Acme/api.git")[1]
    assert [len(r["conflicts"]) for r in out["results"]] == [1, 0]
    out = _check(api, coder1, ["lib/a.py", "lib/[ab].py"])[1]
    assert [len(r["conflicts"]) for r in out["results"]] == [1, 0]  # the path "[ab].py" is a file name


def test_bad_paths_are_400_naming_each_one_and_nothing_is_written(api, demo):
    coder1 = demo.token("coder1")
    before = _items()
    status, err, _ = _check(api, coder1, ["ok.py", "/etc/passwd", "src/../secret", "", "a\x07b", "fine/too.py"])
    assert status == 400 and err["error"]["code"] == "invalid_argument"
    fields = {f["field"]: f["message"] for f in err["error"]["details"]["fields"]}
    assert set(fields) == {"paths.1", "paths.2", "paths.3", "paths.4"}
    assert "'/etc/passwd'" in fields["paths.1"] and "absolute" in fields["paths.1"]
    assert "'..'" in fields["paths.2"] and fields["paths.3"] == "empty" and "control character" in fields["paths.4"]
    for body in ({"paths": []}, {"paths": ["a"] * 1001}, {"paths": ["a" * 1025]}, {"paths": ["a"], "scope": "x"},
                 {"paths": ["a"], "resourceId": "/home/me/repo"}):
        status, err, _ = api("claims_check", body, coder1)
        assert status == 400 and err["error"]["details"]["fields"], body
    assert _items() == before


def test_the_check_is_for_instance_tokens(api, demo):
    status, err, _ = api("claims_check", {"paths": ["a.py"]}, demo.tokens["representatives"]["ops"])
    assert status == 403 and err["error"]["code"] == "permission_denied"
    assert api("claims_check", {"paths": ["a.py"]})[0] == 401
