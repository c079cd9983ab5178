"""Load Lambda handlers from their files and invoke them with a fake Lambda context.

Rules followed, as the Lambda runtime does them:

- A handler ``"module.func"`` names ``<code_uri>/module.py`` (``"pkg.mod.func"`` names
  ``<code_uri>/pkg/mod.py``), and ``code_uri`` is on ``sys.path`` so a handler can import its
  sibling modules.
- A loaded handler module is a warm *container*: it is reused by later invocations, so
  module-level clients and caches work as in AWS. A container serves one invocation at a time;
  when an invocation arrives while every container of that file is busy (a long poll, say),
  the file is imported once more as a new container (a cold start), exactly like Lambda's
  concurrency. So module-level state of a handler file is never shared by two requests in
  flight. (Modules the handler imports, e.g. ``relaynet.*`` and powertools, are imported once per
  process and shared, which is stricter than AWS: class-level state there is shared by
  concurrent requests. powertools keeps the event being resolved on its router class, which is
  why ``relaynet.http.api`` keeps it on each resolver instead.)
- Each container is imported under a private module name, so two code directories may hold
  files of the same name.

Errors: :class:`HandlerNotFound` when the file or the function does not exist; whatever the
module raises while importing, and whatever the handler raises, propagates to the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import threading
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

__all__ = ["HandlerNotFound", "LambdaContext", "load_handler", "invoke", "clear_cache",
           "container_count"]

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"

_lock = threading.RLock()
_free: dict[str, list[ModuleType]] = {}  # file -> idle containers (most recently used last)
_all: dict[str, list[ModuleType]] = {}  # file -> every container ever loaded


class HandlerNotFound(LookupError):
    """The handler's file or function does not exist."""


class LambdaContext:
    """The subset of the Lambda context object handlers and Powertools read.

    ``get_remaining_time_in_millis()`` counts down from ``timeout`` seconds after creation
    (nothing is killed when it reaches zero).
    """

    def __init__(self, function_name: str, timeout: float = 3.0, memory_limit_in_mb: int = 128):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"{time.strftime('%Y/%m/%d')}/[$LATEST]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the (simulated) Lambda timeout, never negative."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _split(handler: str) -> tuple[str, str]:
    module, _, func = handler.rpartition(".")
    if not module or not func:
        raise HandlerNotFound(f"handler must be 'module.func', got {handler!r}")
    return module, func


def _module_file(code_uri: str, module: str) -> Path:
    return Path(code_uri, *module.split(".")).with_suffix(".py").resolve()


def _import(code_uri: str, module: str, path: Path) -> ModuleType:
    """Import ``path`` as a new container (caller holds no lock: imports may be slow)."""
    if not path.is_file():
        raise HandlerNotFound(f"handler file not found: {path}")
    root = str(Path(code_uri).resolve())
    with _lock:
        if root not in sys.path:
            sys.path.insert(0, root)
        n = len(_all.setdefault(str(path), []))
        _all[str(path)].append(None)  # type: ignore[arg-type]  # reserve the slot number
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"_relaynet_local_fn_{digest}_{module.replace('.', '_')}_{n}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise HandlerNotFound(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    with _lock:
        _all[str(path)][n] = mod
    return mod


@contextlib.contextmanager
def _container(code_uri: str, module: str) -> Iterator[ModuleType]:
    """Check out an idle container of ``module`` (importing a new one if all are busy)."""
    path = _module_file(code_uri, module)
    with _lock:
        idle = _free.setdefault(str(path), [])
        mod = idle.pop() if idle else None
    if mod is None:
        mod = _import(code_uri, module, path)
    try:
        yield mod
    finally:
        with _lock:
            _free.setdefault(str(path), []).append(mod)


def _function(mod: ModuleType, func: str) -> Callable[[dict[str, Any], Any], Any]:
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise HandlerNotFound(f"{mod.__file__} has no callable {func!r}")
    return fn


def load_handler(code_uri: str, handler: str) -> Callable[[dict[str, Any], Any], Any]:
    """The callable named by ``handler`` in a warm container (imported now if there is none).

    Use it to preload a handler or to call it in a test; :func:`invoke` is what gives each
    concurrent invocation its own container.
    """
    module, func = _split(handler)
    with _container(code_uri, module) as mod:
        return _function(mod, func)


def invoke(code_uri: str, handler: str, event: dict[str, Any], *, function_name: str,
           timeout: float = 3.0, memory_size: int = 128) -> Any:
    """Call the handler with ``event`` and a fresh :class:`LambdaContext` in an idle container;
    returns what the handler returns."""
    module, func = _split(handler)
    with _container(code_uri, module) as mod:
        fn = _function(mod, func)
        return fn(event, LambdaContext(function_name, timeout, memory_size))


def container_count(code_uri: str, handler: str) -> int:
    """How many containers of the handler's file are loaded (for tests and diagnostics)."""
    path = _module_file(code_uri, _split(handler)[0])
    with _lock:
        return sum(1 for mod in _all.get(str(path), []) if mod is not None)


def clear_cache() -> None:
    """Forget every container (the next invocation of each handler is a cold start)."""
    with _lock:
        for mods in _all.values():
            for mod in mods:
                if mod is not None:
                    sys.modules.pop(mod.__name__, None)
        _all.clear()
        _free.clear()
