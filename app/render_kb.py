"""Terminal rendering (rich) of knowledge-base records, passages and ingest reports."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text as RichText

from ingest.pipeline import IngestReport
from kb.schema import Citation, CodeSnippet, Passage, Record, Text

_LIKELIHOOD = {"en": {"high": "high", "medium": "medium", "low": "low"}, "zh": {"high": "高", "medium": "中", "low": "低"}}
_LABELS = {
    "en": {"summary": "Summary", "symptoms": "Symptoms", "causes": "Causes", "diagnosis": "Diagnosis",
           "fixes": "Fixes (in priority order)", "citations": "Citations", "cause": "Cause", "likelihood": "Likelihood",
           "check": "How to check", "runbook": "team runbook", "guide": "guide", "truncated": "(the source stops here)"},
    "zh": {"summary": "概述", "symptoms": "症状", "causes": "根因", "diagnosis": "排障步骤", "fixes": "修复方案（按优先级）",
           "citations": "引用", "cause": "原因", "likelihood": "概率", "check": "检测方法", "runbook": "团队手册",
           "guide": "指南", "truncated": "（原文到此中断）"},
}
_SYNTAX = {"python": "python", "shell": "bash", "yaml": "yaml", "text": "text"}


class _Citations:
    """Numbers citations in order of first use so items can refer to them as ``[n]``."""

    def __init__(self) -> None:
        self.items: list[Citation] = []

    def ref(self, citation: Citation) -> str:
        key = (citation.source, citation.start_line, citation.end_line)
        for i, c in enumerate(self.items, start=1):
            if (c.source, c.start_line, c.end_line) == key:
                return f"[{i}]"
        self.items.append(citation)
        return f"[{len(self.items)}]"


def citation_label(citation: Citation, lang: str = "en") -> str:
    """``source §section heading, lines a–b`` plus the kind of source (guide or team runbook)."""
    kind = _LABELS[lang]["runbook" if citation.source_kind == "runbook" else "guide"]
    return f"{citation.label()} ({kind})"


def _code(snippet: CodeSnippet) -> Syntax:
    return Syntax(snippet.code, _SYNTAX[snippet.language], theme="ansi_dark", word_wrap=True,
                  background_color="default")


def _t(text: Text | None, lang: str) -> str:
    return escape(text.get(lang)) if text else ""


def render_record(record: Record, console: Console, lang: str = "en") -> None:
    """Print one record: title, summary, symptoms, causes, diagnosis, fixes with code, numbered citations."""
    labels = _LABELS[lang]
    cites = _Citations()
    other = "zh" if lang == "en" else "en"
    title = f"[bold]{_t(record.title, lang)}[/bold]  [dim]{escape(record.title.get(other))} · {record.id} · {record.category}[/dim]"
    console.print(Panel(_t(record.summary, lang) if record.summary else "", title=title, title_align="left"))
    if record.symptoms:
        console.print(f"[bold]{labels['symptoms']}[/bold]")
        for s in record.symptoms:
            console.print(f"  • {_t(s.text, lang)} [cyan]{cites.ref(s.citation)}[/cyan]")
    if record.causes:
        table = Table(title=None, show_header=True, header_style="bold", expand=True)
        table.add_column("id", style="magenta", no_wrap=True)
        table.add_column(labels["likelihood"], no_wrap=True)
        table.add_column(labels["cause"], ratio=3)
        table.add_column(labels["check"], ratio=2)
        table.add_column("", no_wrap=True, style="cyan")
        for c in record.causes:
            table.add_row(c.id, _LIKELIHOOD[lang].get(c.likelihood or "", "–"), _t(c.text, lang),
                          _t(c.detection, lang), cites.ref(c.citation))
        console.print(f"\n[bold]{labels['causes']}[/bold]")
        console.print(table)
    for heading, items in ((labels["diagnosis"], record.diagnosis), (labels["fixes"], record.fixes)):
        if not items:
            continue
        console.print(f"\n[bold]{heading}[/bold]")
        for i, item in enumerate(items, start=1):
            number = getattr(item, "priority", i)
            text = _t(item.text, lang) if item.text else ""
            # The guide numbers some code titles itself ("1. 检测 NaN"); do not number them twice.
            prefix = "" if text.startswith(f"{number}.") else f"{number}. "
            targets = getattr(item, "addresses", [])
            arrow = f" [magenta]→ {', '.join(targets)}[/magenta]" if targets else ""
            console.print(f"  {prefix}{text} [cyan]{cites.ref(item.citation)}[/cyan]{arrow}")
            if item.code:
                console.print(Panel(_code(item.code), border_style="dim", expand=False, padding=(0, 1)))
    for c in record.citations:
        cites.ref(c)
    console.print(f"\n[bold]{labels['citations']}[/bold]")
    for i, c in enumerate(cites.items, start=1):
        style = "yellow" if c.source_kind == "runbook" else "green"
        console.print(f"  [cyan][{i}][/cyan] [{style}]{escape(citation_label(c, lang))}[/{style}]")


def render_passage(passage: Passage, console: Console, lang: str = "en") -> None:
    """Print one passage with its source text (English where the team translated it) and citation."""
    labels = _LABELS[lang]
    body = passage.body(lang)
    parts: list = [RichText(body)]
    if passage.truncated:
        parts.append(RichText(labels["truncated"], style="italic red"))
    title = f"[bold]{_t(passage.title, lang)}[/bold]  [dim]{passage.id}[/dim]"
    console.print(Panel(Group(*parts), title=title, title_align="left"))
    style = "yellow" if passage.citation.source_kind == "runbook" else "green"
    console.print(f"  [cyan][1][/cyan] [{style}]{escape(citation_label(passage.citation, lang))}[/{style}]")


def render_list(records: list[Record], passages: list[Passage], console: Console) -> None:
    """A table of all records (and passages) with counts."""
    table = Table(show_header=True, header_style="bold", caption="S/C/D/F = symptoms, causes, diagnosis steps, fixes")
    for col in ("id", "category", "title", "S/C/D/F"):
        table.add_column(col, no_wrap=col != "title")
    for r in records:
        counts = f"{len(r.symptoms)}/{len(r.causes)}/{len(r.diagnosis)}/{len(r.fixes)}"
        table.add_row(r.id, r.category, f"{escape(r.title.get('en'))}\n[dim]{escape(r.title.get('zh'))}[/dim]", counts)
    console.print(table)
    if passages:
        console.print("[bold]Passages[/bold]: " + ", ".join(p.id for p in passages))


def render_ingest_report(report: IngestReport, console: Console, index_note: str | None = None) -> None:
    """What an ingest run read, skipped and (would have) changed."""
    table = Table(show_header=True, header_style="bold", title="Sources")
    table.add_column("file", overflow="fold", min_width=18)
    for col in ("kind", "records", "passages", "new", "changed", "same"):
        table.add_column(col, no_wrap=True)
    for s in report.sources:
        counts = s.counts()
        table.add_row(s.file, s.kind, str(len(s.records)), str(len(s.passages)),
                      str(counts["added"]), str(counts["changed"]), str(counts["unchanged"]))
    console.print(table)
    for skip in report.skipped:
        console.print(f"[red]skipped[/red] {escape(skip.reason)}")
    for warning in report.warnings:
        console.print(f"[yellow]warning[/yellow] {escape(warning)}")
    verb = "would be" if report.check else "were"
    for kind in ("record", "passage"):
        counts = report.counts(kind)
        summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        console.print(f"{kind}s: {summary or 'none'}")
    changed = [c for c in report.changes if c.status != "unchanged"]
    for c in changed:
        colour = {"added": "green", "changed": "yellow", "removed": "red"}[c.status]
        console.print(f"  [{colour}]{c.status:8}[/{colour}] {c.path}")
    if report.check:
        console.print("[green]records are up to date[/green]" if report.up_to_date
                      else f"[red]{len(changed)} output file(s) {verb} different; run `trainfix ingest`[/red]")
    else:
        console.print(f"wrote {report.out_dir}" if changed else f"{report.out_dir} already up to date")
    if index_note:
        console.print(index_note)
