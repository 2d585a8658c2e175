"""``trainfix ingest`` and ``trainfix kb list|show``: build and browse the knowledge base."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated

import typer

from assistant.errors import KnowledgeBaseError


def _settings():
    from assistant.config import Settings

    return Settings()


def _build_index(settings, out: Path) -> str:
    """Run the retrieval helper's index build over the records just written, if it is installed."""
    if out.resolve() != settings.records_dir.resolve():
        if out.name != "records":
            return f"index not built: {out} is not a <kb>/records directory (use --no-index to silence this)"
        settings = settings.model_copy(update={"kb_dir": out.parent})
    try:
        from ingest import index as index_module
    except ModuleNotFoundError as err:
        if err.name != "ingest.index":
            raise
        return "index not built: the index builder (ingest/index.py) is not installed"
    result = index_module.build_index(settings)
    embedded, reused = getattr(result, "embedded", None), getattr(result, "reused", None)
    return "index rebuilt" + (f": {embedded} chunk(s) embedded, {reused} reused" if embedded is not None else "")


def ingest_command(
    sources: Annotated[Path | None, typer.Option("--sources", help="source directory (default: kb/sources)")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="records directory (default: kb/records)")] = None,
    check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 if records differ from a fresh ingest")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    no_index: Annotated[bool, typer.Option("--no-index", help="do not rebuild the search index afterwards")] = False,
) -> None:
    """Parse the guide and runbooks in kb/sources into kb/records (deterministic JSON)."""
    from rich.console import Console

    from app.render_kb import render_ingest_report
    from ingest.pipeline import run_ingest

    settings = _settings()
    err_console = Console(stderr=True)
    with err_console.status("ingesting…") as status:
        report = run_ingest(settings, sources_dir=sources, out_dir=out, check=check,
                            progress=lambda msg: status.update(msg))
    index_note = None
    if not check and not no_index:
        with err_console.status("building index…"):
            index_note = _build_index(settings, Path(report.out_dir))
    if not check:
        from assistant.cases import case_memory

        # Trains the case model now (seconds) and snapshots it, so the first answer afterwards does not.
        with err_console.status("case memory…"):
            case_memory(settings.cases_dir)
    if as_json:
        typer.echo(json.dumps({**report.model_dump(mode="json"), "index": index_note}, ensure_ascii=False, indent=2))
    else:
        render_ingest_report(report, Console(), index_note)
    if check and not report.up_to_date:
        raise typer.Exit(1)


kb_app = typer.Typer(help="Browse the ingested knowledge base (records and passages).", no_args_is_help=True)


def _load(records_dir: Path | None):
    from kb.store import load_passages, load_records

    directory = records_dir or _settings().records_dir
    return load_records(directory), load_passages(directory)


@kb_app.command("list")
def kb_list(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    records_dir: Annotated[Path | None, typer.Option("--records", help="records directory (default: kb/records)")] = None,
) -> None:
    """All failure-mode records with category, titles and counts."""
    from kb.taxonomy import MODE_IDS

    records, passages = _load(records_dir)
    records = sorted(records, key=lambda r: MODE_IDS.index(r.id) if r.id in MODE_IDS else len(MODE_IDS))
    if as_json:
        rows = [{
            "id": r.id, "category": r.category, "title": r.title.model_dump(),
            "counts": {"symptoms": len(r.symptoms), "causes": len(r.causes), "diagnosis": len(r.diagnosis),
                       "fixes": len(r.fixes), "citations": len(r.citations)},
        } for r in records]
        typer.echo(json.dumps({"records": rows, "passages": [p.id for p in passages]}, ensure_ascii=False, indent=2))
        return
    from rich.console import Console

    from app.render_kb import render_list

    render_list(records, passages, Console())


@kb_app.command("show")
def kb_show(
    item_id: Annotated[str, typer.Argument(metavar="ID", help="failure-mode id (e.g. nan-loss) or passage id")],
    as_json: Annotated[bool, typer.Option("--json", help="print the record as JSON")] = False,
    lang: Annotated[str, typer.Option("--lang", help="zh or en")] = "en",
    records_dir: Annotated[Path | None, typer.Option("--records", help="records directory (default: kb/records)")] = None,
) -> None:
    """One record or passage: symptoms, causes, diagnosis, fixes with code, and citations."""
    if lang not in ("zh", "en"):
        raise typer.BadParameter("use zh or en", param_hint="--lang")
    records, passages = _load(records_dir)
    by_id = {r.id: r for r in records} | {p.id: p for p in passages}
    item = by_id.get(item_id.strip().lower())
    if item is None:
        close = difflib.get_close_matches(item_id.strip().lower(), list(by_id), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KnowledgeBaseError(f"unknown knowledge-base id '{item_id}'{hint} (`trainfix kb list` shows all ids)")
    if as_json:
        typer.echo(json.dumps(item.model_dump(mode="json", exclude_none=True), ensure_ascii=False, indent=2))
        return
    from rich.console import Console

    from app.render_kb import render_passage, render_record
    from kb.schema import Record

    console = Console()
    if isinstance(item, Record):
        render_record(item, console, lang)
    else:
        render_passage(item, console, lang)


def register(app: typer.Typer) -> None:
    """Add ``ingest`` and ``kb`` to the trainfix CLI."""
    app.command("ingest")(ingest_command)
    app.add_typer(kb_app, name="kb")
