"""What a SnapStart snapshot must not share, made fresh after each restore (issue 30;
docs/architecture.md, "SnapStart").

With Lambda SnapStart (Python 3.12 and later, published versions), a version is initialised once,
its microVM is snapshotted, and every new execution environment of that version resumes from the
snapshot. Whatever the init left in memory is then the same in all of them, so AWS asks that
unique content be made after the restore ("Handling uniqueness with Lambda SnapStart"). What this
process would otherwise share, and what :func:`after_restore` does about it:

- ``random``'s Mersenne Twister state: the retry jitter of the conditional-write loops
  (relaynet.tasks, relaynet.claims, relaynet.store.mailboxes, relaynet.messaging), the sweep's
  shuffle and botocore's standard-mode retry backoff would run in lockstep across environments
  that restored together, the thundering herd jitter exists to break. Reseeded from os.urandom.
- relaynet.ids' monotonic ULID state (the last millisecond and random part): an environment whose
  clock reads at or behind the snapshot's last millisecond increments the snapshot's random part,
  and two such environments mint the same id. Forgotten, so the next id draws fresh randomness.
- open connections: botocore's connection pools (the DynamoDB client, the API Gateway
  management clients, the push at the write's Lambda client) and the outbound ``httpx.Client`` (relaynet.push.outbound). A socket in a
  snapshot is one TCP connection that every restored environment would believe it owns. Closed;
  the clients reopen on first use (a closed botocore client's pool manager starts empty again).
- per-container caches (relaynet.cache): their ages are read on time.monotonic, which a restore
  does not advance by the time the snapshot spent stored, so an entry read at init would look
  fresh long after its bound. Emptied.

Not here because nothing caches them at init: tokens and secrets (``secrets`` and ``uuid4`` read
os.urandom on every call) and credentials (in a SnapStart function the runtime serves them from
its container credentials endpoint, which botocore's provider refreshes itself).

The hook is registered with ``snapshot_restore_py``, the runtime-hook library that AWS includes
in the Python managed runtimes; the layer must not ship a copy of its own (shared/requirements.txt),
since a second copy would hold a registry the runtime never reads. :mod:`relaynet.observability`
calls :func:`register` on import, and every handler file imports it (its entry point goes through
``observability.instrument``), so every handler registers it at init, as the runtime requires of hooks.
"""

from __future__ import annotations

import functools
import logging
import random
import sys

log = logging.getLogger(__name__)


def after_restore() -> None:
    """Make fresh what a restored environment must not share with its siblings (the module's
    list). Safe to call at any time, also without a restore: it only reseeds, forgets and
    closes what is reopened on first use. Raises nothing a failed close could raise."""
    random.seed()  # os.urandom
    from relaynet import ids

    ids.forget_monotonic_state()
    from relaynet import cache

    cache.clear()
    _close_connections()


def _close_connections() -> None:
    """Close the pools of the clients this process made (only modules already imported, only
    clients already made: nothing is created here). Each reopens on first use."""
    closers = (("relaynet.store.table", "close_connections"), ("relaynet.ag2.post", "close_clients"),
               ("relaynet.push", "close_outbound"), ("relaynet.push_at_write", "close_clients"))
    for module, name in closers:
        loaded = sys.modules.get(module)
        if loaded is None:
            continue
        try:
            getattr(loaded, name)()
        except Exception:  # noqa: BLE001  # logged; a dead pooled socket costs one retried request, not a failure
            log.warning("after restore: %s.%s failed", module, name, exc_info=True)


@functools.cache
def register() -> bool:
    """Register :func:`after_restore` with the runtime's hook registry once per process
    (``snapshot_restore_py.register_after_restore``). Returns True. Raises ImportError, naming
    the fix, when ``snapshot_restore_py`` is missing (it is a dependency of the package and part
    of Lambda's Python managed runtimes)."""
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError as err:  # pragma: no cover - a broken install
        raise ImportError("relaynet needs snapshot-restore-py (pip install snapshot-restore-py): the "
                          "SnapStart runtime hooks (relaynet.snapstart)") from err
    register_after_restore(after_restore)
    return True
