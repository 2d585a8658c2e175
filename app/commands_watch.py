"""``trainfix watch`` (diagnose a run while its log grows) and ``trainfix check`` (the guide's pre-launch checklist)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

CHECK_BYTES = 8 * 1024 * 1024  # in a fast stream, look for findings at least this often


def watch_command(
    path: Annotated[str, typer.Argument(help="log file to follow (it may not exist yet); '-' reads stdin")],
    tee: Annotated[bool, typer.Option("--tee", help="pass the input through to stdout unchanged; alerts go to "
                                                    "stderr")] = False,
    from_end: Annotated[bool, typer.Option("--from-end", help="skip what the file holds now; watch new lines "
                                                              "only")] = False,
    slack: Annotated[bool, typer.Option("--slack", help="also post alerts to Slack (TRAINFIX_SLACK_WEBHOOK_URL, or "
                                                        "the bot token and a channel)")] = False,
    slack_channel: Annotated[str | None, typer.Option("--slack-channel", help="channel for the bot token's alerts "
                                                                              "(implies --slack)")] = None,
    lang: Annotated[str | None, typer.Option("--lang", help="zh or en (default: the log's language)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per alert (finding and answer)")] = False,
) -> None:
    """Follow a training log as it grows (rotation, truncation and stdin too) and alert once per finding."""
    from app.follow import follow_file, follow_stream
    from app.slack_settings import SlackSettings
    from app.watch_alerts import Reporter
    from assistant.errors import TrainfixError
    from assistant.watch import Thresholds, Watcher

    if lang not in (None, "zh", "en"):
        raise TrainfixError("--lang must be zh or en")
    if path != "-" and Path(path).is_dir():
        raise TrainfixError(f"{path} is a directory, not a log file")
    settings = SlackSettings()
    target = settings.watch_target(slack_channel) if (slack or slack_channel) else None
    out = sys.stderr if tee else sys.stdout

    def echo(text: str) -> None:
        print(text, file=out, flush=True)

    def note(text: str) -> None:
        print(f"trainfix watch: {text}", file=sys.stderr, flush=True)

    source = "stdin" if path == "-" else Path(path).name
    reporter = Reporter(settings, source=source, echo=echo, warn=note, slack=target, lang=lang, as_json=as_json)
    watcher = Watcher(Thresholds.from_settings(settings), kb_dir=settings.kb_dir)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    poll = settings.watch_poll_seconds
    events = follow_stream(sys.stdin.fileno(), stop, poll=poll) if path == "-" else \
        follow_file(path, stop, poll=poll, from_end=from_end)
    note(f"watching {source} (Ctrl-C stops)")
    passthrough = sys.stdout.buffer
    found = 0
    unchecked = 0
    try:
        for ev in events:
            if ev.kind == "data":
                if tee:
                    passthrough.write(ev.data)
                    passthrough.flush()
                watcher.feed(ev.data)
                unchecked += len(ev.data)
                if unchecked < CHECK_BYTES:
                    continue
            elif ev.kind == "waiting":
                note(f"{path} does not exist yet; waiting for it")
                continue
            elif ev.kind in ("rotated", "truncated"):
                note(f"{source} was {ev.kind}; following it from its new start (findings already reported are "
                     "not repeated)")
                continue
            unchecked = 0
            for finding in watcher.check():
                found += 1
                reporter.report(finding)
        for finding in watcher.finish():
            found += 1
            reporter.report(finding)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        stop.set()
    finally:
        signal.signal(signal.SIGTERM, previous)
    note(f"stopped: {watcher.scanner.chunker.stats.lines:,} lines read, {found} alert(s)")


def check_command(
    config: Annotated[Path, typer.Argument(help="training config: TrainingArguments JSON (args.to_json_string()), "
                                                "a YAML/JSON config (axolotl, LLaMA-Factory, DeepSpeed)")],
    lang: Annotated[str, typer.Option("--lang", help="en or zh")] = "en",
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Check a training config against the guide's pre-launch checklist (§8); exit code 1 when something is flagged."""
    from app.render_check import render_check
    from assistant.checklist import check_config, load_config
    from assistant.config import Settings
    from assistant.errors import TrainfixError

    if lang not in ("zh", "en"):
        raise TrainfixError("--lang must be zh or en")
    settings = Settings()
    report = check_config(load_config(config), kb_dir=settings.kb_dir)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        from assistant.knowledge import Knowledge

        typer.echo(render_check(report, lang, name=config.name, titles=Knowledge.load(settings.records_dir).titles))
    if report.flagged:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``watch`` and ``check`` to the trainfix CLI."""
    app.command("watch")(watch_command)
    app.command("check")(check_command)
