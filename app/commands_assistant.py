"""``trainfix diagnose``, ``ask``, ``chat`` and ``eval``: thin front-ends over :class:`assistant.api.Assistant`."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from app.main import print_diagnosis, run_diagnose
from assistant.errors import TrainfixError

# The labelled sets, relative to Settings.labelled_dir (the source checkout's labelled data).
DEV_CASES = ("realworld", "dev.jsonl")
DEFAULT_CASES = [("realworld", "test.jsonl"), ("triage_cases.jsonl",), ("retrieval_queries.jsonl",)]
ANSWER_CHECKS = ("answer_checks.yaml",)


def _labelled(*parts: str) -> Path:
    from assistant.config import Settings

    return Settings().labelled(*parts)
Retrieval = Literal["auto", "always", "never"]


def _assistant(retrieval: str):
    from assistant.api import Assistant

    return Assistant(retrieval=retrieval)


def _print(diagnosis, as_json: bool, plain: bool) -> None:
    print_diagnosis(diagnosis, as_json, plain)


def diagnose_command(
    file: Annotated[str, typer.Argument(help="log or paste to diagnose; '-' or nothing reads stdin")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="print the Diagnosis as JSON")] = False,
    answer: Annotated[list[str], typer.Option("--answer", "-a", help="answer a follow-up: id=value (repeatable)")] = [],  # noqa: B006
    lang: Annotated[str | None, typer.Option("--lang", help="answer language: zh or en (default: the input's)")] = None,
    retrieval: Annotated[Retrieval, typer.Option(help="auto: only when rules are unsure; never: rules only")] = "auto",
    plain: Annotated[bool, typer.Option("--plain", help="print Markdown source instead of formatting it")] = False,
) -> None:
    """Diagnose a traceback, training log or error line: failure mode, evidence, causes, fixes, sources."""
    run_diagnose(file, as_json, answer, lang, retrieval, plain)  # also what `trainfix diagnose` runs without Typer


def ask_command(
    question: Annotated[str, typer.Argument(help="a question, in Chinese or English")],
    as_json: Annotated[bool, typer.Option("--json", help="print the Diagnosis as JSON")] = False,
    plain: Annotated[bool, typer.Option("--plain", help="print Markdown source instead of formatting it")] = False,
) -> None:
    """Ask the knowledge base a question ("显存不够怎么办", "how many checkpoints should I keep?")."""
    _print(_assistant("auto").ask(question), as_json, plain)


PASTE_GAP = 0.15  # seconds: lines arriving closer together than this belong to one paste
SEPARATOR = "---"  # separates messages when stdin is not a terminal


def _read_message(prompt: str) -> str | None:
    """One message: on a terminal, Enter sends it (a multi-line paste arrives whole and is kept together);
    from a pipe, messages are separated by a line ``---``. ``None`` at end of input."""
    if not sys.stdin.isatty():
        lines: list[str] = []
        for line in sys.stdin:
            if line.rstrip("\r\n") == SEPARATOR:
                return "\n".join(lines)
            lines.append(line.rstrip("\n"))
        return "\n".join(lines) if lines else None
    import os
    import select

    typer.echo(prompt, nl=False)
    fd = sys.stdin.fileno()
    data = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data.decode("utf-8", errors="replace") or None
        data += chunk
        if data.endswith(b"\n") and not select.select([fd], [], [], PASTE_GAP)[0]:
            return data.decode("utf-8", errors="replace").rstrip("\n")


def chat_command(
    plain: Annotated[bool, typer.Option("--plain", help="print Markdown source instead of formatting it")] = False,
) -> None:
    """Interactive chat in the terminal: paste errors or ask questions; answer follow-ups to narrow down."""
    from assistant.api import Exchange

    assistant = _assistant("auto")
    if sys.stdin.isatty():
        typer.echo("trainfix chat — paste a traceback or log, or ask a question (Chinese or English). "
                   "Answer follow-up questions to narrow the diagnosis. Ctrl-D quits.")
    history: list = []
    while True:
        message = _read_message("\n> ")
        if message is None:
            typer.echo("")
            return
        if not message.strip():
            continue
        diagnosis = assistant.ask(message, history)
        history.append(Exchange(message=message, diagnosis=diagnosis))
        _print(diagnosis, False, plain)


def eval_command(
    cases: Annotated[list[Path], typer.Option("--cases", help="JSON-lines case file(s) (text, labels)")] = [],  # noqa: B006
    system: Annotated[str, typer.Option(
        help="full | no-retrieval (rules + case memory) | rules | vector (plain vector retrieval baseline)")] = "full",
    as_json: Annotated[bool, typer.Option("--json", help="print the reports as JSON")] = False,
    checks: Annotated[Path | None, typer.Option(
        "--checks", help="answer-check file (default: the labelled sets' answer_checks.yaml when no --cases is given)")] = None,
) -> None:
    """Score the assistant on labelled cases (top-1, top-3, abstention, per mode) and on answer checks
    (does the answer say what an expert's would: first failing rank, numbers, trends, no band-aid first)."""
    from assistant.evaluate import evaluate, load_cases
    from assistant.scoring import predictor

    predict = predictor(system)
    reports = {}
    for path in cases or ([] if checks else [_labelled(*p) for p in DEFAULT_CASES]):
        reports[str(path)] = evaluate(load_cases(path), predict, before_each=getattr(predict, "before_each", None))
    check_path = checks or (_labelled(*ANSWER_CHECKS) if not cases and _labelled(*ANSWER_CHECKS).is_file() else None)
    results = _answer_checks(check_path, predict) if check_path and hasattr(predict, "assistant") else []
    if as_json:
        out = {k: v.model_dump() for k, v in reports.items()}
        if results:
            out["answer_checks"] = {"path": str(check_path), "passed": sum(r.passed for r in results),
                                    "checks": len(results), "results": [r.model_dump() for r in results]}
        typer.echo(json.dumps(out, ensure_ascii=False, indent=2))
        return
    for path, report in reports.items():
        typer.echo(f"== {Path(path).name} · system: {system}")
        typer.echo(
            f"cases {report.cases} ({report.in_scope} in scope, {report.out_of_scope} out of scope)\n"
            f"top-1 {report.top1:.3f}   top-3 {report.top3:.3f}\n"
            f"abstention: precision {report.abstention_precision:.3f}  recall {report.abstention_recall:.3f}  "
            f"accuracy {report.abstention_accuracy:.3f}"
        )
        typer.echo(f"in-scope declined {report.in_scope_declined:.3f}   "
                   f"out-of-scope declined {report.out_of_scope_declined:.3f}")
        typer.echo(f"{'label':28} {'cases':>5} {'top1':>5} {'top3':>5}")
        for m in report.per_mode:
            typer.echo(f"{m.mode:28} {m.cases:5d} {m.top1:5d} {m.top3:5d}")
        typer.echo(f"{'kind':28} {'cases':>5} {'top1':>6} {'top3':>6} {'declined':>8}")
        for k, v in report.by_kind.items():
            typer.echo(f"{k:28} {int(v['cases']):5d} {v['top1']:6.3f} {v['top3']:6.3f} {v['declined']:8.3f}")
        typer.echo(f"{'language':28} {'in scope':>8} {'top1':>6}")
        for k, v in report.by_lang.items():
            typer.echo(f"{k:28} {int(v['in_scope']):8d} {v['top1']:6.3f}")
        typer.echo("")
    if results:
        passed = sum(r.passed for r in results)
        typer.echo(f"== {check_path.name} · system: {system}")
        typer.echo(f"answer checks: {passed}/{len(results)} pass ({passed / len(results):.3f})")
        for topic in sorted({r.topic for r in results}):
            rows = [r for r in results if r.topic == topic]
            typer.echo(f"  {topic or '-':26} {sum(r.passed for r in rows):3d}/{len(rows)}")
        for r in results:
            if not r.passed:
                typer.echo(f"  FAIL {r.id}: {'; '.join(r.failures)}")


def _answer_checks(path: Path, predict):
    from app.render import markdown
    from assistant.answer_checks import load_checks, run_checks

    assistant = predict.assistant
    return run_checks(load_checks(path), lambda c: assistant.diagnose(c.input, answers=c.answers or None), markdown)


def calibrate_command(
    cases: Annotated[list[Path], typer.Option("--cases", help="labelled dev cases (never the test split)")] = [],  # noqa: B006
    system: Annotated[str, typer.Option(help="full | no-retrieval")] = "full",
    write: Annotated[bool, typer.Option("--write/--dry-run", help="write kb/calibration.yaml")] = True,
) -> None:
    """Fit the confidence calibration on labelled dev cases and report the calibration curve and ECE."""
    import yaml

    from assistant.config import Settings
    from assistant.evaluate import load_cases
    from assistant.ranking import expected_calibration_error, fit_calibration, reliability
    from assistant.scoring import predictor

    settings = Settings()
    paths = cases or [settings.labelled(*DEV_CASES)]
    if any("test" in Path(p).name for p in paths):
        raise TrainfixError("calibration is fitted on dev cases only; the test split is never tuned on")
    predict = predictor(system, settings)
    assistant = predict.assistant
    assistant.calibration = None  # fit on the raw scores
    points: list[tuple[float, bool]] = []
    for path in paths:
        for case in load_cases(path):
            predict.before_each(case)
            d = assistant.diagnose(case.text)
            if d.candidates:
                points.append((d.candidates[0].score, d.candidates[0].failure_mode in case.labels))
    a, b = fit_calibration(points)
    fitted = [(1 / (1 + math.exp(-(a * x + b))), y) for x, y in points]
    before, after = expected_calibration_error(points), expected_calibration_error(fitted)
    typer.echo(f"{len(points)} answered cases; fit P(right) = 1/(1+exp(-({a:.3f}*score + {b:.3f})))")
    typer.echo(f"ECE before {before:.3f}  after {after:.3f}")
    typer.echo(f"{'bin':10} {'cases':>5} {'confidence':>10} {'accuracy':>8}")
    for row in reliability(fitted):
        typer.echo(f"{row['bin']:10} {row['cases']:5d} {row['confidence']:10.3f} {row['accuracy']:8.3f}")
    if write:
        out = settings.kb_dir / "calibration.yaml"
        data = {"a": a, "b": b, "fitted_on": ", ".join(Path(p).name for p in paths) + f" ({system})",
                "cases": len(points), "ece_before": before, "ece_after": after}
        out.write_text("# Written by `trainfix calibrate` (dev split, leave-own-thread-out). Do not edit by hand.\n"
                       + yaml.safe_dump(data, sort_keys=True), encoding="utf-8")
        typer.echo(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add ``diagnose``, ``ask``, ``chat`` and ``eval`` to the trainfix CLI."""
    app.command("diagnose")(diagnose_command)
    app.command("ask")(ask_command)
    app.command("chat")(chat_command)
    app.command("eval")(eval_command)
    app.command("calibrate")(calibrate_command)
