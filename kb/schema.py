"""Pydantic models of the knowledge base: records (symptom → cause → fix) and cited passages.

Everything user-facing in a record carries a :class:`Citation` into a file under ``kb/sources/``.
Text in a source's own language is the source's words (the guide's Chinese, the team runbook's English);
the other language is the team's translation, kept in ``kb/translations/`` and never cited as if the
source said it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kb.taxonomy import Category, FailureMode

SourceKind = Literal["guide", "runbook"]
Likelihood = Literal["high", "medium", "low"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Citation(_Model):
    """Where a piece of knowledge comes from: a source file, its section and a 1-based inclusive line range.

    ``quote`` is the exact source text the citation supports; it must occur inside
    ``start_line..end_line`` of ``source`` (a test checks every citation).
    """

    source: str = Field(description="file name under kb/sources/")
    source_kind: SourceKind = Field(description="'guide' = the customer's guide; 'runbook' = team/user runbook")
    section: str = Field(description="section number ('2', '5') or runbook heading slug")
    heading: str = Field(description="section heading as written in the source")
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    quote: str = Field(description="verbatim source text this citation supports")

    @model_validator(mode="after")
    def _ordered(self) -> Citation:
        if self.end_line < self.start_line:
            raise ValueError(f"end_line {self.end_line} < start_line {self.start_line}")
        return self

    def label(self) -> str:
        """Human-readable ``source §section heading, lines a–b``."""
        lines = f"line {self.start_line}" if self.start_line == self.end_line else f"lines {self.start_line}–{self.end_line}"
        return f"{self.source} §{self.section} {self.heading}, {lines}"


class Text(_Model):
    """A piece of text in both languages. Either may be missing when no source/translation has it."""

    zh: str | None = None
    en: str | None = None

    def get(self, lang: str) -> str:
        """The text in ``lang`` ('zh' or 'en'), falling back to the other language."""
        first, second = (self.zh, self.en) if lang == "zh" else (self.en, self.zh)
        return first or second or ""


class CodeSnippet(_Model):
    """A code block copied byte-for-byte from a source (``code`` has no trailing newline)."""

    language: Literal["python", "shell", "yaml", "text"]
    code: str
    citation: Citation


class Symptom(_Model):
    text: Text
    citation: Citation


class Cause(_Model):
    """A root cause. ``id`` is a stable slug the decision tree refers to (e.g. ``fp16-overflow``)."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    text: Text
    likelihood: Likelihood | None = Field(default=None, description="as the source rates it; None when it gives none")
    detection: Text | None = Field(default=None, description="how to check for this cause")
    citation: Citation


class Step(_Model):
    """One diagnosis step: prose, code, or both."""

    text: Text | None = None
    code: CodeSnippet | None = None
    citation: Citation


class Fix(_Model):
    """A fix. ``priority`` 1 is tried first; the source's order is kept."""

    priority: int = Field(ge=1)
    text: Text | None = None
    code: CodeSnippet | None = None
    addresses: list[str] = Field(default=[], description="cause ids this fix acts on (empty: general fix)")
    citation: Citation


class DeadEnd(_Model):
    """Advice that only hides the problem: never a first fix; shown as "don't", with why.

    ``matches`` are RE2 patterns; a fix of the record whose text or code matches one is this dead end.
    """

    text: Text
    why: Text
    matches: list[str] = Field(default=[], description="RE2 patterns naming the fixes that are this dead end")
    citation: Citation


class TableRow(_Model):
    """A row of a source table kept as structured data: header cell -> cell text (source language)."""

    cells: dict[str, str]
    en: dict[str, str] | None = None
    citation: Citation


class Table(_Model):
    header: list[str]
    header_en: list[str] | None = None
    rows: list[TableRow]
    citation: Citation


class LineSpan(_Model):
    """Lines of a source file owned by one record or passage (1-based, inclusive)."""

    source: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


class Record(_Model):
    """Symptom → cause → fix knowledge for one failure mode, assembled from every source that covers it."""

    id: str
    failure_mode: FailureMode
    category: Category
    title: Text
    summary: Text | None = None
    keywords: Text = Field(description="space-separated search terms (zh and en) used by retrieval")
    symptoms: list[Symptom] = []
    causes: list[Cause] = []
    diagnosis: list[Step] = []
    fixes: list[Fix] = []
    dead_ends: list[DeadEnd] = Field(default=[], description="advice that only hides the problem, with why")
    tables: list[Table] = []
    citations: list[Citation] = Field(description="every section this record draws on")
    owns: list[LineSpan] = Field(default=[], description="source lines this record is the home of (coverage)")


class Passage(_Model):
    """A cited section that is not a failure mode (overview, best practices, checklist, runbook notes)."""

    id: str
    title: Text
    text: str = Field(description="the section's text as in the source")
    text_en: str | None = None
    text_zh: str | None = Field(default=None, description="the team's Chinese for a passage of an English runbook")
    code: list[CodeSnippet] = []
    tables: list[Table] = []
    failure_modes: list[FailureMode] = Field(default=[], description="modes this passage is relevant to")
    truncated: bool = Field(default=False, description="the source stops mid-section")
    citation: Citation
    owns: list[LineSpan] = []

    def body(self, lang: str) -> str:
        """The passage text in ``lang`` ('zh' or 'en') where a translation exists, else the source's text."""
        return (self.text_zh if lang == "zh" else self.text_en) or self.text
