"""The throwaway store (``relaynet serve --store memory``): moto's DynamoDB server, one request at a time.

moto's backends are not thread-safe (a conditional write checks and writes in two steps; a
transaction deep-copies tables that another request is changing), and its threaded server runs
requests at once. Here every request holds one lock, so each is atomic as in DynamoDB, while
clients' threads still interleave between requests. Everything lives in this process's memory
and dies with it; moto copies the whole table once per item of every transaction, so it slows
down as the table grows. It is for short experiments; the default store is DynamoDB Local.
moto is an optional dependency (``pip install 'relaynet[memory]'``; the test extra has it).
"""

from __future__ import annotations

import logging
import threading
import urllib.request
from typing import Any, Callable, Iterable

from relaynet_local.dynamodb_local import free_port
from relaynet_local.store_setup import StoreSetupError

__all__ = ["OneRequestAtATime", "MemoryStore"]

log = logging.getLogger("local_stack.store")


class OneRequestAtATime:
    """WSGI middleware: serve one request at a time (the whole response is produced under the lock)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]):
        self.app, self.lock = app, threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


class MemoryStore:
    """moto's DynamoDB server on a loopback port, serialised by :class:`OneRequestAtATime`.

    :meth:`start` resets moto's process-wide state (a new store starts empty) and returns self;
    :attr:`endpoint` is ``http://127.0.0.1:<port>``. Raises StoreSetupError when moto is not
    installed.
    """

    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self.endpoint = ""
        self._server: Any = None

    def start(self) -> "MemoryStore":
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise StoreSetupError("--store memory needs moto, which is not installed. Fix: "
                                  "`.venv/bin/pip install 'moto[server,dynamodb]'` (or drop --store memory "
                                  "to use DynamoDB Local)") from None
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        port = free_port(self.host)
        self._server = ThreadedMotoServer(ip_address=self.host, port=port, verbose=False)
        self._server.start()
        self._server._server.app = OneRequestAtATime(self._server._server.app)
        self.endpoint = f"http://{self.host}:{port}"
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"),
                               timeout=10).close()
        log.warning("store: memory (moto) on %s. Everything lives in this process and is lost when it "
                    "stops; for real work drop --store memory (DynamoDB Local, on disk)", self.endpoint)
        return self

    def stop(self) -> None:
        """Stop the server (its state stays in moto's process-wide backends until reset)."""
        if self._server is not None:
            self._server.stop()
            self._server = None
