"""`relaynet guard` in a real git repository against `relaynet serve` (docs/protocol.md 10.5;
issue 25): the installed pre-commit and pre-push hooks refuse a change over another instance's
live claim, naming the holder, the scope and the expiry; the committer's own claims pass; the
bypasses and the hub-down modes behave as documented; `guard check` is the same check for scripts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import RELAYNET, start_hub, stop_hub, tool


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = start_hub(tmp_path_factory.mktemp("guard"))
    yield h
    stop_hub(h)


def run(args, cwd: Path, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x",
            "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
    return subprocess.run(args, cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=60, check=check)


@pytest.fixture
def repo(tmp_path):
    """A repository with one commit (src/app.py, docs/guide.md) and the guard's hooks installed."""
    path = tmp_path / "repo"
    path.mkdir()
    run(["git", "init", "-q", "-b", "main"], path, check=True)
    (path / "src").mkdir()
    (path / "docs").mkdir()
    (path / "src" / "app.py").write_text("print('hi')\n")
    (path / "docs" / "guide.md").write_text("# guide\n")
    run(["git", "add", "-A"], path, check=True)
    run(["git", "commit", "-q", "-m", "init"], path, check=True)
    installed = run([RELAYNET, "guard", "install", "--pre-push"], path)
    assert installed.returncode == 0, installed.stderr
    assert "pre-commit" in installed.stdout and "pre-push" in installed.stdout
    return path


def as_(hub, agent: str, n: int, **extra) -> dict:
    return {"RELAYNET_URL": hub.url, "RELAYNET_TOKEN": hub.token(agent, n), **extra}


def commit(repo: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    run(["git", "add", "-A"], repo, check=True)
    return run(["git", "commit", "-q", "-m", "change", *extra], repo, env)


def test_a_commit_over_another_instances_claim_is_refused_naming_the_holder(hub, repo):
    claim = tool(hub, "network_claim", {"scope": "src/**", "ttlSeconds": 600}, hub.token("coder", 0))
    try:
        (repo / "src" / "new.py").write_text("x = 1\n")
        refused = commit(repo, as_(hub, "coder", 1))
        assert refused.returncode == 1, refused
        assert "src/new.py: claimed by coder (instance " + hub.instance("coder", 0) + ") as 'src/**' until " \
            + claim["expiresAt"] in refused.stderr
        assert "network_ask" in refused.stderr and "RELAYNET_GUARD=off" in refused.stderr
        assert "--no-verify" in refused.stderr
        assert run(["git", "log", "--oneline"], repo).stdout.count("\n") == 1  # nothing committed
        # the holder itself commits over its own claim
        assert commit(repo, as_(hub, "coder", 0)).returncode == 0
        # a deletion and a rename into the claim count too, on both sides
        (repo / "src" / "app.py").unlink()
        assert commit(repo, as_(hub, "coder", 1)).returncode == 1
        run(["git", "checkout", "--", "."], repo, check=True)
        run(["git", "reset", "-q"], repo, check=True)
        run(["git", "checkout", "--", "."], repo, check=True)
        run(["git", "mv", "docs/guide.md", "src/guide.md"], repo, check=True)
        renamed = commit(repo, as_(hub, "coder", 1))
        assert renamed.returncode == 1 and "src/guide.md" in renamed.stderr
        run(["git", "mv", "src/guide.md", "docs/guide.md"], repo, check=True)
        # outside the claim: fine
        (repo / "docs" / "more.md").write_text("more\n")
        assert commit(repo, as_(hub, "coder", 1)).returncode == 0
        # the bypasses
        (repo / "src" / "b.py").write_text("b = 1\n")
        assert commit(repo, as_(hub, "coder", 1, RELAYNET_GUARD="off")).returncode == 0
        (repo / "src" / "c.py").write_text("c = 1\n")
        assert commit(repo, as_(hub, "coder", 1), "--no-verify").returncode == 0
    finally:
        tool(hub, "network_release", {"claimId": claim["claimId"]}, hub.token("coder", 0))
    (repo / "src" / "d.py").write_text("d = 1\n")
    assert commit(repo, as_(hub, "coder", 1)).returncode == 0  # released: free again


def test_a_hub_that_cannot_be_asked_warns_and_strict_mode_refuses(hub, repo):
    down = {"RELAYNET_URL": "http://127.0.0.1:9", "RELAYNET_TOKEN": hub.token("coder", 1)}
    (repo / "src" / "e.py").write_text("e = 1\n")
    run(["git", "add", "-A"], repo, check=True)
    strict = run(["git", "commit", "-q", "-m", "x"], repo, {**down, "RELAYNET_GUARD": "strict"})
    assert strict.returncode == 1 and "RELAYNET_GUARD=strict" in strict.stderr
    bad_token = run(["git", "commit", "-q", "-m", "x"], repo, {"RELAYNET_URL": hub.url, "RELAYNET_TOKEN": "rn_inst_" + "x" * 43,
                                                              "RELAYNET_GUARD": "strict"})
    assert bad_token.returncode == 1 and "401" in bad_token.stderr
    allowed = run(["git", "commit", "-q", "-m", "x"], repo, down)
    assert allowed.returncode == 0 and allowed.stderr.count("\n") == 1 and "warning: claims not checked" in allowed.stderr


def test_a_push_of_commits_over_another_instances_claim_is_refused(hub, repo, tmp_path):
    remote = tmp_path / "remote.git"
    run(["git", "init", "-q", "--bare", str(remote)], tmp_path, check=True)
    run(["git", "remote", "add", "origin", str(remote)], repo, check=True)
    assert run(["git", "push", "-q", "origin", "main"], repo, as_(hub, "coder", 1)).returncode == 0
    (repo / "src" / "late.py").write_text("late = 1\n")
    assert commit(repo, as_(hub, "coder", 1)).returncode == 0  # no claim yet
    claim = tool(hub, "network_claim", {"scope": "src/late.py", "ttlSeconds": 600}, hub.token("coder", 0))
    try:
        pushed = run(["git", "push", "-q", "origin", "main"], repo, as_(hub, "coder", 1))
        assert pushed.returncode != 0 and "src/late.py: claimed by coder" in pushed.stderr
        assert run(["git", "push", "-q", "origin", "main"], repo, as_(hub, "coder", 0)).returncode == 0
    finally:
        tool(hub, "network_release", {"claimId": claim["claimId"]}, hub.token("coder", 0))


def test_guard_check_is_the_same_check_for_scripts(hub, repo):
    claim = tool(hub, "network_claim", {"scope": "docs/*.md", "ttlSeconds": 600}, hub.token("coder", 0))
    try:
        env = as_(hub, "coder", 1)
        found = run([RELAYNET, "guard", "check", "docs/guide.md", "src/app.py", "/etc/hosts"], repo, env)
        assert found.returncode == 1 and "docs/guide.md: claimed by coder" in found.stderr
        assert "/etc/hosts is outside the claims' root" in found.stderr and "src/app.py" not in found.stderr
        inside = run([RELAYNET, "guard", "check", "guide.md"], repo / "docs", env)  # relative to the cwd
        assert inside.returncode == 1
        assert run([RELAYNET, "guard", "check", "src/app.py"], repo, env).returncode == 0
    finally:
        tool(hub, "network_release", {"claimId": claim["claimId"]}, hub.token("coder", 0))


def test_install_keeps_a_hook_it_did_not_write(tmp_path):
    run(["git", "init", "-q"], tmp_path, check=True)
    hooks = tmp_path / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nmake lint\n")
    refused = run([RELAYNET, "guard", "install"], tmp_path)
    assert refused.returncode == 2 and "is not ours" in refused.stderr
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\nmake lint\n"


def test_a_path_the_hub_cannot_check_is_named_and_the_rest_are_still_checked(hub, repo):
    claim = tool(hub, "network_claim", {"scope": "src/**", "ttlSeconds": 600}, hub.token("coder", 0))
    try:
        (repo / "docs" / "tab\tname.md").write_text("x\n")
        (repo / "src" / "claimed.py").write_text("x\n")
        refused = commit(repo, as_(hub, "coder", 1))
        assert refused.returncode == 1 and "src/claimed.py: claimed by coder" in refused.stderr
        assert "control character in its name: not checked" in refused.stderr
    finally:
        tool(hub, "network_release", {"claimId": claim["claimId"]}, hub.token("coder", 0))


def test_install_refuses_an_option_it_does_not_know(tmp_path):
    run(["git", "init", "-q"], tmp_path, check=True)
    for bad in ("--bogus", "--pre-pushh"):
        refused = run([RELAYNET, "guard", "install", bad], tmp_path)
        assert refused.returncode == 2 and "usage" in refused.stderr
    assert not (tmp_path / ".git" / "hooks" / "pre-commit").exists()


def test_a_missing_setting_is_named_alone(tmp_path):
    """The warning names what is not set, not both variables when one is (a fresh-user trial)."""
    run(["git", "init", "-q"], tmp_path, check=True)
    (tmp_path / "a.py").write_text("x\n")
    no_token = run([RELAYNET, "guard", "check", "a.py"], tmp_path, {"RELAYNET_URL": "http://127.0.0.1:9"})
    assert no_token.returncode == 0 and "RELAYNET_TOKEN is not set" in no_token.stderr
    assert "RELAYNET_URL and" not in no_token.stderr
    neither = run([RELAYNET, "guard", "check", "a.py"], tmp_path)
    assert "RELAYNET_URL and RELAYNET_TOKEN are not set" in neither.stderr
