"""Shared fixtures: moto's DynamoDB with the table built from template.yaml, and a demo network.

Domain tests run in-process on moto (``mock_aws``); races use moto's server; end-to-end tests
start `relaynet serve` (see tests/e2e).
"""

from __future__ import annotations

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
    """Settings are cached per process; a test that changes the environment gets them re-read."""
    from relaynet.config import settings

    settings.cache_clear()
    yield
    settings.cache_clear()


class _OneRequestAtATime:
    """moto's backends are not thread-safe (a conditional write checks and writes in two steps, a
    transaction deep-copies tables another request is changing), and its threaded server runs
    requests at once: serve one request at a time, so each is atomic as in DynamoDB while the
    clients' threads still interleave between requests."""

    def __init__(self, app):
        import threading

        self.app, self.lock = app, threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            return list(self.app(environ, start_response))


@pytest.fixture
def server_table():
    """A table on moto in *server mode* (a real HTTP endpoint on a loopback port), for races
    between threads: each request is a real DynamoDB API call, serialised by moto's server."""
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    from relaynet.store import table as t
    from relaynet_local.template import create_table

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    server._server.app = _OneRequestAtATime(server._server.app)
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    # moto's backends are process-wide: start from an empty account
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")).read()
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    t.reset()
    try:
        create_table(boto3.client("dynamodb"), TEMPLATE, "relaynet-test")
        yield endpoint
    finally:
        os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
        t.reset()
        server.stop()


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
