"""One ``relaynet`` command over two distributions (issue 29; docs/architecture.md, "Two
distributions"): the client's relaynet.cli owns it, and the hub's serve, store and admin join
through the ``relaynet.commands`` entry points of the hub's distribution (root pyproject.toml)."""

from __future__ import annotations

import argparse
import tomllib

from relaynet import cli
from relaynet_local import commands
from tests.conftest import ROOT


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_hub_declares_exactly_its_three_commands_as_entry_points():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][cli.ENTRY_POINTS]
    assert declared == {name: f"relaynet_local.commands:{name}" for name in cli.HUB_COMMANDS}
    installed = {ep.name: ep.value for ep in cli.entry_points(group=cli.ENTRY_POINTS)}
    assert installed == declared, "the installed metadata is stale: pip install -e . again"


def test_with_both_installed_one_relaynet_has_every_command_and_the_hubs_are_the_hubs():
    subs = _subcommands(cli.parser())
    assert set(subs) == {"admin", "serve", "store", "graph", "hook", "guard", "worker", "mcp"}
    p = cli.parser()
    assert p.parse_args(["serve", "--port", "9", "--workers", "2"]).func is commands._serve
    assert p.parse_args(["store", "setup"]).func is commands._store
    args = p.parse_args(["admin", "apply", "net.yaml", "--local"])
    assert args.func is commands._admin and args.local and args.file == "net.yaml"


def test_a_client_command_is_parsed_without_looking_for_entry_points(monkeypatch):
    """``relaynet hook`` runs at every prompt and tool call: it pays no metadata scan."""
    def refuse(*, group):
        raise AssertionError("entry points looked up for a client command")

    monkeypatch.setattr(cli, "entry_points", refuse)
    monkeypatch.setattr(cli, "_hook", lambda args: 7)
    assert cli.main(["hook", "--edits", "check"]) == 7
    assert set(cli.CLIENT_COMMANDS) == set(_subcommands(cli.parser(hub_commands=False)))


def test_without_the_hub_its_commands_say_which_distribution_to_install(monkeypatch, capsys):
    monkeypatch.setattr(cli, "entry_points", lambda *, group: [])
    assert cli.main(["serve", "--port", "1", "--spec", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert "relaynet serve" in err and "hub's distribution" in err and "pip install -e ." in err
    assert cli.main(["admin", "apply", "net.yaml", "--local"]) == 2
    assert "relaynet admin" in capsys.readouterr().err
