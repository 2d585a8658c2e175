"""``trainfix triage`` (rule-first diagnosis of a paste or log) and ``trainfix eval-rules`` (scoring)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from app.main import parse_answers
from assistant.errors import InputError

DEFAULT_CASES = ("triage_cases.jsonl",)  # in Settings.labelled_dir (the source checkout's labelled sets)


def triage_command(
    file: Annotated[str, typer.Argument(help="log or paste to diagnose; '-' or nothing reads stdin")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="print the full result as JSON")] = False,
    answer: Annotated[list[str], typer.Option("--answer", "-a", help="answer a follow-up: id=value (repeatable)")] = [],  # noqa: B006
) -> None:
    """Name the failure mode(s) in a training log or pasted error, with evidence lines and ranked causes."""
    from assistant.config import Settings
    from assistant.triage import triage, triage_file

    kb_dir = Settings().kb_dir  # TRAINFIX_KB_DIR, as for every other command
    answers = parse_answers(answer)
    if file == "-":
        if sys.stdin.isatty():
            typer.echo("reading from stdin (paste, then Ctrl-D)…", err=True)
        result = triage(sys.stdin.buffer.read(), answers, kb_dir=kb_dir)
    else:
        result = triage_file(file, answers, kb_dir=kb_dir)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    typer.echo(render_triage(result))


def render_triage(result) -> str:
    """Plain-text rendering of a :class:`assistant.models.Triage`."""
    out: list[str] = []
    for n in result.notices:
        out.append(f"note: {n}")
    for w in result.warnings:
        out.append(f"warning: {w}")
    if result.abstained:
        out.append("No known training failure recognised in the input (abstaining).")
        return "\n".join(out)
    for i, c in enumerate(result.candidates, 1):
        out.append(f"{i}. {c.failure_mode}  confidence {c.confidence:.2f}  (route: {c.route})")
        for e in c.evidence[:5]:
            rank = f" [rank {e.rank}]" if e.rank else ""
            text = e.text if len(e.text) <= 160 else e.text[:157] + "..."
            out.append(f"   line {e.line}{rank}: {text}")
            out.append(f"      matched {e.match!r} ({e.source}, {e.strength})")
        if c.causes:
            out.append("   likely causes:")
            for cause in c.causes[:3]:
                out.append(f"     - {cause.cause_id} ({cause.score:.2f}): " + "; ".join(cause.reasons[1:] or cause.reasons))
    if result.metrics and result.metrics.findings:
        out.append("metric findings:")
        for f in result.metrics.findings:
            out.append(f"   line {f.line}: {f.detail}")
    if result.follow_up:
        out.append("follow-up questions (answer with --answer id=value):")
        for q in result.follow_up:
            question = q.question_zh if result.language == "zh" else q.question_en
            out.append(f"   {q.id}: {question} [{' / '.join(q.options)}]")
    return "\n".join(out)


def eval_rules_command(
    cases: Annotated[Path | None, typer.Option("--cases", help="JSON-lines case file (default: triage_cases.jsonl of the labelled sets)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Score the rule-first triage on labelled cases: top-1, top-3, abstention precision/recall, per mode."""
    from assistant.evaluate import evaluate, load_cases, triage_predictor

    from assistant.config import Settings

    cases = cases or Settings().labelled(*DEFAULT_CASES)
    report = evaluate(load_cases(cases), triage_predictor())
    if as_json:
        typer.echo(json.dumps(report.model_dump(), ensure_ascii=False, indent=2))
        return
    lines = [
        f"cases: {report.cases} ({report.in_scope} in scope, {report.out_of_scope} out of scope)",
        f"top-1: {report.top1:.3f}   top-3: {report.top3:.3f}",
        f"abstention: precision {report.abstention_precision:.3f}  recall {report.abstention_recall:.3f}  "
        f"accuracy {report.abstention_accuracy:.3f}  ({report.abstentions} abstentions)",
        "",
        f"{'mode':28} {'cases':>5} {'top1':>5} {'top3':>5}",
    ]
    for m in report.per_mode:
        lines.append(f"{m.mode:28} {m.cases:5d} {m.top1:5d} {m.top3:5d}")
    for lang, row in report.by_lang.items():
        lines.append(f"lang {lang}: in scope {row['in_scope']:.0f}, top-1 {row['top1']:.3f}, "
                     f"abstention accuracy {row['abstention_accuracy']:.3f}")
    typer.echo("\n".join(lines))


def register(app: typer.Typer) -> None:
    """Add ``triage`` and ``eval-rules`` to the trainfix CLI."""
    app.command("triage")(triage_command)
    app.command("eval-rules")(eval_rules_command)
