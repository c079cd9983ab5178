"""DynamoDB Local, the local stack's durable store, run as a supervised child process.

AWS's DynamoDB Local (a Java program over SQLite) keeps DynamoDB's promises that the hub sells:
conditional writes and transactions are atomic under concurrent requests, a transaction costs the
same at 10 or 10,000 items, and the data lives on disk (``-dbPath``), so a restart loses nothing.
Its Java and its files come from :mod:`relaynet_local.store_setup`.

:class:`DynamoDBLocal` runs it on a loopback port with ``-sharedDb`` (one database whatever the
credentials and region) and restarts it on the same port if it dies. The child cannot outlive the
hub: it gets ``SIGKILL`` when the hub's supervising thread dies (Linux ``PR_SET_PDEATHSIG``, so a
``kill -9`` of the hub takes the store with it), a ``store.pid`` file lets the next start kill a
leftover one, and an exclusive lock on ``<data_dir>/.lock`` keeps two hubs off one database.
:class:`TransactionBarrier` makes a transaction durable before the hub acknowledges it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from relaynet_local.store_setup import DYNAMODB_LOCAL_VERSION, Java, StoreSetupError, find_dynamodb_local, find_java

__all__ = ["DynamoDBLocal", "TransactionBarrier", "StoreSetupError", "free_port", "DEFAULT_JAVA_OPTS"]

log = logging.getLogger("local_stack.store")

#: JVM options (``RELAYNET_DYNAMODB_LOCAL_JAVA_OPTS`` replaces them): a bounded heap, the serial
#: collector (a single-tenant store on a laptop: least memory and CPU at rest), and the client
#: JIT compiler only (``TieredStopAtLevel=1``): C2's background compiles were most of the store's
#: CPU for the first minutes of a hub. Measured (issue 31, docs/architecture.md "The local
#: store"): store CPU per call 6.3 -> 5.1 ms at 32 paced agents, 7.2 -> 5.1 unpaced, 9.9 -> 5.4
#: at one agent; a burst of 32 claims 21-28 -> 9-11 ms each; store RSS 239 -> 182 MB.
DEFAULT_JAVA_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

_PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------------------------
# The supervised process


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the OS's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _libc_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _libc_prctl() if sys.platform.startswith("linux") else None  # resolved before any fork


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn``: SIGKILL this child when the thread that started it dies (Linux only)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _answers(endpoint: str, timeout: float = 2.0) -> bool:
    """True when a DynamoDB API answers at ``endpoint`` (a ListTables with dummy credentials)."""
    request = urllib.request.Request(endpoint, data=b"{}", method="POST", headers={
        "X-Amz-Target": "DynamoDB_20120810.ListTables", "Content-Type": "application/x-amz-json-1.0",
        "Authorization": "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=0"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status == 200
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class DynamoDBLocal:
    """DynamoDB Local as a child process on ``host``:``port``, data in ``data_dir``.

    Use ``with DynamoDBLocal(path) as store: store.endpoint``. :meth:`start` blocks until the
    store answers (at most ``start_timeout`` seconds) and raises StoreSetupError when it cannot
    (Java or the jar missing, the data directory in use by another hub, the process exiting).
    While it runs, a supervising thread restarts it on the same port if it exits (1 s, 2 s, ...
    at most 30 s apart); ``restarts`` counts them, and ``on_restart(store)`` runs once it answers again. :meth:`stop` sends SIGTERM, waits ``10`` s,
    then SIGKILL. The child's stdout and stderr go to ``<data_dir>/dynamodb-local.log``.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                 start_timeout: float = 60.0, on_restart: Callable[["DynamoDBLocal"], None] | None = None):
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.start_timeout = start_timeout
        self.on_restart = on_restart
        self.restarts = 0
        self.java: Java | None = None
        self.home: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock_file: Any = None
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._supervisor: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """``http://host:port`` of the store."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running child's process id (None when stopped)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> "DynamoDBLocal":
        """Find Java and DynamoDB Local, lock ``data_dir``, start and wait for the store."""
        self.java = find_java()
        self.home = find_dynamodb_local(fetch=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            self._kill_leftover()
            if not self.port:
                self.port = free_port(self.host)
            self._stopping.clear()
            self._ready.clear()
            self._failure = None
            # The supervising thread starts the child, so PR_SET_PDEATHSIG is tied to a thread
            # that lives exactly as long as the store is wanted.
            self._supervisor = threading.Thread(target=self._supervise, name="dynamodb-local", daemon=True)
            self._supervisor.start()
            if not self._ready.wait(self.start_timeout + 5) or self._failure is not None:
                raise self._failure or StoreSetupError(
                    f"DynamoDB Local did not answer on {self.endpoint} within {self.start_timeout:.0f} s "
                    f"(see {self.data_dir / 'dynamodb-local.log'})")
        except BaseException:
            self.stop()
            raise
        log.info("DynamoDB Local %s on %s (Java %d from %s, data in %s, pid %s)", DYNAMODB_LOCAL_VERSION,
                 self.endpoint, self.java.version, self.java.source, self.data_dir, self.pid)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the store and its supervisor; release the data directory. Safe to call twice."""
        self._stopping.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join(timeout + 5)
        self._supervisor = None
        self._proc = None
        with contextlib.suppress(OSError):
            (self.data_dir / "store.pid").unlink()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the flock
            self._lock_file = None

    def __enter__(self) -> "DynamoDBLocal":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------------

    def _take_lock(self) -> None:
        fh = open(self.data_dir / ".lock", "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise StoreSetupError(
                f"{self.data_dir} is in use by another running hub. Fix: stop that `relaynet serve`, "
                f"or give this one another --data-dir.") from None
        self._lock_file = fh

    def _kill_leftover(self) -> None:
        """A store left by a hub that died where PR_SET_PDEATHSIG does not exist (we hold the lock,
        so no live hub owns it): stop it before it and ours share one database file."""
        pid_file = self.data_dir / "store.pid"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            return
        if _pid_alive(pid) and "DynamoDBLocal" in _cmdline(pid):
            log.warning("stopping a DynamoDB Local (pid %d) left running by an earlier hub", pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(OSError):
            pid_file.unlink()

    def _command(self) -> list[str]:
        assert self.java is not None and self.home is not None
        opts = os.environ.get("RELAYNET_DYNAMODB_LOCAL_JAVA_OPTS")
        java_opts = opts.split() if opts is not None else list(DEFAULT_JAVA_OPTS)
        return [self.java.path, *java_opts, f"-Djava.library.path={self.home / 'DynamoDBLocal_lib'}",
                "-jar", str(self.home / "DynamoDBLocal.jar"), "-sharedDb", "-disableTelemetry", "-dbPath", str(self.data_dir),
                "-port", str(self.port)]

    def _spawn(self) -> subprocess.Popen[bytes]:
        logfile = open(self.data_dir / "dynamodb-local.log", "ab")
        try:
            # start_new_session: a Ctrl-C at the terminal reaches the hub, which stops the store
            proc = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL, stdout=logfile,
                                    stderr=subprocess.STDOUT, cwd=self.data_dir, start_new_session=True,
                                    preexec_fn=_die_with_parent if _prctl is not None else None)
        finally:
            logfile.close()
        (self.data_dir / "store.pid").write_text(f"{proc.pid}\n")
        return proc

    def _wait_answering(self, proc: subprocess.Popen[bytes]) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline and not self._stopping.is_set():
            if proc.poll() is not None:
                return False
            if _answers(self.endpoint):
                return True
            time.sleep(0.05)
        return False

    def _log_tail(self) -> str:
        try:
            return (self.data_dir / "dynamodb-local.log").read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def _supervise(self) -> None:
        backoff = 1.0
        first = True
        while not self._stopping.is_set():
            try:
                proc = self._proc = self._spawn()
            except OSError as exc:
                self._failure = StoreSetupError(f"cannot start DynamoDB Local with {self._command()[0]}: {exc}")
                self._ready.set()
                return
            up = self._wait_answering(proc)
            if first:
                if not up and not self._stopping.is_set():
                    proc.kill()
                    self._failure = StoreSetupError(
                        f"DynamoDB Local did not start on {self.endpoint} (exit {proc.poll()}):\n{self._log_tail()}")
                    self._ready.set()
                    return
                first = False
                self._ready.set()
            if up:
                backoff = 1.0
                if self.restarts and self.on_restart is not None:
                    try:
                        self.on_restart(self)
                    except Exception:  # noqa: BLE001 - a report, never fatal to the store
                        log.exception("on_restart failed")
                proc.wait()
            if self._stopping.is_set():
                return
            self.restarts += 1
            log.error("DynamoDB Local (pid %d) exited with %s; restarting it on %s in %.0f s (restart %d)",
                      proc.pid, proc.poll(), self.endpoint, backoff, self.restarts)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, 30.0)



# --------------------------------------------------------------------------------------------
# Durability of transactions


class TransactionBarrier:
    """Makes a TransactWriteItems durable before the hub acknowledges the call that made it.

    Measured on DynamoDB Local 1.25.1 (Java 17 and 25): it answers TransactWriteItems before the
    transaction reaches its SQLite file, so a ``kill -9`` of the store right after the answer
    loses it (5 of 5 single-put transactions lost; every PutItem, UpdateItem and BatchWriteItem
    kept), while any request it serves afterwards, from any connection, finds it committed (10 of
    10 kept behind one GetItem; likewise behind a Query, an UpdateItem or a BatchGetItem, 21 of
    21 each, and a cancelled transaction, 6 of 6, against 7 of 21 kept with nothing after it). So the local
    stack, after a handler whose thread's last request was a transaction and before it answers
    the caller, sends one strongly consistent GetItem of a key nothing uses (:meth:`settle`); a
    handler that sent anything after its transaction (a read, an update, a cancelled
    transaction) needs none. Another thread's request settles it too (a GetItem or a Query from
    another connection sent after the answer: 21 of 21 each), but sharing barriers between
    threads was tried twice and dropped (docs/architecture.md): a settle comes microseconds after
    its answer, so under 32 paced agents one that waited for company still sent 2,624
    barriers for 3,000 calls. DynamoDB in AWS needs none of this: a transaction is durable when it is
    acknowledged.

    :meth:`install` hooks boto3's default session (``after-call.dynamodb``: an answered
    TransactWriteItems leaves the thread unsettled, any other answered request settles it; and
    ``before-call.apigatewaymanagementapi``: a postToConnection, the AG2 wire's answer, is sent only
    after the thread is settled), so it applies to every client created afterwards in this process (the local stack drops the cached
    client when it starts). Per thread: each HTTP request runs in its own thread.
    """

    BARRIER_KEY = {"PK": {"S": "LOCAL#BARRIER"}, "SK": {"S": "LOCAL#BARRIER"}}

    def __init__(self, endpoint: str, table: str):
        self.endpoint = endpoint
        self.table = table
        self._pending = threading.local()
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._session: Any = None
        #: Barrier GetItems sent by :meth:`settle` (for benchmarks and tests).
        self.barriers_sent = 0

    def _seen(self, http_response: Any = None, model: Any = None, **_: Any) -> None:
        if model is not None and model.name == "TransactWriteItems":
            self._pending.dirty = True  # answered, perhaps not yet on disk
        elif http_response is not None and http_response.status_code < 500:
            self._pending.dirty = False  # the store served a request after it: committed

    def install(self) -> "TransactionBarrier":
        """Start watching this process's DynamoDB clients (boto3's default session)."""
        import boto3

        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        self._session = boto3.DEFAULT_SESSION
        self._session.events.register("after-call.dynamodb", self._seen,
                                      unique_id="relaynet-local-transaction-barrier")
        self._session.events.register("before-call.apigatewaymanagementapi", self._answering,
                                      unique_id="relaynet-local-transaction-barrier-post")
        return self

    def _answering(self, **_: Any) -> None:
        # An AG2 wire function answers by postToConnection from inside the handler (relaynet.ag2.ops.flush),
        # before the stack's settle after it: the answer leaves only once its transaction is committed.
        self.settle()

    def uninstall(self) -> None:
        """Stop watching (the hook is removed from the default session)."""
        if self._session is not None:
            self._session.events.unregister("after-call.dynamodb",
                                            unique_id="relaynet-local-transaction-barrier")
            self._session.events.unregister("before-call.apigatewaymanagementapi",
                                            unique_id="relaynet-local-transaction-barrier-post")
            self._session = None

    def client(self) -> Any:
        """The barrier's own DynamoDB client (its own boto3 session, so the hook does not watch
        it), made once under a lock: a cold burst of concurrent calls would otherwise make one
        each (about 20 ms of CPU apiece; issue 31's first 32 claims spent most of a worker's
        time there)."""
        with self._client_lock:
            if self._client is None:
                import boto3

                from relaynet.store.table import client_config

                self._client = boto3.session.Session().client(
                    "dynamodb", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="local",
                    aws_secret_access_key="local", config=client_config(retries={"max_attempts": 10, "mode": "standard"}))
            return self._client

    def settle(self) -> None:
        """If this thread's last request was a transaction, wait until the store has committed
        it (one GetItem). Errors propagate (the caller answers 500: not acknowledged)."""
        if not getattr(self._pending, "dirty", False):
            return
        self.barriers_sent += 1
        self.client().get_item(TableName=self.table, Key=self.BARRIER_KEY, ConsistentRead=True)
        self._pending.dirty = False
