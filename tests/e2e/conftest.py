"""End-to-end fixtures: `relaynet serve` as a real subprocess on a free port, driven over HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT

RELAYNET = str(Path(sys.executable).with_name("relaynet"))


def free_port() -> int:
    """A port free now, from the kernel's ephemeral range: fine for one hub's lifetime."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def restart_port() -> int:
    """A free port *below* the kernel's ephemeral range, for a test that stops a hub and starts
    it again on the same port.

    An ephemeral port can be handed to any outgoing connection (a store client, another test's
    worker) in the seconds between the two hubs, and the restart then fails with "Address already
    in use"; a port outside ``ip_local_port_range`` is only ever taken by an explicit bind.
    """
    import random

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        port = random.randrange(10_000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in 10000..{low}")


@dataclass
class Hub:
    """A running local stack: its ``url``, the tokens document and the working directory."""

    url: str
    tokens: dict
    cwd: Path
    proc: subprocess.Popen

    def token(self, agent: str, n: int = 0, network: str = "demo") -> str:
        return self.tokens["networks"][network]["instances"][agent][n]["token"]

    def instance(self, agent: str, n: int = 0, network: str = "demo") -> str:
        return self.tokens["networks"][network]["instances"][agent][n]["instanceId"]


def start_hub(tmp: Path, *extra: str, env: dict[str, str] | None = None, spec: Path | None = None,
              port: int | None = None) -> Hub:
    """Start `relaynet serve` in ``tmp`` (its default store: DynamoDB Local in
    ``tmp/.relaynet/dynamodb``) and wait (at most 60 s) until /v1/health answers."""
    port = port or free_port()
    tokens = tmp / "tokens.json"
    args = [RELAYNET, "serve", "--port", str(port), "--spec", str(spec or ROOT / "examples" / "demo-network.yaml"),
            "--tokens-out", str(tokens), "--template", str(ROOT / "template.yaml"), *extra]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    proc = subprocess.Popen(args, cwd=tmp, env=full_env, stdout=subprocess.PIPE, stderr=open(tmp / "serve.log", "wb"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"relaynet serve exited: {(tmp / 'serve.log').read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200 and tokens.exists():
                return Hub(url, json.loads(tokens.read_text()), tmp, proc)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"relaynet serve did not become healthy: {(tmp / 'serve.log').read_text()[-3000:]}")


def tool(hub: Hub, name: str, body: dict, token: str) -> dict:
    """``POST /v1/tools/<name>`` on ``hub`` with ``token``: the 200's JSON (anything else fails the test)."""
    r = httpx.post(f"{hub.url}/v1/tools/{name}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def until(predicate, what: str, wait: float = 60.0):
    """Poll ``predicate`` every 0.1 s until it returns something truthy (returned), at most
    ``wait`` seconds; AssertionError naming ``what`` after that."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {wait} s: {what}")


def stop_hub(hub: Hub) -> None:
    hub.proc.send_signal(signal.SIGINT)
    try:
        hub.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        hub.proc.kill()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The demo network on a local stack shared by one test module."""
    h = start_hub(tmp_path_factory.mktemp("hub"))
    yield h
    stop_hub(h)
