"""Shared fixtures: tables built from template.yaml, on moto in-process or on DynamoDB Local.

Domain tests run in-process on moto (``mock_aws``) for speed; races and anything concurrent run
on DynamoDB Local (``server_table``), the store ``relaynet serve`` ships; end-to-end tests start
`relaynet serve` itself (see tests/e2e).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
DEMO_SPEC = (ROOT / "examples" / "demo-network.yaml").read_text()

os.environ.update(
    AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION="us-east-1", RELAYNET_TABLE="relaynet-test", POWERTOOLS_LOG_LEVEL="WARNING",
)
os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)


@pytest.fixture
def table():
    """A fresh moto DynamoDB table (schema from template.yaml) for one test."""
    import boto3
    from moto import mock_aws

    from relaynet.store import table as t
    from relaynet_local.template import create_table

    with mock_aws():
        t.reset()
        create_table(boto3.client("dynamodb"), TEMPLATE, "relaynet-test")
        yield
        t.reset()


@dataclass
class Net:
    """An applied spec: ``tokens`` as admin apply printed them, principals by ``agent`` + index."""

    tokens: dict
    principals: dict
    network_id: str

    def token(self, key: str) -> str:
        agent, n = key.rstrip("0123456789"), int(key[len(key.rstrip("0123456789")):] or 0)
        return self.tokens["networks"][self.name]["instances"][agent][n]["token"]

    @property
    def name(self) -> str:
        return next(iter(self.tokens["networks"]))


def apply(spec: str) -> Net:
    """Apply ``spec`` and resolve every instance token to its principal (``planner0``, ``coder1``)."""
    from relaynet import admin, identity

    tokens = admin.apply_spec(spec)
    name = next(iter(tokens["networks"]))
    principals = {}
    for agent, insts in tokens["networks"][name]["instances"].items():
        for n, inst in enumerate(insts):
            principals[f"{agent}{n}"] = identity.authorize(inst["token"])
    return Net(tokens, principals, tokens["networks"][name]["networkId"])


@pytest.fixture
def demo(table) -> Net:
    """The demo network of examples/demo-network.yaml on a fresh table."""
    return apply(DEMO_SPEC)


@pytest.fixture(autouse=True)
def _fresh_settings():
    """Settings are cached per process; a test that changes the environment gets them re-read.
    Each test is a fresh container: nothing read by an earlier test is cached (relaynet.cache)."""
    from relaynet import cache
    from relaynet.config import settings

    settings.cache_clear()
    cache.clear()
    yield
    settings.cache_clear()
    cache.clear()


@pytest.fixture(scope="session")
def dynamodb_local(tmp_path_factory):
    """AWS's DynamoDB Local, started the way ``relaynet serve`` starts it (a supervised child,
    data on disk), shared by the session; its endpoint URL."""
    from relaynet_local.dynamodb_local import DynamoDBLocal

    with DynamoDBLocal(tmp_path_factory.mktemp("dynamodb-local")) as store:
        yield store.endpoint


_tables = iter(range(1, 1 << 30))


@contextlib.contextmanager
def fresh_table(endpoint: str, monkeypatch, prefix: str = "relaynet-race"):
    """A fresh table (schema from template.yaml) on the DynamoDB at ``endpoint``, this process's
    store client pointed at it for the test, deleted afterwards. Yields the endpoint."""
    import boto3

    from relaynet.config import settings
    from relaynet.store import table as t
    from relaynet_local.template import create_table

    name = f"{prefix}-{next(_tables)}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("RELAYNET_TABLE", name)
    settings.cache_clear()
    t.reset()
    client = boto3.client("dynamodb")
    create_table(client, TEMPLATE, name)
    try:
        yield endpoint
    finally:
        t.reset()
        client.delete_table(TableName=name)


@pytest.fixture
def server_table(dynamodb_local, monkeypatch):
    """A fresh table (schema from template.yaml) on DynamoDB Local, for races between real
    threads: every request is a real DynamoDB API call, atomic as DynamoDB makes it, with no
    lock of ours. Yields the endpoint."""
    with fresh_table(dynamodb_local, monkeypatch) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def moto_fast_transactions():
    """moto's ``transact_write_items`` deep-copies the table (its rollback copy) once per *action*,
    so one 100-action transaction copies the whole table 100 times and a 150-member fan-out test
    spends seconds in ``copy.deepcopy``. Take the copy once per table per transaction instead:
    the copies are identical, since nothing changes while they are taken. Behaviour is unchanged."""
    import copy
    import threading
    import types

    from moto.dynamodb import models

    local = threading.local()

    def deepcopy(obj, memo=None):
        tables = getattr(local, "tables", None)
        if tables is None or memo is not None or type(obj).__name__ != "Table":
            return copy.deepcopy(obj, memo)
        if id(obj) not in tables:
            tables[id(obj)] = copy.deepcopy(obj)
        return tables[id(obj)]

    real = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        local.tables = {}
        try:
            return real(self, transact_items)
        finally:
            local.tables = None

    saved = models.copy
    models.copy = types.SimpleNamespace(deepcopy=deepcopy)
    models.DynamoDBBackend.transact_write_items = transact_write_items
    try:
        yield
    finally:
        models.copy = saved
        models.DynamoDBBackend.transact_write_items = real


def pytest_collection_modifyitems(config, items):
    """Tests on DynamoDB Local (``server_table``, ``dynamodb_local``: the race tests) carry the
    ``store`` marker, so `make check` can leave them to `make test` without a list to keep."""
    for item in items:
        if {"server_table", "dynamodb_local"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.store)
