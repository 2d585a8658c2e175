"""``trainfix slack``: the Slack bot, in Socket Mode (app token) or HTTP mode (signing secret).

slack_bolt is imported inside the command only, so the rest of the CLI never loads it.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

Mode = Literal["auto", "socket", "http"]


def slack_mode(settings, mode: str) -> str:
    """``socket`` or ``http``: as asked, or (``auto``) Socket Mode when an app token is set, else HTTP.

    A missing token or secret is refused here, before anything heavy is loaded.
    """
    from assistant.errors import TrainfixError

    if mode == "auto":
        mode = "socket" if settings.slack_app_token else "http"
    if settings.slack_bot_token is None:
        raise TrainfixError("set TRAINFIX_SLACK_BOT_TOKEN (the bot token, xoxb-…) to run the Slack bot")
    if mode == "socket" and not settings.slack_app_token:
        raise TrainfixError("Socket Mode needs TRAINFIX_SLACK_APP_TOKEN (an app-level token, xapp-…, "
                            "with connections:write)")
    if mode == "http" and not settings.slack_signing_secret:
        raise TrainfixError("HTTP mode needs TRAINFIX_SLACK_SIGNING_SECRET; or set TRAINFIX_SLACK_APP_TOKEN for Socket Mode")
    return mode


def slack_command(
    mode: Annotated[str, typer.Option(help="auto (Socket Mode when TRAINFIX_SLACK_APP_TOKEN is set, else HTTP), "
                                           "socket or http")] = "auto",
    host: Annotated[str, typer.Option(help="HTTP mode: interface to bind (put a TLS reverse proxy in front)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP mode: port (0 picks a free one and prints it)")] = 3000,
) -> None:
    """Run the Slack bot: mention @trainfix with a paste, DM it, use /trainfix, or share a log with a mention."""
    from app.slack_settings import SlackSettings
    from assistant.errors import TrainfixError

    if mode not in ("auto", "socket", "http"):
        raise TrainfixError("--mode must be auto, socket or http")
    settings = SlackSettings()
    chosen = slack_mode(settings, mode)
    from app.slack_bot import build_app
    from assistant.api import Assistant

    app, _ = build_app(settings, Assistant(settings), socket_mode=chosen == "socket")
    if chosen == "socket":
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        handler = SocketModeHandler(app, settings.slack_app_token.get_secret_value())
        typer.echo("trainfix slack: connecting in Socket Mode (Ctrl-C stops)")
        try:
            handler.start()  # blocks until Ctrl-C
        except Exception as err:  # noqa: BLE001 - the edge: e.g. the app token refused by apps.connections.open
            raise TrainfixError(f"Socket Mode could not connect ({type(err).__name__}: {err})") from None
        return
    from app.slack_http import PATH, SlackHTTPServer

    try:
        server = SlackHTTPServer(app, host, port)
    except OSError as err:
        raise TrainfixError(f"cannot serve on {host}:{port} ({err}); pick another with --port") from None
    typer.echo(f"trainfix slack: listening on http://{host}:{server.port}{PATH} (HTTP mode; Ctrl-C stops)")
    try:
        server.serve_forever()
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    """Add ``slack`` to the trainfix CLI."""
    app.command("slack")(slack_command)
