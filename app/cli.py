"""The ``trainfix`` command line. It only parses, calls the core and renders; errors become messages here."""

from __future__ import annotations

import sys

import typer

from assistant.errors import TrainfixError

_APP = {
    "name": "trainfix",
    "help": "Diagnose failed LLM training runs from pasted errors, logs and questions — offline, with citations.",
    "no_args_is_help": True,
    "add_completion": False,
    "pretty_exceptions_enable": False,
}
app = typer.Typer(**_APP)


def _register() -> None:
    # Each area registers its own commands; their heavy imports stay inside the command functions.
    from app import (
        commands_assistant,
        commands_kb,
        commands_retrieval,
        commands_slack,
        commands_triage,
        commands_watch,
        commands_web,
    )

    for module in (commands_assistant, commands_triage, commands_retrieval, commands_kb, commands_web, commands_slack,
                   commands_watch):
        module.register(app)


_register()


def _name(info) -> str:
    return info.name or typer.main.get_command_name(info.callback.__name__)


def for_argv(argv: list[str]) -> typer.Typer:
    """The app to run for ``argv``: when it names one command (or command group), an app holding only that one.

    Typer turns every registered command into a click command, inspecting each signature, before it runs one:
    ~20 ms of a fresh ``trainfix ask`` for the other 16 (``trainfix diagnose`` skips Typer: app/main.py). Help,
    options and errors of the named command are the same either way (tests/test_cli_narrow.py); anything else
    (no command, ``--help``, a typo) gets the whole app.
    """
    name = argv[1] if len(argv) > 1 else None
    commands = [c for c in app.registered_commands if _name(c) == name]
    groups = [g for g in app.registered_groups if (g.name or g.typer_instance.info.name) == name]
    if len(commands) + len(groups) != 1:
        return app
    narrow = typer.Typer(**_APP)
    narrow.registered_commands = commands
    narrow.registered_groups = groups
    narrow.callback()(_group)  # a lone command would otherwise run as the root: `trainfix diagnose` keeps its name
    return narrow


def _group() -> None:
    pass


def main() -> None:
    """Console-script entry point: runs the app and turns :class:`TrainfixError` into a message and exit code 2."""
    try:
        for_argv(sys.argv)()
    except TrainfixError as err:
        typer.secho(f"trainfix: {err}", err=True, fg=typer.colors.RED)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("trainfix: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
