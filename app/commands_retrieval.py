"""``trainfix index build|status``, ``trainfix search`` and ``trainfix eval-retrieval``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_CASES = ("retrieval_queries.jsonl",)  # in Settings.labelled_dir (the source checkout's labelled sets)


def _settings():
    from assistant.config import Settings

    return Settings()


def _progress(status):
    return lambda msg: status.update(msg)


def _err_console():
    from rich.console import Console

    return Console(stderr=True)


index_app = typer.Typer(help="Build and check the search index (Chroma vectors + BM25).", no_args_is_help=True)


@index_app.command("build")
def index_build(
    as_json: Annotated[bool, typer.Option("--json", help="print the build report as JSON")] = False,
) -> None:
    """Bring the index up to date with kb/records (only changed chunks are embedded)."""
    from ingest.index import build_index

    console = _err_console()
    with console.status("checking the index…") as status:
        report = build_index(_settings(), progress=lambda msg: console.print(f"[dim]{msg}[/dim]") if "damaged" in msg
                             else status.update(msg))
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    if report.rebuilt:
        verb = f"rebuilt ({report.reason})"
    else:
        verb = "updated" if report.embedded or report.deleted else "up to date"
    typer.echo(f"index {verb} in {report.seconds:.1f} s: {report.chunks} chunks, "
               f"{report.embedded} embedded, {report.reused} reused, {report.deleted} deleted")
    typer.echo(f"{report.mode} index at {report.location}, collection {report.collection}")
    typer.echo(f"model {report.model}" + (f" (queries: ONNX export {report.onnx})" if report.onnx else ""))


@index_app.command("status")
def index_status_command(
    as_json: Annotated[bool, typer.Option("--json", help="print the status as JSON")] = False,
) -> None:
    """Say whether the index exists and matches kb/records, without changing it. Exit 1 if it does not."""
    from ingest.index import index_status

    status = index_status(_settings())
    if as_json:
        typer.echo(json.dumps(status.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        typer.echo(f"{status.state}: {status.reason}")
        typer.echo(f"{status.mode} index at {status.location}, collection {status.collection}")
        typer.echo(f"{status.chunks_indexed} chunks indexed, {status.chunks_in_kb} in kb/records, "
                   f"{status.stale_chunks} stale; model {status.model}")
    if status.state != "ok":
        raise typer.Exit(1)


def search_command(
    query: Annotated[str, typer.Argument(help="question, error message or log excerpt (Chinese or English)")],
    k: Annotated[int, typer.Option("-k", "--k", min=1, max=50, help="number of results")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print the hits as JSON")] = False,
) -> None:
    """Search the knowledge base (hybrid vector + BM25) and show ranked hits with citations."""
    from assistant.retrieval import Retriever

    console = _err_console()
    with console.status("searching…") as status:
        hits = Retriever(_settings(), progress=_progress(status)).search(query, k=k)
    if as_json:
        typer.echo(json.dumps([h.model_dump(mode="json") for h in hits], ensure_ascii=False, indent=2))
        return
    for n, h in enumerate(hits, start=1):
        ranks = f"vector #{h.vector_rank or '–'}, bm25 #{h.bm25_rank or '–'}"
        mode = f", {h.failure_mode}" if h.failure_mode and h.failure_mode != h.id else ""
        typer.echo(f"{n}. {h.id} ({h.kind}{mode})  score {h.score:.4f}  ({ranks})")
        typer.echo(f"   {h.field} · {h.citation.label()}")
        body = " ".join(h.text.split("\n", 1)[-1].split())
        typer.echo(f"   {body[:200]}{'…' if len(body) > 200 else ''}")


def eval_command(
    cases: Annotated[Path | None, typer.Option("--cases", help="JSON lines: {text, labels, lang} (default: retrieval_queries.jsonl of the labelled sets)")] = None,
    k: Annotated[int, typer.Option("-k", "--k", min=3, help="hits per query (MRR counts ranks up to k)")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Measure retrieval on a labelled query set: recall@1, recall@3, MRR, and the misses."""
    from assistant.retrieval import Retriever
    from assistant.retrieval.evaluate import evaluate, load_cases

    from assistant.config import Settings

    cases = cases or Settings().labelled(*DEFAULT_CASES)
    loaded = load_cases(cases)
    console = _err_console()
    with console.status("evaluating…") as status:
        retriever = Retriever(_settings(), progress=_progress(status))
        report = evaluate(retriever.search, loaded, k=k)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    typer.echo(f"{report.queries} queries from {cases}")
    typer.echo(f"recall@1 {report.recall_at_1:.3f}   recall@3 {report.recall_at_3:.3f}   MRR {report.mrr:.3f}")
    for lang, m in report.by_lang.items():
        typer.echo(f"  {lang}: {int(m['queries'])} queries, recall@1 {m['recall_at_1']:.3f}, "
                   f"recall@3 {m['recall_at_3']:.3f}, MRR {m['mrr']:.3f}")
    if report.misses:
        typer.echo("not ranked first:")
        for miss in report.misses:
            where = f"rank {miss.rank}" if miss.rank else f"missed (top {k})"
            typer.echo(f"  [{where}] {miss.text[:80]!r} wants {', '.join(miss.labels)}; got {', '.join(miss.ranked[:3])}")


def register(app: typer.Typer) -> None:
    """Add the retrieval commands to the ``trainfix`` app."""
    app.add_typer(index_app, name="index")
    app.command("search")(search_command)
    app.command("eval-retrieval")(eval_command)
