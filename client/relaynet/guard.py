"""``relaynet guard``: claims enforced at the commit (docs/protocol.md 10.5; issue 25).

A claim binds an agent only while it respects the 409; a git hook makes the repository respect it
too. ``relaynet guard install [--pre-push]`` writes a ``pre-commit`` hook (and a ``pre-push`` one)
into the repository's hooks directory (``git rev-parse --git-path hooks``, so ``core.hooksPath``
is honoured); each runs this module:

- ``relaynet guard staged`` (``pre-commit``): the staged paths, from ``git diff --cached
  --name-status -M``: added, copied, modified and deleted paths and both sides of a rename;
- ``relaynet guard pushed`` (``pre-push``): every path changed by the commits being pushed that
  no remote has (``git log --name-status -M <sha> --not --remotes``, per ref git writes on stdin);
- ``relaynet guard check PATH...``: the given paths, for scripts and CI (relative to the current
  directory, or absolute; a path outside the root is not checked and says so).

Each asks ``POST $RELAYNET_URL/v1/claims/check`` with ``$RELAYNET_TOKEN`` (1,000 paths a request;
the paths relative to the claims' root: ``$RELAYNET_CLAIM_ROOT`` when set, else the git top level;
``$RELAYNET_CLAIM_RESOURCE`` names the claims' ``resourceId`` namespace when they carry one) and
refuses, exit 1, when a path overlaps a live claim of another instance, naming the holder, the
scope, the expiry and the task on stderr. The committer's own claims pass. Exit 0 otherwise.

``RELAYNET_GUARD=off`` (or ``git commit --no-verify``) bypasses it; the refusal says so. When the
guard cannot ask (no ``RELAYNET_URL``/``RELAYNET_TOKEN``, the hub unreachable or slower than
``RELAYNET_GUARD_TIMEOUT_SECONDS`` (default 5), the token refused) it lets the change through with
one line of warning, and ``RELAYNET_GUARD=strict`` refuses instead (exit 1). Only the standard
library is imported, so a hook starts fast.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

DEFAULT_TIMEOUT = 5.0
BATCH = 1000  # paths per request: the endpoint's limit
MARKER = "# relaynet guard"
BYPASS = "Bypass with RELAYNET_GUARD=off or git commit --no-verify (git push --no-verify for a push)."


class Unavailable(Exception):
    """The hub could not be asked (unreachable, slow, the token refused, not configured)."""


def unset(environ: Mapping[str, str]) -> str:
    """What is missing of ``RELAYNET_URL`` and ``RELAYNET_TOKEN``, named: ``"RELAYNET_TOKEN is
    not set"`` (the warning of the guard and of the edit hook when they cannot ask the hub)."""
    missing = [name for name in ("RELAYNET_URL", "RELAYNET_TOKEN") if not environ.get(name)]
    return f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"


def has_control_character(path: str) -> bool:
    """Whether ``path`` holds a control character: ``POST /v1/claims/check`` refuses such a path
    (docs/protocol.md 10.4), so the guard and the edit hook leave it unchecked and say so."""
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path)


def git(args: Sequence[str], cwd: str | os.PathLike[str] | None = None, stdin: str | None = None) -> str:
    """``git ARGS`` in ``cwd``: its stdout. Raises subprocess.CalledProcessError."""
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True).stdout


def root(environ: Mapping[str, str], cwd: str | os.PathLike[str] | None = None) -> Path:
    """The claims' root: ``$RELAYNET_CLAIM_ROOT``, else the git top level of ``cwd``.
    Raises subprocess.CalledProcessError outside a repository without the variable."""
    if environ.get("RELAYNET_CLAIM_ROOT"):
        return Path(environ["RELAYNET_CLAIM_ROOT"]).resolve()
    return Path(git(["rev-parse", "--show-toplevel"], cwd).strip()).resolve()


def _name_status(text: str) -> list[str]:
    """Paths of ``--name-status -z`` output: both sides of a rename, the new side of a copy."""
    fields, out, i = text.split("\0"), [], 0
    while i < len(fields):
        status = fields[i].strip()
        if not status:  # between commits of a log, and at the end
            i += 1
            continue
        if status[0] in "RC":
            old, new = fields[i + 1], fields[i + 2]
            out += [old, new] if status[0] == "R" else [new]
            i += 3
        else:
            out.append(fields[i + 1])
            i += 2
    return out


def staged_paths(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The paths a commit of the index would change, relative to the git top level (pre-commit)."""
    return list(dict.fromkeys(_name_status(git(["diff", "--cached", "--name-status", "-z", "-M"], cwd))))


def pushed_paths(refs: Iterable[str], cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """The paths changed by the commits a push sends that no remote has yet (pre-push): ``refs``
    are git's stdin lines ``<local ref> <local sha> <remote ref> <remote sha>``; a deleted ref sends none."""
    out: list[str] = []
    for line in refs:
        parts = line.split()
        if len(parts) != 4 or set(parts[1]) == {"0"}:
            continue
        log = git(["log", "--format=", "--name-status", "-z", "-M", parts[1], "--not", "--remotes"], cwd)
        out += _name_status(log)
    return list(dict.fromkeys(out))


def ask(url: str, token: str, paths: list[str], timeout: float, resource: str | None = None) -> list[dict[str, Any]]:
    """``POST <url>/v1/claims/check`` for ``paths`` (in batches of :data:`BATCH`): the results of
    the paths that conflict, ``[{path, conflicts}]``. Raises :class:`Unavailable` when it cannot
    ask or the hub refuses (a 400 for a path included, with the hub's message)."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(paths), BATCH):
        body: dict[str, Any] = {"paths": paths[start:start + BATCH]}
        if resource:
            body["resourceId"] = resource
        request = urllib.request.Request(f"{url.rstrip('/')}/v1/claims/check", method="POST",
                                         data=json.dumps(body).encode("utf-8"),
                                         headers={"Authorization": f"Bearer {token}", "User-Agent": "relaynet-guard",
                                                  "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the hub's URL
                answer = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            try:
                error = json.loads(exc.read().decode("utf-8"))["error"]
            except (ValueError, KeyError, TypeError, OSError):
                error = {"code": str(exc.code), "message": exc.reason}
            if exc.code == 400:
                raise Unavailable(f"the hub refused a path ({error.get('message', 'invalid paths')})") from None
            raise Unavailable(f"the hub answered {exc.code} {error.get('code')}: {error.get('message')}") from None
        except (OSError, ValueError) as exc:
            raise Unavailable(f"the hub at {url} did not answer ({exc})") from None
        found += [r for r in answer.get("results", []) if r.get("conflicts")]
    return found


def describe(conflicts: list[dict[str, Any]]) -> str:
    """The refusal's text: one line per path and holder, then what to do instead."""
    lines = []
    for result in conflicts:
        for c in result["conflicts"]:
            holder = c.get("holder") or {}
            task = f", for task {c['taskId']}" if c.get("taskId") else ""
            lines.append(f"  {result['path']}: claimed by {holder.get('agent')} (instance {holder.get('instanceId')}) "
                         f"as {c['scope']!r} until {c['expiresAt']}{task}")
    return ("relaynet guard: these paths are claimed by another instance:\n" + "\n".join(lines) +
            "\nAsk the holder with network_ask (or wait until the claim ends), or leave these paths out. " + BYPASS)


def guard(paths: list[str], environ: Mapping[str, str], err: IO[str]) -> int:
    """Check ``paths`` (relative to the claims' root) and report on ``err``: 1 when one conflicts
    (or the hub cannot be asked under ``RELAYNET_GUARD=strict``), else 0."""
    mode = (environ.get("RELAYNET_GUARD") or "").strip().lower()
    if mode == "off" or not paths:
        return 0
    strict = mode == "strict"
    unchecked = [p for p in paths if has_control_character(p)]
    for p in unchecked:
        err.write(f"relaynet guard: warning: {p!r} has a control character in its name: not checked\n")
    if unchecked and strict:
        err.write(f"relaynet guard: refused: {len(unchecked)} path(s) cannot be checked and RELAYNET_GUARD=strict. "
                  f"{BYPASS}\n")
        return 1
    paths = [p for p in paths if p not in unchecked]
    if not paths:
        return 0
    try:
        url, token = environ.get("RELAYNET_URL"), environ.get("RELAYNET_TOKEN")
        if not url or not token:
            raise Unavailable(unset(environ))
        try:
            timeout = float(environ.get("RELAYNET_GUARD_TIMEOUT_SECONDS") or DEFAULT_TIMEOUT)
        except ValueError:
            timeout = DEFAULT_TIMEOUT
        conflicts = ask(url, token, paths, timeout, environ.get("RELAYNET_CLAIM_RESOURCE") or None)
    except Unavailable as exc:
        if strict:
            err.write(f"relaynet guard: refused: cannot check the claims ({exc}) and RELAYNET_GUARD=strict. {BYPASS}\n")
            return 1
        err.write(f"relaynet guard: warning: claims not checked: {exc}\n")
        return 0
    if conflicts:
        err.write(describe(conflicts) + "\n")
        return 1
    return 0


def relative(paths: Iterable[str], top: Path, err: IO[str], cwd: Path | None = None) -> list[str]:
    """``paths`` (absolute or relative to ``cwd``) as paths relative to ``top``; one outside it is
    left out with one line on ``err``."""
    base = cwd or Path.cwd()
    out = []
    for raw in paths:
        full = (base / raw).resolve() if not os.path.isabs(raw) else Path(raw).resolve()
        try:
            out.append(full.relative_to(top).as_posix())
        except ValueError:
            err.write(f"relaynet guard: {raw} is outside the claims' root {top}: not checked\n")
    return out


def hook_script(verb: str, command: Sequence[str]) -> str:
    """The text of a git hook running ``<command> guard <verb>``."""
    return (f"#!/bin/sh\n{MARKER}: refuses a change over another instance's live claim "
            f"(relaynet guard install). {BYPASS}\nexec {shlex.join([*command, 'guard', verb])}\n")


def install(pre_push: bool, command: Sequence[str], cwd: str | os.PathLike[str] | None, out: IO[str],
            err: IO[str]) -> int:
    """Write the ``pre-commit`` hook (and ``pre-push`` with ``pre_push``) of the repository at
    ``cwd``. A hook already there that this command did not write is kept and the install
    refused (exit 2); ours is rewritten. Returns the exit status."""
    try:
        hooks = Path(git(["rev-parse", "--git-path", "hooks"], cwd).strip())
    except subprocess.CalledProcessError:
        err.write("relaynet guard: not inside a git repository\n")
        return 2
    hooks = hooks if hooks.is_absolute() else Path(cwd or ".").resolve() / hooks
    wanted = {"pre-commit": "staged", **({"pre-push": "pushed"} if pre_push else {})}
    for name in wanted:
        existing = hooks / name
        if existing.exists() and MARKER not in existing.read_text(errors="replace"):
            err.write(f"relaynet guard: {existing} exists and is not ours: call `relaynet guard staged` "
                      "(pre-commit) or `relaynet guard pushed` (pre-push) from it yourself\n")
            return 2
    hooks.mkdir(parents=True, exist_ok=True)
    for name, verb in wanted.items():
        path = hooks / name
        path.write_text(hook_script(verb, command))
        path.chmod(0o755)
        out.write(f"relaynet guard: installed {path}\n")
    return 0


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None, stdin: IO[str] | None = None) -> int:
    """``relaynet guard install [--pre-push] | staged | pushed | check PATH...``."""
    env = os.environ if environ is None else environ
    verb, rest = (argv[0], list(argv[1:])) if argv else ("", [])
    if verb == "install":
        if set(rest) - {"--pre-push"}:
            sys.stderr.write("usage: relaynet guard install [--pre-push]\n")
            return 2
        return install("--pre-push" in rest, [sys.executable, "-m", "relaynet.cli"], None, sys.stdout, sys.stderr)
    if (env.get("RELAYNET_GUARD") or "").strip().lower() == "off":
        return 0
    try:
        top = root(env)
        if verb in ("staged", "pushed"):
            repo = Path(git(["rev-parse", "--show-toplevel"]).strip()).resolve()
            changed = staged_paths(repo) if verb == "staged" else \
                pushed_paths((stdin or sys.stdin).read().splitlines(), repo)
            paths = relative((str(repo / p) for p in changed), top, sys.stderr)
        elif verb == "check":
            paths = relative(rest, top, sys.stderr)
        else:
            sys.stderr.write("usage: relaynet guard install [--pre-push] | staged | pushed | check PATH...\n")
            return 2
    except subprocess.CalledProcessError as exc:
        sys.stderr.write(f"relaynet guard: git failed: {(exc.stderr or '').strip() or exc}\n")
        return 2
    return guard(paths, env, sys.stderr)
