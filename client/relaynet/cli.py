"""The ``relaynet`` command (PROTOCOL.md 9). The client's distribution (``relaynet-client``) owns
it and its agent-side commands: ``mcp worker|plugin|control`` (the stdio MCP bridge),
``hook`` (a Claude Code hook, relaynet.hook), ``guard`` (claims at the commit, relaynet.guard),
``worker`` (the supervisor, relaynet.worker) and ``graph`` (Mermaid, over HTTP).

The hub's commands, ``serve``, ``store setup`` and ``admin apply|launch``, live with the hub
(relaynet_local.commands) and join through the entry-point group :data:`ENTRY_POINTS`: when the
hub's distribution is installed beside this one, one ``relaynet`` has them all; when it is not,
such a command says which distribution to install (:data:`HUB_COMMANDS`).

Results go to stdout as JSON; logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys


def _mcp(args: argparse.Namespace) -> int:
    from relaynet import mcp_bridge

    try:
        mcp_bridge.run(args.surface)
    except ValueError as exc:
        print(f"relaynet: {exc}", file=sys.stderr)
        return 2
    return 0


def _graph(args: argparse.Namespace) -> int:
    from relaynet.client import ApiError, RelaynetClient
    from relaynet.mermaid import mermaid

    url, token = args.url or os.environ.get("RELAYNET_URL"), args.token or os.environ.get("RELAYNET_TOKEN")
    if not url or not token:
        print("relaynet: give --url and --token (a representative's rn_rep_ token), or set RELAYNET_URL and "
              "RELAYNET_TOKEN", file=sys.stderr)
        return 2
    try:
        with RelaynetClient(url, token) as hub:
            graph = hub.call("control_get_graph", {"networkId": args.network} if args.network else {})
    except ApiError as exc:
        print(f"relaynet: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(graph, indent=2) if args.json else mermaid(graph), end="" if not args.json else "\n")
    return 0


def _guard(args: argparse.Namespace) -> int:
    from relaynet import guard

    return guard.main(args.guard_args)


def _hook(args: argparse.Namespace) -> int:
    from relaynet import hook

    return hook.main(args.edits)


def _worker(args: argparse.Namespace) -> int:
    """``relaynet worker``: relaynet.worker.Supervisor until SIGTERM/SIGINT."""
    from relaynet.worker import Supervisor

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.url or not args.token:
        print("relaynet worker: --url and --token (or RELAYNET_URL and RELAYNET_TOKEN) are required", file=sys.stderr)
        return 2
    try:
        supervisor = Supervisor(args.url, args.token, command, max_runs=args.max_runs, run_timeout=args.run_timeout,
                                log_dir=args.log_dir, grace=args.grace)
    except ValueError as exc:
        print(f"relaynet worker: {exc}", file=sys.stderr)
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=os.environ.get("RELAYNET_LOG_LEVEL", "INFO").upper(),
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    supervisor.install_signals()
    return supervisor.run()


#: The entry-point group other distributions add ``relaynet`` subcommands through: each entry
#: point, named as its subcommand, loads to ``register(subparsers)``, which adds that subcommand's
#: parser and sets its ``func`` (``args.func(args)`` -> the exit status).
ENTRY_POINTS = "relaynet.commands"

#: Subcommands the hub's distribution adds, and what they need, for the message of a ``relaynet``
#: that has only the client.
HUB_COMMANDS = {
    "serve": "the local stack",
    "store": "the local stack's DynamoDB Local",
    "admin": "the hub's domain and store (it writes the table)",
}

#: Where the hub's distribution comes from: the repository's root (pyproject.toml there), not client/.
HUB_INSTALL = "install the hub's distribution `relaynet` from a Relaynet checkout (`pip install -e .` at its root, or `make setup`)"


def entry_points(*, group: str) -> "list":
    """``importlib.metadata.entry_points(group=group)``, imported only when a parser needs the hub's
    commands (the metadata scan is the cost of a ``relaynet`` start, which the hooks pay often)."""
    from importlib.metadata import entry_points as installed

    return list(installed(group=group))


def _missing(args: argparse.Namespace) -> int:
    """The ``func`` of a hub command whose distribution is not installed: says so on stderr and
    returns 2."""
    print(f"relaynet {args.cmd}: this command comes with the hub's distribution ({HUB_COMMANDS[args.cmd]}), "
          f"and only the client (relaynet-client) is installed here; {HUB_INSTALL}", file=sys.stderr)
    return 2


def _add_hub_commands(sub: "argparse._SubParsersAction") -> None:
    """Add the subcommands of the ``relaynet.commands`` entry points to ``sub``; each hub command
    none of them adds gets a stand-in that says which distribution to install (:func:`_missing`).
    An entry point that fails to load is reported on stderr and becomes such a stand-in too."""
    added = set()
    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        if ep.name in added:
            continue
        try:
            register = ep.load()
        except Exception as exc:  # noqa: BLE001  # a broken plug-in must not take the client's commands down
            print(f"relaynet: the {ep.name} command of {ep.value} cannot load: {exc}", file=sys.stderr)
            continue
        register(sub)
        added.add(ep.name)
    for name, needs in HUB_COMMANDS.items():
        if name not in added:
            stand_in = sub.add_parser(name, help=f"(not installed: the hub's distribution, {needs})", add_help=False)
            stand_in.add_argument("rest", nargs=argparse.REMAINDER)
            stand_in.set_defaults(func=_missing)


def parser(*, hub_commands: bool = True) -> argparse.ArgumentParser:
    """The argument parser of the ``relaynet`` command: the client's subcommands and, with
    ``hub_commands`` (the default), those of the ``relaynet.commands`` entry points
    (:func:`_add_hub_commands`)."""
    p = argparse.ArgumentParser(prog="relaynet", description="Relaynet: a coordination hub for AI agents.")
    sub = p.add_subparsers(dest="cmd", required=True)
    if hub_commands:
        _add_hub_commands(sub)

    graph = sub.add_parser("graph", help="print the network as a Mermaid flowchart (control_get_graph)")
    graph.add_argument("--url", help="the hub (default RELAYNET_URL)")
    graph.add_argument("--token", help="a representative token (default RELAYNET_TOKEN)")
    graph.add_argument("--network", help="a network id (default: the representative's active network)")
    graph.add_argument("--json", action="store_true", help="print {nodes, edges} instead of Mermaid")
    graph.set_defaults(func=_graph)

    hook = sub.add_parser("hook", help="a Claude Code hook (UserPromptSubmit, PostToolUse, Stop): says when "
                                       "Relaynet mail waits (RELAYNET_URL, RELAYNET_TOKEN; event JSON on stdin)")
    hook.add_argument("--edits", choices=["claim", "check"], default="claim",
                      help="PreToolUse on Edit/Write/MultiEdit/NotebookEdit: take or renew a claim on the file (claim, "
                           "the default) or only check it (check); another instance's claim denies the edit")
    hook.set_defaults(func=_hook)
    guard = sub.add_parser("guard", help="claims at the commit: install [--pre-push] a git hook, or check PATH... "
                           "(exit 1 when another instance's live claim covers one; relaynet.guard)")
    guard.add_argument("guard_args", nargs=argparse.REMAINDER, metavar="install [--pre-push] | staged | pushed | check PATH...")
    guard.set_defaults(func=_guard)

    worker = sub.add_parser("worker", help="start COMMAND for an instance when a task offer, an ask or a wake-up "
                                           "arrives (relaynet.worker): relaynet worker [options] -- COMMAND [ARGS...]")
    worker.add_argument("--url", default=os.environ.get("RELAYNET_URL"), help="the hub (default RELAYNET_URL)")
    worker.add_argument("--token", default=os.environ.get("RELAYNET_TOKEN"),
                        help="the instance's rn_inst_ token (default RELAYNET_TOKEN)")
    worker.add_argument("--max-runs", type=int, default=1, help="active runs at most (default 1)")
    worker.add_argument("--run-timeout", type=float, default=3600.0, help="seconds a run may take (default 3600)")
    worker.add_argument("--log-dir", default=".relaynet/worker", help="run logs and runs.jsonl (default .relaynet/worker)")
    worker.add_argument("--grace", type=float, default=30.0, help="seconds active runs get after SIGTERM (default 30)")
    worker.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]",
                        help="what to run; {prompt} in ARGS is replaced by RELAYNET_PROMPT")
    worker.set_defaults(func=_worker)

    mcp = sub.add_parser("mcp", help="stdio MCP bridge to the HTTP API (RELAYNET_URL, RELAYNET_TOKEN)")
    mcp.add_argument("surface", choices=["worker", "plugin", "control"])
    mcp.set_defaults(func=_mcp)
    return p


#: The client's own subcommands: ``main`` parses them without looking up entry points, so a
#: Claude Code hook (run at every prompt and tool call) pays no metadata scan.
CLIENT_COMMANDS = frozenset({"graph", "hook", "guard", "worker", "mcp"})


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``relaynet`` console script: parses ``argv`` (default ``sys.argv[1:]``)
    and runs the subcommand; returns its exit status (2 for a usage error, argparse's)."""
    args_list = sys.argv[1:] if argv is None else argv
    p = parser(hub_commands=not args_list or args_list[0] not in CLIENT_COMMANDS)
    # parse_args would refuse a stand-in's options (``relaynet serve --port 1`` without the hub)
    # before it could say what to install; otherwise this is what parse_args does
    args, extra = p.parse_known_args(args_list)
    if extra and args.func is not _missing:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
