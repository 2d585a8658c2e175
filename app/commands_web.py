"""``trainfix web`` (the Gradio chat) and ``trainfix feedback export``; Gradio is imported only inside ``web``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

feedback_app = typer.Typer(help="Answer feedback collected by the web chat.", no_args_is_help=True)


def web_command(
    host: Annotated[str, typer.Option(help="interface to bind; beyond loopback needs TRAINFIX_WEB_USER/PASSWORD")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to serve on")] = 7860,
) -> None:
    """Start the web chat: paste an error or drop a log, get a cited answer with the metric plot."""
    from app.web import auth_for, launch
    from assistant.config import Settings

    settings = Settings()
    auth_for(settings, host)  # refuse an open bind before loading anything
    try:
        demo = launch(settings, host=host, port=port, block=False)
    except OSError as err:  # Gradio: "Cannot find empty port in range: 7860-7860"
        from assistant.errors import TrainfixError

        raise TrainfixError(f"cannot serve on {host}:{port} ({err}); pick another with --port") from None
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    # Printed once it is serving, so the address works as soon as it appears.
    typer.echo(f"trainfix web: open http://{shown}:{port}" + ("  (login required)" if settings.web_user else ""))
    demo.block_thread()  # until Ctrl-C, which closes the server


def export_command(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="write JSONL here (default: stdout)")] = None,
) -> None:
    """Export confirmed (thumbs up) and corrected answers as labelled cases (JSONL) for review."""
    from app.feedback import FeedbackStore, export_cases
    from assistant.config import Settings

    store = FeedbackStore(Settings().data_dir)
    cases, skipped = export_cases(store)
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    if out is None:
        typer.echo(lines, nl=False)
    else:
        out.write_text(lines, encoding="utf-8")
    typer.echo(f"{len(cases)} case(s) exported; {skipped} feedback row(s) without a settled label skipped "
               f"({store.path})", err=True)


def register(app: typer.Typer) -> None:
    """Add ``web`` and ``feedback export`` to the trainfix CLI."""
    app.command("web")(web_command)
    feedback_app.command("export")(export_command)
    app.add_typer(feedback_app, name="feedback")
