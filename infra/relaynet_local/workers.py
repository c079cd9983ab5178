"""Several hub processes on one port: ``relaynet serve --workers N`` (docs/architecture.md,
"Hub processes").

One Python process serves every request with one interpreter lock, so a local hub under a team's
load queues inside itself long before the machine's cores are busy. With ``workers`` N > 1 the
:class:`relaynet_local.server.LocalStack` that ``relaynet serve`` starts (the *primary*, index 0)
runs N - 1 more hub processes (:func:`main`, indexes 1..N-1) that accept on the primary's own
listening socket (inherited, so the kernel hands each new connection to one of them and a
worker's death loses no queued connection):

- **What runs once**: the store (DynamoDB Local, a child of the primary), the table's creation and
  migrations, the spec, the scheduled functions (the sweep, the A2A bridge, the AG2 keepalive),
  the table's stream (the stream functions' backstop) and the ``launch:`` supervisors: all in the
  primary. Every process runs the template's routes, the authorizer, the AG2 WebSocket API, the
  Server-Sent Events and push at the write for its own writes (each write is pushed once, by the
  process that made it).
- **The bus** (:class:`Bus`, :class:`BusClient`): a Unix socket of the primary
  (``multiprocessing.connection``, an authentication key made per run). Each process hands its
  commits (relaynet_local.commits) and its token writes to the bus; the primary relays them to
  the others, whose event streams, A2A streams and token rechecks then see them as their own.
- **Token writes** also bump a :class:`relaynet_local.authorizer_cache.SharedGeneration` that
  every process compares before it answers from its authorizer cache, so a revocation has no
  window across processes either.
- **AG2 connections** live in the process that accepted them; each process also listens on a
  private loopback port (its address in ``<shared>/peer-<index>``), and a management call
  (postToConnection) for a connection held elsewhere is forwarded there
  (relaynet_local.ag2_ws).
- **Durability** is each process's own: its transactions are settled before its answers leave
  (relaynet_local.dynamodb_local.TransactionBarrier), so a ``kill -9`` of any process or of the
  store loses no acknowledged write.
- **Supervision**: the primary restarts a worker that exits (1 s, doubling to 30 s); a worker
  whose bus closes while it serves (the primary died, even by ``kill -9``) exits at once, so the
  port is free for the next ``relaynet serve``.

Each process enforces the stage's throttling on the requests it serves (relaynet_local.throttle),
so the local limits are per process, as API Gateway's are approximate per stage.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any, Callable

__all__ = ["Bus", "BusClient", "WorkerPool", "Shared", "default_workers", "main", "ENV"]

log = logging.getLogger("local_stack.workers")

#: The environment variable that carries a worker's configuration (JSON) to :func:`main`.
ENV = "RELAYNET_LOCAL_WORKER"


def default_workers() -> int:
    """The cores this process may run on (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Shared:
    """The directory a hub's processes share for one run: the bus's socket (``bus``), the token
    generation (``tokens``) and each process's private address (``peer-<index>``)."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.owned = path is None
        self.path = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="relaynet-hub-"))
        self._peers: dict[int, str] = {}  # read once per index, again on request (peer_url fresh)

    @property
    def bus(self) -> str:
        return str(self.path / "bus")

    @property
    def tokens(self) -> Path:
        return self.path / "tokens"

    def publish_peer(self, index: int, url: str) -> None:
        """Write where process ``index`` takes forwarded management calls (atomically)."""
        tmp = self.path / f".peer-{index}.{os.getpid()}"
        tmp.write_text(url, encoding="utf-8")
        os.replace(tmp, self.path / f"peer-{index}")

    def peer_url(self, index: int, fresh: bool = False) -> str | None:
        """Process ``index``'s private URL (as last read; ``fresh``: read again, for a process
        that was restarted); ``None`` when it has not published one."""
        if not fresh and index in self._peers:
            return self._peers[index]
        try:
            url = (self.path / f"peer-{index}").read_text(encoding="utf-8").strip() or None
        except OSError:
            url = None
        if url is None:
            self._peers.pop(index, None)
        else:
            self._peers[index] = url
        return url

    def remove(self) -> None:
        """Delete the directory (the primary, at stop)."""
        if self.owned:
            shutil.rmtree(self.path, ignore_errors=True)


def _hang_up(conn: Connection) -> None:
    """Close ``conn`` so the other end reads EOF now: shut the socket down first (closing the fd
    alone does not while another thread of ours is blocked reading it)."""
    import socket

    with contextlib.suppress(OSError, ValueError):
        dup = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()
    with contextlib.suppress(OSError):
        conn.close()


class _Sender:
    """A connection's outgoing messages, sent in order by one thread so a writer never blocks on
    a slow reader; what is queued when the connection fails is dropped (the streams replay from
    the store on resume, and a token change is still in the shared generation)."""

    def __init__(self, conn: Connection, name: str):
        self.conn = conn
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def send(self, message: tuple) -> None:
        self._queue.put(message)

    def close(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            message = self._queue.get()
            if message is None:
                return
            try:
                self.conn.send(message)
            except (OSError, ValueError):
                return


def _deliver(message: tuple, on_commit: Callable[[list], None], on_tokens: Callable[[], None]) -> None:
    """Hand one bus message to this process: ``("commit", images)`` or ``("tokens",)``."""
    if message[0] == "commit":
        on_commit(message[1])
    elif message[0] == "tokens":
        on_tokens()


class Bus:
    """The primary's end of the bus: accepts the workers' connections and relays what each sends
    (``("commit", images)``, ``("tokens",)``) to every other process, itself included
    (``on_commit(images)``, ``on_tokens()``). Messages to the primary's own listeners come from
    :meth:`publish_commit` / :meth:`publish_tokens` too, relayed to every worker. A worker's
    ``("pushed", function_id, digests)`` (what its push at the write handled,
    :class:`relaynet_local.streams.PushedAtWrite`) goes to ``on_pushed`` alone: the primary
    reads the stream."""

    def __init__(self, address: str, authkey: bytes, on_commit: Callable[[list], None],
                 on_tokens: Callable[[], None], on_pushed: Callable[[str, list], None] | None = None):
        self.address, self.authkey = address, authkey
        self.on_commit, self.on_tokens, self.on_pushed = on_commit, on_tokens, on_pushed
        self._listener: Listener | None = None
        self._peers: dict[int, _Sender] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def start(self) -> "Bus":
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self.authkey)
        threading.Thread(target=self._accepting, daemon=True, name="relaynet-local-bus").start()
        return self

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
        with self._lock:
            peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            peer.close()
            _hang_up(peer.conn)

    def publish_commit(self, images: list) -> None:
        """The primary committed ``images``: tell every worker."""
        self._relay(("commit", images), None)

    def publish_tokens(self) -> None:
        """The primary wrote a token item: tell every worker."""
        self._relay(("tokens",), None)

    def connected(self) -> list[int]:
        """The indexes of the workers on the bus."""
        with self._lock:
            return sorted(self._peers)

    def _relay(self, message: tuple, origin: int | None) -> None:
        with self._lock:
            peers = [peer for index, peer in self._peers.items() if index != origin]
        for peer in peers:
            peer.send(message)

    def _accepting(self) -> None:
        while not self._closed.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                conn = listener.accept()
            except Exception:  # noqa: BLE001 - closed, or a client that failed the handshake
                if self._closed.is_set():
                    return
                log.warning("bus: a connection failed its handshake")
                continue
            threading.Thread(target=self._reading, args=(conn,), daemon=True, name="relaynet-local-bus-peer").start()

    def _reading(self, conn: Connection) -> None:
        index: int | None = None
        try:
            hello = conn.recv()
            if not (isinstance(hello, tuple) and hello[:1] == ("hello",)):
                return
            index = int(hello[1])
            sender = _Sender(conn, f"relaynet-local-bus-to-{index}")
            with self._lock:
                old = self._peers.pop(index, None)
                self._peers[index] = sender
            if old is not None:
                old.close()
            while True:
                message = conn.recv()
                if message[0] == "pushed":
                    if self.on_pushed is not None:
                        self.on_pushed(message[1], message[2])
                    continue
                self._relay(message, index)
                _deliver(message, self.on_commit, self.on_tokens)
        except (EOFError, OSError):
            pass
        except Exception:  # noqa: BLE001 - one bad message must not end the bus
            log.exception("bus: a message from worker %s failed", index)
        finally:
            with self._lock:
                if index is not None and self._peers.get(index) is not None and self._peers[index].conn is conn:
                    self._peers.pop(index).close()
            with contextlib.suppress(OSError):
                conn.close()


class BusClient:
    """A worker's end of the bus: :meth:`publish_commit` / :meth:`publish_tokens` send, and what
    the primary relays reaches ``on_commit(images)`` / ``on_tokens()``; ``on_lost()`` is called
    once when the bus closes (the primary is gone)."""

    def __init__(self, address: str, authkey: bytes, index: int, on_commit: Callable[[list], None],
                 on_tokens: Callable[[], None], on_lost: Callable[[], None]):
        self.conn = Client(address, family="AF_UNIX", authkey=authkey)
        self.conn.send(("hello", index))
        self.index = index
        self.on_commit, self.on_tokens, self.on_lost = on_commit, on_tokens, on_lost
        self._sender = _Sender(self.conn, "relaynet-local-bus-out")
        threading.Thread(target=self._reading, daemon=True, name="relaynet-local-bus-in").start()

    def publish_commit(self, images: list) -> None:
        self._sender.send(("commit", images))

    def publish_tokens(self) -> None:
        self._sender.send(("tokens",))

    def publish_pushed(self, function_id: str, digests: list) -> None:
        """This worker's push at the write handled these records (the primary's stream skips
        them)."""
        self._sender.send(("pushed", function_id, digests))

    def close(self) -> None:
        self._sender.close()
        _hang_up(self.conn)

    def _reading(self) -> None:
        try:
            while True:
                message = self.conn.recv()
                try:
                    _deliver(message, self.on_commit, self.on_tokens)
                except Exception:  # noqa: BLE001 - one listener's failure must not end the bus
                    log.exception("bus: handling %s failed", message[0])
        except (EOFError, OSError):
            pass
        self.on_lost()


class WorkerPool:
    """The primary's workers: ``count`` - 1 processes running :func:`main`, each restarted when
    it exits (1 s, doubling to 30 s) until :meth:`stop`.

    Args:
        count: the hub's processes in all (the primary included).
        listen_fd: the primary's listening socket (inherited by each worker).
        config: what every worker needs (:func:`main` reads it): the template, host, table, store
            endpoint and kind, the shared directory, the bus's address and key.
    """

    def __init__(self, count: int, listen_fd: int, config: dict[str, Any]):
        self.count = count
        self.listen_fd = listen_fd
        self.config = config
        self.procs: dict[int, subprocess.Popen] = {}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> "WorkerPool":
        for index in range(1, self.count):
            thread = threading.Thread(target=self._supervise, args=(index,), daemon=True,
                                      name=f"relaynet-local-worker-{index}")
            thread.start()
            self._threads.append(thread)
        return self

    def _spawn(self, index: int) -> subprocess.Popen:
        env = dict(os.environ)
        env[ENV] = json.dumps({**self.config, "index": index, "fd": self.listen_fd})
        stdout = sys.__stderr__.fileno() if sys.__stderr__ is not None else None
        # -c, not -m: the package's __init__ imports this module (through server), so runpy would
        # run a second copy of it as __main__ (and warn so on every worker's start)
        return subprocess.Popen([sys.executable, "-c", WORKER_MAIN], env=env,
                                pass_fds=(self.listen_fd,), stdin=subprocess.DEVNULL, stdout=stdout)

    def _supervise(self, index: int) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            started = time.monotonic()
            proc = self._spawn(index)
            with self._lock:
                self.procs[index] = proc
            proc.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - started > 60:
                backoff = 1.0
            log.error("hub worker %d (pid %d) exited with %s; restarting it in %.0f s", index, proc.pid,
                      proc.returncode, backoff)
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, 30.0)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every worker, wait up to ``timeout`` seconds, then SIGKILL what remains."""
        self._stopping.set()
        with self._lock:
            procs = list(self.procs.values())
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()


#: A worker process's command line (``python -c``): :func:`main` of this very module.
WORKER_MAIN = "import sys; from relaynet_local.workers import main; sys.exit(main())"


def main() -> int:
    """A worker process (started by :class:`WorkerPool` with :data:`ENV` set): a
    :class:`relaynet_local.server.LocalStack` in the worker role on the inherited socket, until
    SIGTERM or until the bus closes."""
    config = json.loads(os.environ.pop(ENV))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the primary, which stops us
    from relaynet_local import server

    sys.stdout = sys.stderr  # as relaynet serve: handlers' prints and EMF lines go to stderr
    server._configure_logging()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def primary_gone() -> None:
        """The bus closed while we were serving: the primary died (a ``kill -9`` too). Exit at
        once, so the port and the store are free for the next ``relaynet serve``; every answer
        this process gave was durable before it left (the transaction barrier), and what is
        unanswered was never acknowledged."""
        if not stop.is_set():
            log.error("hub worker %d: the primary is gone; exiting", config["index"])
            os._exit(3)

    stack = server.LocalStack(config["host"], 0, template=config["template"], sweep_interval=0,
                              dynamodb_endpoint=config["endpoint"], table=config["table"], state_dir=None,
                              preload=True, role=server.WorkerRole.from_config(config, on_lost=primary_gone))
    try:
        stack.start()
    except Exception:  # noqa: BLE001 - the primary restarts us
        log.exception("hub worker %d could not start", config["index"])
        return 1
    log.info("hub worker %d (pid %d) serving", config["index"], os.getpid())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        stack.stop()
    return 0


def new_authkey() -> bytes:
    """A fresh key for one run's bus (the workers get it in their environment)."""
    return secrets.token_bytes(32)

