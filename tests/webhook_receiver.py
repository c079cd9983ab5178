"""A webhook receiver on loopback for the tests that watch what the hub POSTs (webhooks,
docs/protocol.md 10.3; A2A push notification configs, 13.6): :class:`Receiver` and its
module-scoped fixture ``receiver`` (import both into the test module)."""

from __future__ import annotations

import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Receiver:
    """A webhook receiver on 127.0.0.1: every request lands in ``got`` as (path, headers, body,
    monotonic time); a path listed in ``fail`` answers that status."""

    def __init__(self):
        self.got: queue.Queue = queue.Queue()
        self.fail: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.got.put((self.path, dict(self.headers), body, time.monotonic()))
                self.send_response(outer.fail.get(self.path, 204))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, path: str, timeout: float) -> tuple[dict, bytes, float]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no webhook on {path} within {timeout} s")
            try:
                got_path, headers, body, at = self.got.get(timeout=left)
            except queue.Empty:
                continue
            if got_path == path:
                return headers, body, at


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()
