"""Safe chat rendering for the web: a Diagnosis as Markdown with clickable citations, and the cited source.

Built on :func:`app.render.render_numbered`; everything outside code is HTML-escaped so input, titles and
knowledge text always show as text (a pasted ``<script>`` is shown, never run). Citation markers
``[n]`` become links ``#tfcite-<answer>-<n>`` that the page's script turns into "open the source".
"""

from __future__ import annotations

import html
from pathlib import Path

import re2

from app.render import render_numbered
from assistant.diagnosis import Diagnosis
from kb.schema import Citation

ANCHOR = "tfcite-"
_MARKER = re2.compile(r"\[(\d{1,3})\]")
_TICKS = re2.compile(r"`+")
_ESCAPE = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
CONTEXT_LINES = 8
MAX_VIEW_LINES = 160


def fence(text: str, lang: str = "text") -> str:
    """``text`` verbatim in a fenced code block (a fence longer than any backtick run inside it)."""
    longest = max((len(m) for m in _TICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def user_markdown(text: str, *, limit: int = 4000) -> str:
    """The user's paste as shown in the chat: verbatim as code (never Markdown or HTML), long pastes cut."""
    shown = text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"
    return fence(shown)


def _escape(segment: str) -> str:
    return "".join(_ESCAPE.get(ch, ch) for ch in segment)


def _code_spans(line: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each inline code span in one Markdown line, as CommonMark reads them: a run of n
    backticks opens, the next run of exactly n closes. Linear time (the text holds untrusted input)."""
    runs = [(m.start(), m.end() - m.start()) for m in _TICKS.finditer(line)]
    following: list[int | None] = [None] * len(runs)  # index of the next run of the same length
    seen: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        following[i] = seen.get(runs[i][1])
        seen[runs[i][1]] = i
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        j = following[i]
        if j is None:
            i += 1  # no closing run: these backticks are literal
            continue
        spans.append((runs[i][0], runs[j][0] + runs[j][1]))
        i = j + 1
    return spans


def _outside_code(line: str, fn) -> str:
    """Apply ``fn`` to the parts of one Markdown line that are not inline code spans."""
    out: list[str] = []
    pos = 0
    for start, end in _code_spans(line):
        out.append(fn(line[pos:start]))
        out.append(line[start:end])
        pos = end
    out.append(fn(line[pos:]))
    return "".join(out)


def answer_markdown(d: Diagnosis, key: str) -> tuple[str, dict[int, Citation]]:
    """``(markdown, citations by number)``: the answer with HTML escaped and markers linked to ``#tfcite-<key>-<n>``."""
    rendered, order = render_numbered(d)  # html=False: no raw HTML anywhere in the answer
    cites = {n: d.citations[i - 1] for n, i in enumerate(order, start=1)}

    def link(m) -> str:
        n = int(m.group(1))
        return f"[\\[{n}\\]](#{ANCHOR}{key}-{n})" if n in cites else m.group(0)

    def prose(segment: str) -> str:
        return _MARKER.sub(link, _escape(segment))

    out: list[str] = []
    fenced: str | None = None
    for line in rendered.splitlines():
        stripped = line.lstrip()
        if fenced is not None:  # inside a code block: verbatim
            out.append(line)
            if stripped.startswith(fenced) and stripped.strip("`") == "":
                fenced = None
            continue
        if stripped.startswith("```"):
            fenced = stripped[: len(stripped) - len(stripped.lstrip("`"))]
            out.append(line)
            continue
        out.append(_outside_code(line, prose))
    return "\n".join(out), cites


def _section_start(lines: list[str], c: Citation) -> int:
    """0-based index of the cited section's heading line above the cited lines (or the first cited line)."""
    heading = c.heading.strip()
    first = c.start_line - 1
    for i in range(min(first, len(lines) - 1), max(-1, first - 400), -1):
        if heading and heading in lines[i]:
            return i
    return first


def source_html(c: Citation, sources_dir: Path, title: str | None = None) -> str:
    """The cited section of the source as escaped HTML, cited lines highlighted (``<mark>``); ``title``
    names it (default: the citation's file, section and lines)."""
    path = Path(sources_dir) / c.source
    title = html.escape(title or c.label())
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return f'<div class="tf-source"><p><b>{title}</b></p><p>source file not found: {html.escape(c.source)}</p></div>'
    head = _section_start(lines, c)
    start = max(head, c.start_line - 1 - CONTEXT_LINES)
    if start - head <= 3:  # a gap of a line or two is not worth a "⋮"
        start = head
    end = min(len(lines), c.end_line + CONTEXT_LINES, start + MAX_VIEW_LINES)
    rows: list[str] = []
    if head < start:  # keep the section heading in view above the excerpt
        rows.append(_row(head + 1, lines[head], False))
        rows.append('<span class="tf-row tf-gap">⋮</span>')
    for i in range(start, end):
        rows.append(_row(i + 1, lines[i], c.start_line <= i + 1 <= c.end_line))
    kind = "customer guide" if c.source_kind == "guide" else "team runbook"
    return (f'<div class="tf-source" data-source="{html.escape(c.source)}" data-lines="{c.start_line}-{c.end_line}">'
            f'<div class="tf-source-head"><b>{title}</b> <span class="tf-kind">({kind})</span></div>'
            f'<pre class="tf-source-body">{"".join(rows)}</pre></div>')


def _row(n: int, text: str, highlighted: bool) -> str:
    # One block element per line, no newline between them: a <pre> would otherwise show every line twice as tall.
    body = f'<span class="tf-ln">{n:>5}</span> {html.escape(text) or " "}'
    return f'<mark class="tf-row tf-hl">{body}</mark>' if highlighted else f'<span class="tf-row">{body}</span>'
