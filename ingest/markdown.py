"""Parser for Markdown runbooks dropped into ``kb/sources/*.md`` (the team's or a user's).

Convention (documented for runbook authors in ``kb/sources/team-runbook.md``):

* A heading ending in ``{#<failure-mode-id>}`` (e.g. ``## Host out of memory {#cpu-oom}``) declares a
  failure-mode section. It runs until the next heading of the same or a higher level.
* Inside it, sub-headings name the parts (case-insensitive, a trailing colon is ignored):
  ``Symptoms``/``症状``, ``Causes``/``Root causes``/``根因``/``根因分析``/``原因``,
  ``Diagnosis``/``Troubleshooting``/``排障``/``排障步骤``/``诊断``, ``Fixes``/``Fix``/``Remediation``/``修复``/``修复方案``.
  Text before the first part is the mode's summary. Any other sub-heading becomes a passage tied to the mode.
* Each list item (``-``, ``*``, ``+``, ``1.``) or plain paragraph in a part is one symptom / cause / step / fix.
  A fenced code block (```` ```python ````, ```` ```bash ````, …) belongs to the item just before it.
* A cause item starts with its id in backticks and may give a likelihood:
  ``- `memory-fragmentation` (medium): text``. A continuation line ``Check: …`` (or ``检测：…``) says how to
  detect it. A fix item may name the causes it acts on in a line ``Addresses: `cause-id`, `cause-id` ``
  (or ``针对：…``).
* A ``Dead ends`` part (``误区``) lists advice that only hides the problem: each item says what not to do
  first, a one-line ``Why: …`` says why, and ``Matches: `regex` `` names the fixes (from any source) that are
  this dead end. trainfix never ranks such a fix first and shows it as "don't", with the why.
* Sections without a mode become passages. Everything from a runbook is cited with ``source_kind="runbook"``.
* The team may translate a runbook into the language it lacks in ``kb/translations/<stem>.zh.yaml`` (or
  ``.en.yaml``), keyed by each unit's exact text (see :mod:`ingest.translations`); the runbook stays the quote.

Runbooks are repository data, but may come from anyone, so patterns use RE2 (linear time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import re2

from assistant.errors import InputError
from kb.taxonomy import MODE_IDS

PartKind = Literal["symptoms", "causes", "diagnosis", "fixes", "dead-ends"]

_HEADING = re2.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*(?:\{#([A-Za-z0-9_-]+)\})?[ \t]*#*[ \t]*$")
_LIST_ITEM = re2.compile(r"^ {0,3}(?:[-*+]|[0-9]{1,3}[.)])[ \t]+(.*)$")
_CAUSE = re2.compile(
    r"^`([a-z0-9][a-z0-9-]*)`[ \t]*(?:\((high|medium|low|高|中|低)\))?[ \t]*(?:[:：—–-][ \t]*)?(.*)$"
)
_PARTS: dict[str, PartKind] = {
    "symptoms": "symptoms", "symptom": "symptoms", "症状": "symptoms",
    "causes": "causes", "cause": "causes", "root causes": "causes", "根因": "causes", "根因分析": "causes",
    "原因": "causes",
    "diagnosis": "diagnosis", "diagnostics": "diagnosis", "troubleshooting": "diagnosis", "排障": "diagnosis",
    "排障步骤": "diagnosis", "诊断": "diagnosis",
    "fixes": "fixes", "fix": "fixes", "remediation": "fixes", "修复": "fixes", "修复方案": "fixes",
    "dead ends": "dead-ends", "dead end": "dead-ends", "don't": "dead-ends", "误区": "dead-ends",
    "不要这样做": "dead-ends",
}
_DETECTION_PREFIXES = ("Check:", "Detection:", "检测：", "检测:")
_ADDRESSES_PREFIXES = ("Addresses:", "针对：", "针对:")
_WHY_PREFIXES = ("Why:", "为什么：", "为什么:")
_MATCHES_PREFIXES = ("Matches:", "匹配：", "匹配:")
_FIELD_PREFIXES = _DETECTION_PREFIXES + _ADDRESSES_PREFIXES + _WHY_PREFIXES + _MATCHES_PREFIXES
_CAUSE_REF = re2.compile(r"`([a-z0-9][a-z0-9-]*)`")
_PATTERN_REF = re2.compile(r"`([^`]+)`")
_LIKELIHOOD = {"high": "high", "medium": "medium", "low": "low", "高": "high", "中": "medium", "低": "low"}
_LANGUAGES = {
    "python": "python", "py": "python", "python3": "python", "pycon": "python",
    "bash": "shell", "sh": "shell", "shell": "shell", "console": "shell", "zsh": "shell",
    "yaml": "yaml", "yml": "yaml",
}


@dataclass(frozen=True)
class MdCode:
    """A fenced code block: ``code`` is the content (fence indentation removed); ``raw`` the verbatim lines."""

    start: int
    end: int
    language: Literal["python", "shell", "yaml", "text"]
    code: str
    raw: str


@dataclass
class MdItem:
    """One list item or paragraph with its code blocks. ``quote`` is verbatim source text."""

    start: int
    end: int
    lines: list[str] = field(default_factory=list)
    quote: str = ""
    code: list[MdCode] = field(default_factory=list)
    marker: str = ""  # the list marker as written ("- ", "1. "); empty for a paragraph

    @property
    def text(self) -> str:
        return " ".join(line for line in self.lines if not line.startswith(_FIELD_PREFIXES)).strip()

    @property
    def detection(self) -> str | None:
        for line in self.lines:
            for prefix in _DETECTION_PREFIXES:
                if line.startswith(prefix):
                    return line[len(prefix):].strip() or None
        return None

    @property
    def why(self) -> str | None:
        """Why a dead end only hides the problem (its one ``Why:`` line)."""
        for line in self.lines:
            for prefix in _WHY_PREFIXES:
                if line.startswith(prefix):
                    return line[len(prefix):].strip() or None
        return None

    @property
    def matches(self) -> list[str]:
        """Patterns (in backticks) on a ``Matches:`` line of a dead end."""
        out: list[str] = []
        for line in self.lines:
            if line.startswith(_MATCHES_PREFIXES):
                out.extend(m.group(1) for m in _PATTERN_REF.finditer(line))
        return out

    @property
    def addresses(self) -> list[str]:
        """Cause ids named (in backticks) on an ``Addresses:`` line of a fix."""
        out: list[str] = []
        for line in self.lines:
            if line.startswith(_ADDRESSES_PREFIXES):
                out.extend(m.group(1) for m in _CAUSE_REF.finditer(line))
        return out

    def cause(self) -> tuple[str, str | None, str] | None:
        """``(id, likelihood, text)`` if the item starts with a backticked cause id."""
        m = _CAUSE.match(self.text)
        if not m:
            return None
        return m.group(1), _LIKELIHOOD.get(m.group(2) or ""), m.group(3).strip()

    def record_cause(self) -> tuple[str, str | None, str, str | None] | None:
        """``(id, likelihood, text, detection)`` as a record shows them (texts read as sentences)."""
        parsed = self.cause()
        if parsed is None:
            return None
        cause_id, likelihood, text = parsed
        detection = sentence(self.detection) if self.detection else None
        return cause_id, likelihood, sentence(text or cause_id.replace("-", " ")), detection


@dataclass
class MdPart:
    kind: PartKind
    heading: str
    line: int
    end: int
    items: list[MdItem] = field(default_factory=list)


@dataclass
class MdSection:
    """A heading and its body. ``mode`` is set for ``{#mode-id}`` sections, which carry ``parts``."""

    level: int
    heading: str
    line: int
    end: int
    slug: str
    mode: str | None = None
    parent_mode: str | None = None
    intro: list[MdItem] = field(default_factory=list)
    intro_end: int = 0
    parts: list[MdPart] = field(default_factory=list)
    body_start: int = 0


@dataclass
class Runbook:
    name: str
    lines: list[str]
    sections: list[MdSection]
    warnings: list[str] = field(default_factory=list)

    def span_text(self, start: int, end: int) -> str:
        return "\n".join(self.lines[start - 1 : end])

    def passage_items(self, sec: MdSection) -> list[MdItem] | None:
        """The items of a section without a failure mode, or None if its body is empty (it makes no passage)."""
        if sec.mode or sec.body_start > sec.end or not self.span_text(sec.body_start, sec.end).strip():
            return None
        return parse_items(self.lines, sec.body_start, sec.end, [], self.name)

    def title(self) -> MdSection | None:
        """The runbook's title: its first heading, if that is a level-1 heading without a failure mode."""
        first = self.sections[0] if self.sections else None
        return first if first is not None and first.level == 1 and not first.mode else None


def sentence(text: str) -> str:
    """``text`` with its first letter upper-cased: "`id` (high): each worker…" reads as a sentence without the id."""
    return text[:1].upper() + text[1:]


def slugify(text: str, max_len: int = 40) -> str:
    """Lower-case ASCII slug cut at a word boundary near ``max_len``; empty if the text has no ASCII letters or digits."""
    out: list[str] = []
    for ch in text.lower():
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    slug = "".join(out).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rsplit("-", 1)[0] if "-" in slug[:max_len] else slug[:max_len]
    return slug


def _fence(line: str) -> tuple[int, str, str] | None:
    """``(indent, fence, info)`` if the line opens/closes a fenced block."""
    stripped = line.lstrip(" ")
    indent = len(line) - len(stripped)
    if indent > 3 and not stripped.startswith(("```", "~~~")):
        return None
    for ch in ("`", "~"):
        if stripped.startswith(ch * 3):
            n = len(stripped) - len(stripped.lstrip(ch))
            return indent, ch * n, stripped[n:].strip()
    return None


def _dedent(line: str, indent: int) -> str:
    """Remove up to ``indent`` leading spaces (a fence indented inside a list item indents its content)."""
    strip = len(line) - len(line.lstrip(" "))
    return line[min(indent, strip):]


def parse_items(lines: list[str], start: int, end: int, warnings: list[str], where: str) -> list[MdItem]:
    """List items / paragraphs with attached code blocks in ``start..end`` (1-based, inclusive)."""
    items: list[MdItem] = []
    current: MdItem | None = None
    prev_blank = True
    no = start
    while no <= end:
        line = lines[no - 1]
        fence = _fence(line)
        if fence:
            indent, marker, info = fence
            close = no + 1
            while close <= end:
                f = _fence(lines[close - 1])
                if f and f[1].startswith(marker) and not f[2]:
                    break
                close += 1
            if close > end:
                warnings.append(f"{where}: code fence opened on line {no} is never closed")
            content = lines[no : min(close, end + 1) - 1]
            code = "\n".join(_dedent(c, indent) for c in content)
            if content:
                lang = _LANGUAGES.get(info.split()[0].lower() if info else "", "text")
                block = MdCode(no + 1, no + len(content), lang, code, "\n".join(content))  # type: ignore[arg-type]
                if current is None:
                    current = MdItem(no + 1, no + len(content), quote=block.raw)
                    items.append(current)
                current.code.append(block)
                current.end = max(current.end, min(close, end))
            no = min(close, end) + 1
            prev_blank = False
            continue
        if not line.strip():
            prev_blank = True
            no += 1
            continue
        m = _LIST_ITEM.match(line)
        if m:
            current = MdItem(no, no, [m.group(1).strip()], quote=m.group(1).rstrip(),
                             marker=line[: len(line) - len(m.group(1))].strip() + " ")
            items.append(current)
        elif current is not None and (not prev_blank or line.startswith(("  ", "\t"))) and not current.code:
            current.lines.append(line.strip())
            current.quote += "\n" + "\n".join(lines[current.end : no])  # keeps blank lines between, verbatim
            current.end = no
        else:
            current = MdItem(no, no, [line.strip()], quote=line.rstrip())
            items.append(current)
        prev_blank = False
        no += 1
    for item in items:
        item.quote = item.quote.strip()
    return items


def parse_runbook(name: str, text: str) -> Runbook:
    """Parse a Markdown runbook. Raises :class:`InputError` if it has no headings."""
    lines = text.split("\n")
    if lines and lines[-1] == "" and text.endswith("\n"):
        lines.pop()
    warnings: list[str] = []
    heads: list[tuple[int, int, str, str | None]] = []
    in_fence: str | None = None
    for no, line in enumerate(lines, start=1):
        fence = _fence(line)
        if fence:
            if in_fence is None:
                in_fence = fence[1]
            elif fence[1].startswith(in_fence) and not fence[2]:
                in_fence = None
            continue
        if in_fence is None:
            m = _HEADING.match(line)
            if m:
                heads.append((no, len(m.group(1)), m.group(2).strip(), m.group(3)))
    if not heads:
        raise InputError(f"{name}: no Markdown headings (# …); a runbook needs at least one section heading")

    sections: list[MdSection] = []
    mode_stack: tuple[int, str] | None = None  # (level, mode) of the enclosing mode section
    used_slugs: set[str] = set()
    for i, (no, level, heading, attr) in enumerate(heads):
        next_line = heads[i + 1][0] if i + 1 < len(heads) else len(lines) + 1
        if mode_stack and level <= mode_stack[0]:
            mode_stack = None
        mode = None
        if attr is not None:
            if attr in MODE_IDS:
                mode = attr
            else:
                warnings.append(f"{name}:{no}: unknown failure mode {{#{attr}}}; section kept as a passage")
        part = _PARTS.get(heading.rstrip(":：").strip().lower()) if mode_stack and not mode else None
        if mode:
            end = next((h[0] - 1 for h in heads[i + 1 :] if h[1] <= level), len(lines))
        else:
            end = next_line - 1
        while end > no and not lines[end - 1].strip():
            end -= 1
        base = slugify(attr or heading) or f"line-{no}"
        slug = base if base not in used_slugs else f"{base}-{no}"
        used_slugs.add(slug)
        if part and mode_stack:
            owner = next((s for s in reversed(sections) if s.mode == mode_stack[1]), None)
            if owner is not None:
                items = parse_items(lines, no + 1, end, warnings, f"{name}:{no}")
                owner.parts.append(MdPart(part, heading, no, end, items))
                continue
        section = MdSection(level, heading, no, end, slug, mode=mode,
                            parent_mode=mode_stack[1] if mode_stack and not mode else None, body_start=no + 1)
        if mode:
            mode_stack = (level, mode)
            intro_end = next((h[0] - 1 for h in heads[i + 1 :] if h[0] <= end), end)
            section.intro = parse_items(lines, no + 1, intro_end, warnings, f"{name}:{no}")
            section.intro_end = intro_end
        sections.append(section)
    return Runbook(name, lines, sections, warnings)
