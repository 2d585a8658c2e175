"""The ``trainfix`` command line. It only parses, calls the core and renders; errors become messages here."""

from __future__ import annotations

import sys

import typer

from assistant.errors import TrainfixError

app = typer.Typer(
    name="trainfix",
    help="Diagnose failed LLM training runs from pasted errors, logs and questions — offline, with citations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


def main() -> None:
    """Console-script entry point: runs the app and turns :class:`TrainfixError` into a message and exit code 2."""
    try:
        app()
    except TrainfixError as err:
        typer.secho(f"trainfix: {err}", err=True, fg=typer.colors.RED)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("trainfix: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
