"""`trainfix <command>` runs an app holding only that command: its help, options and errors are the full app's."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from app import cli

NAMES = [cli._name(c) for c in cli.app.registered_commands] + [g.name for g in cli.app.registered_groups]


def test_every_command_and_group_is_narrowed_to_itself():
    assert len(NAMES) > 10
    for name in NAMES:
        narrow = cli.for_argv(["trainfix", name, "--help"])
        assert narrow is not cli.app
        found = [cli._name(c) for c in narrow.registered_commands] + [g.name for g in narrow.registered_groups]
        assert found == [name]


@pytest.mark.parametrize("argv", [["trainfix"], ["trainfix", "--help"], ["trainfix", "diagnoze"]])
def test_anything_else_gets_the_whole_app(argv):
    assert cli.for_argv(argv) is cli.app


@pytest.mark.parametrize("name", NAMES)
def test_help_is_the_same(name):
    runner = CliRunner()
    full = runner.invoke(cli.app, [name, "--help"], prog_name="trainfix")
    narrow = runner.invoke(cli.for_argv(["trainfix", name]), [name, "--help"], prog_name="trainfix")
    assert full.exit_code == narrow.exit_code == 0
    assert narrow.output == full.output


@pytest.mark.parametrize("args", [["diagnose", "--no-such-option"], ["diagnose"], ["index", "nope"],
                                  ["search", "--k", "x", "q"]])
def test_errors_are_the_same(args):
    runner = CliRunner()
    full = runner.invoke(cli.app, args, prog_name="trainfix")
    narrow = runner.invoke(cli.for_argv(["trainfix", *args]), args, prog_name="trainfix")
    assert full.exit_code == narrow.exit_code != 0
    assert narrow.output == full.output
