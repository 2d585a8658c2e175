"""Parser for the customer's plain-text troubleshooting guide (``kb/sources/*.txt``), taken as it is.

The guide has no markup: numbered section headings (``2. NaN Loss``), short Chinese sub-headings
(``症状``, ``修复方案（按优先级）``, ``训练启动前：``), a box-drawing tree, tab-separated tables whose first
row is the header, and Python / shell-comment code blocks without fences, separated from prose only by
blank lines. Parsing is line based and keeps 1-based line numbers; code blocks are kept byte-for-byte.
The guide ships with the package (trusted data), so Python ``re`` is fine here.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from typing import Literal

# Sub-headings the guide uses; a short line ending in a colon on its own paragraph is one too.
SUBHEADINGS = frozenset(
    {"症状", "根因分析", "排障步骤", "修复方案", "修复方案（按优先级）", "诊断", "优化手段", "最佳实践", "常见修复"}
)
_SECTION = re.compile(r"^(\d{1,2})\.\s+(\S.*)$")
_TREE_CHARS = ("├", "└", "│")
# Line starts that only code has (prose lines in the guide start with words, often Chinese).
_CODE_START = re.compile(
    r"^(?:#|\s+\S|[)\]}]|@|def |class |import |from \S+ import |for |if |elif |else:|while |with |try:|except|return\b|raise |print\()"
)
_ASSIGN_OR_CALL = re.compile(r"^[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:=|\+=|-=|\()")
_CONTINUES = ("：", ":", "，", ",", "、")

BlockKind = Literal["prose", "table", "code", "tree"]


@dataclass(frozen=True)
class Block:
    """A unit of guide content: one prose line, a table, a code block or the tree, with its line range."""

    kind: BlockKind
    start: int
    end: int
    lines: tuple[str, ...]
    language: Literal["python", "shell"] | None = None
    header: tuple[str, ...] = ()
    rows: tuple[tuple[int, tuple[str, ...]], ...] = ()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def title(self) -> str | None:
        """For a code block: its leading comment without ``#`` (the guide titles blocks that way)."""
        if self.kind != "code" or not self.lines[0].startswith("#"):
            return None
        return self.lines[0].lstrip("#").strip() or None


@dataclass
class Subsection:
    """Lines under one sub-heading (``heading`` None for lines before the first sub-heading)."""

    heading: str | None
    line: int | None
    start: int
    end: int
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Section:
    """A numbered section ``N. heading`` running to the line before the next one."""

    number: str
    heading: str
    line: int
    end: int
    subsections: list[Subsection] = field(default_factory=list)
    truncated: bool = False

    def subsection(self, heading: str | None) -> Subsection | None:
        return next((s for s in self.subsections if s.heading == heading), None)


@dataclass
class Guide:
    """The parsed guide: front matter (lines before section 1) and its numbered sections."""

    name: str
    lines: list[str]
    front_matter: Subsection
    sections: list[Section]

    def section(self, number: str) -> Section:
        for sec in self.sections:
            if sec.number == number:
                return sec
        raise KeyError(number)

    def line(self, no: int) -> str:
        return self.lines[no - 1]

    def span_text(self, start: int, end: int) -> str:
        return "\n".join(self.lines[start - 1 : end])

    def blocks(self) -> list[Block]:
        out = list(self.front_matter.blocks)
        for sec in self.sections:
            for sub in sec.subsections:
                out.extend(sub.blocks)
        return out


def _is_blank(line: str) -> bool:
    return not line.strip()


def _code_candidate(line: str) -> bool:
    return bool(_CODE_START.match(line) or _ASSIGN_OR_CALL.match(line))


def _python_parses(lines: list[str]) -> bool:
    try:
        ast.parse(textwrap.dedent("\n".join(lines)))
    except SyntaxError:
        return False
    return True


def _paragraphs(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """Maximal runs of non-blank lines in ``start..end`` (1-based, inclusive)."""
    out: list[tuple[int, int]] = []
    run_start: int | None = None
    for no in range(start, end + 1):
        if _is_blank(lines[no - 1]):
            if run_start is not None:
                out.append((run_start, no - 1))
                run_start = None
        elif run_start is None:
            run_start = no
    if run_start is not None:
        out.append((run_start, end))
    return out


def _paragraph_blocks(lines: list[str], start: int, end: int) -> list[Block]:
    """Split one paragraph into tree / table / code / prose blocks."""
    text = lines[start - 1 : end]
    if any(ch in line for line in text for ch in _TREE_CHARS):
        return [Block("tree", start, end, tuple(text))]
    blocks: list[Block] = []
    no = start
    while no <= end:
        line = lines[no - 1]
        if "\t" in line:
            stop = no
            while stop + 1 <= end and "\t" in lines[stop]:
                stop += 1
            cells = [tuple(c.strip() for c in lines[i - 1].split("\t")) for i in range(no, stop + 1)]
            blocks.append(
                Block("table", no, stop, tuple(lines[no - 1 : stop]), header=cells[0],
                      rows=tuple((no + 1 + k, row) for k, row in enumerate(cells[1:])))
            )
            no = stop + 1
            continue
        if _code_candidate(line):
            stop = no
            while stop + 1 <= end and _code_candidate(lines[stop]) and "\t" not in lines[stop]:
                stop += 1
            run = lines[no - 1 : stop]
            # Indented or closing lines alone are not code; the run must parse as Python to count.
            if not line[:1].isspace() and _python_parses(run):
                only_comments = all(r.lstrip().startswith("#") for r in run)
                blocks.append(Block("code", no, stop, tuple(run), language="shell" if only_comments else "python"))
                no = stop + 1
                continue
        blocks.append(Block("prose", no, no, (line,)))
        no += 1
    return blocks


def _is_subheading(lines: list[str], no: int) -> bool:
    line = lines[no - 1].strip()
    before_blank = no == 1 or _is_blank(lines[no - 2])
    after_blank = no == len(lines) or _is_blank(lines[no])
    if not (before_blank and after_blank) or line.startswith("#") or "\t" in line:
        return False
    return line in SUBHEADINGS or (line.endswith(("：", ":")) and len(line) <= 30)


def _section_starts(lines: list[str]) -> list[tuple[int, str, str]]:
    """Numbered headings, accepted only in sequence (1, 2, 3 …) and standing alone between blank lines."""
    out: list[tuple[int, str, str]] = []
    expected = 1
    for no, line in enumerate(lines, start=1):
        m = _SECTION.match(line)
        if not m or int(m.group(1)) != expected:
            continue
        if (no > 1 and not _is_blank(lines[no - 2])) or (no < len(lines) and not _is_blank(lines[no])):
            continue
        out.append((no, m.group(1), m.group(2).strip()))
        expected += 1
    return out


def _subsections(lines: list[str], start: int, end: int) -> list[Subsection]:
    heads = [no for no in range(start, end + 1) if _is_subheading(lines, no)]
    bounds = [(None, None, start)] + [(lines[h - 1].strip(), h, h + 1) for h in heads]
    out: list[Subsection] = []
    for i, (heading, line, body_start) in enumerate(bounds):
        body_end = (heads[i] - 1) if i < len(heads) else end
        sub = Subsection(heading, line, line or start, body_end)
        for p_start, p_end in _paragraphs(lines, body_start, body_end):
            sub.blocks.extend(_paragraph_blocks(lines, p_start, p_end))
        if heading is not None or sub.blocks:
            out.append(sub)
    return out


def parse_guide(name: str, text: str) -> Guide:
    """Parse the guide's text. ``name`` is its file name under ``kb/sources/``."""
    lines = text.split("\n")
    if lines and lines[-1] == "" and text.endswith("\n"):
        lines.pop()
    starts = _section_starts(lines)
    first = starts[0][0] if starts else len(lines) + 1
    front = Subsection(None, None, 1, first - 1)
    for p_start, p_end in _paragraphs(lines, 1, first - 1):
        front.blocks.extend(_paragraph_blocks(lines, p_start, p_end))
    sections: list[Section] = []
    for i, (no, number, heading) in enumerate(starts):
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else len(lines)
        while end > no and _is_blank(lines[end - 1]):
            end -= 1
        sections.append(Section(number, heading, no, end, _subsections(lines, no + 1, end)))
    if sections:
        last = sections[-1]
        tail = last.subsections[-1] if last.subsections else None
        # The source stops mid-list: a trailing sub-heading with nothing under it, or a dangling clause.
        last.truncated = bool(
            (tail is not None and tail.heading is not None and not tail.blocks)
            or lines[last.end - 1].rstrip().endswith(_CONTINUES)
        )
    return Guide(name, lines, front, sections)
