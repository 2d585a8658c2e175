"""Signature rules (``kb/rules/<mode>.yaml``) and the one-pass multi-pattern matcher.

A rule is data: patterns in RE2 syntax, a strength, optional cause hints, ``requires``/``unless``
patterns checked on the matched line, and inline examples (``match`` / ``no_match`` / ``todo``).
A rule without at least one ``match`` and one ``no_match`` example does not load.

Matching never uses Python ``re`` on input text. :class:`PatternSet` compiles every pattern into one
Hyperscan database and scans a chunk once to learn which patterns occur; only those are then run
with RE2 over the chunk to get every match and its span. Both engines are linear in the input.
Without Hyperscan, RE2 alone is used (still linear, slower with many patterns).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Literal

import re2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assistant.errors import KnowledgeBaseError
from kb.taxonomy import MODE_IDS

Strength = Literal["strong", "medium", "weak"]
STRENGTH_CONFIDENCE: dict[str, float] = {"strong": 0.9, "medium": 0.65, "weak": 0.4}
HITS_KEPT_PER_RULE = 10  # first and last N matching lines of each rule are kept as evidence


def _check_re2(pattern: str, case_sensitive: bool) -> str:
    try:
        re2.compile(_re2_source(pattern, case_sensitive))
    except re2.error as err:
        raise ValueError(f"pattern {pattern!r} is not valid RE2: {err}") from None
    return pattern


def _re2_source(pattern: str, case_sensitive: bool) -> str:
    return ("(?m)" if case_sensitive else "(?mi)") + pattern


class Examples(BaseModel):
    """Inline examples: ``match`` must fire, ``no_match`` must not, ``todo`` = known gaps (must not yet)."""

    model_config = ConfigDict(extra="forbid")
    match: list[str] = Field(min_length=1)
    no_match: list[str] = Field(min_length=1)
    todo: list[str] = []


class Rule(BaseModel):
    """One signature: if any pattern matches a line (and ``requires``/``unless`` agree), the mode is evidenced."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9-]+$")
    failure_mode: str
    description: str
    strength: Strength
    patterns: list[str] = Field(min_length=1)
    case_sensitive: bool = False
    requires: list[str] = Field(default=[], description="every one must also match the matched line")
    unless: list[str] = Field(default=[], description="none may match the matched line")
    causes: dict[str, float] = Field(default={}, description="cause id -> score boost when this rule fires")
    also_fires: list[str] = Field(default=[], description="other modes whose rules may match this rule's examples")
    examples: Examples

    @field_validator("failure_mode")
    @classmethod
    def _known_mode(cls, v: str) -> str:
        if v not in MODE_IDS:
            raise ValueError(f"unknown failure mode {v!r}")
        return v

    @field_validator("also_fires")
    @classmethod
    def _known_modes(cls, v: list[str]) -> list[str]:
        for m in v:
            if m not in MODE_IDS:
                raise ValueError(f"unknown failure mode {m!r} in also_fires")
        return v

    @model_validator(mode="after")
    def _valid(self) -> "Rule":
        if not self.id.startswith(self.failure_mode + "."):
            raise ValueError(f"rule id {self.id!r} must start with its failure mode {self.failure_mode!r}.")
        for p in [*self.patterns, *self.requires, *self.unless]:
            _check_re2(p, self.case_sensitive)
        return self

    @property
    def confidence(self) -> float:
        return STRENGTH_CONFIDENCE[self.strength]

    def line_ok(self, line: str) -> bool:
        """Whether ``requires``/``unless`` accept a line one of the patterns matched."""
        return all(_compiled(p, self.case_sensitive).search(line) for p in self.requires) and not any(
            _compiled(p, self.case_sensitive).search(line) for p in self.unless
        )

    def first_match(self, text: str) -> tuple[int, str] | None:
        """``(line number, matched substring)`` of the first line of ``text`` this rule fires on (RE2, line by line)."""
        for number, line in enumerate(text.split("\n"), 1):
            for p in self.patterns:
                m = _compiled(p, self.case_sensitive).search(line)
                if m and self.line_ok(line):
                    return number, m.group(0)
        return None


@lru_cache(maxsize=4096)
def _compiled(pattern: str, case_sensitive: bool):
    return re2.compile(_re2_source(pattern, case_sensitive))


@lru_cache(maxsize=4096)
def _compiled_bytes(pattern: str, case_sensitive: bool):
    return re2.compile(_re2_source(pattern, case_sensitive).encode("utf-8"))


class RuleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    failure_mode: str
    rules: list[dict]


def load_rules(rules_dir: Path | None = None) -> tuple[Rule, ...]:
    """Load and validate every rule under ``rules_dir`` (default ``kb/rules``).

    Raises :class:`KnowledgeBaseError` naming the file and rule on the first invalid rule.
    """
    if rules_dir is None:
        from assistant.config import KB_DIR

        rules_dir = KB_DIR / "rules"
    return _load_rules(Path(rules_dir))


@lru_cache(maxsize=8)
def _load_rules(rules_dir: Path) -> tuple[Rule, ...]:
    files = sorted(rules_dir.glob("*.yaml"))
    if not files:
        raise KnowledgeBaseError(f"no signature rules found in {rules_dir}")
    rules: list[Rule] = []
    seen: set[str] = set()
    for path in files:
        try:
            data = RuleFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (ValidationError, yaml.YAMLError) as err:
            raise KnowledgeBaseError(f"{path.name}: invalid rule file: {err}") from None
        for i, raw in enumerate(data.rules):
            name = raw.get("id", f"#{i + 1}") if isinstance(raw, dict) else f"#{i + 1}"
            try:
                rule = Rule.model_validate({"failure_mode": data.failure_mode, **raw})
            except ValidationError as err:
                raise KnowledgeBaseError(f"{path.name}: rule {name}: {err}") from None
            if rule.id in seen:
                raise KnowledgeBaseError(f"{path.name}: rule {rule.id}: duplicate id")
            seen.add(rule.id)
            rules.append(rule)
    return tuple(rules)


# ----------------------------------------------------------------------------------------------
# One-pass matching


@dataclass(frozen=True, slots=True)
class Entry:
    """A pattern in a :class:`PatternSet`; ``tag`` says what it belongs to (e.g. ``rule:<id>``)."""

    tag: str
    pattern: str
    case_sensitive: bool = False
    max_matches: int = 200  # per chunk; 0 = unlimited (metric lines need every match)


_BOUNDED_DOT = re2.compile(r"\.\{\d*,?\d*\}")


def hs_source(pattern: str) -> bytes:
    """The Hyperscan prefilter form of a pattern: bounded ``.{m,n}`` widened to ``.*``.

    Hyperscan runs in byte mode (no UTF-8 flag) with ``HS_FLAG_PREFILTER``: a byte-level ``.*``
    still covers any run of characters on the line, so the prefilter reports a superset of RE2's
    matches, and compiling stays fast (bounded repeats are what make Hyperscan slow to build).
    """
    return _BOUNDED_DOT.sub(".*", pattern).encode("utf-8")


class PatternSet:
    """Many patterns scanned in one pass: Hyperscan finds which occur, RE2 extracts their spans."""

    def __init__(self, entries: list[Entry]):
        self.entries = entries
        self._re2 = [_compiled_bytes(e.pattern, e.case_sensitive) for e in entries]
        self._hs = None
        self._re2_always: list[int] = []  # patterns Hyperscan cannot compile are prefiltered by RE2 instead
        self.engine = "re2"
        try:
            import hyperscan
        except ImportError:
            self._re2_always = list(range(len(entries)))
            return
        ids = list(range(len(entries)))
        try:
            self._hs = self._build(hyperscan, ids)
        except hyperscan.HyperscanError:
            ok = [i for i in ids if self._compiles(hyperscan, i)]
            self._re2_always = [i for i in ids if i not in set(ok)]
            self._hs = self._build(hyperscan, ok) if ok else None
        if self._hs is not None:
            self.engine = "hyperscan+re2"

    def _flags(self, hs, i: int) -> int:
        flags = hs.HS_FLAG_MULTILINE | hs.HS_FLAG_SINGLEMATCH | hs.HS_FLAG_ALLOWEMPTY | hs.HS_FLAG_PREFILTER
        if not self.entries[i].case_sensitive:
            flags |= hs.HS_FLAG_CASELESS
        return flags

    def _build(self, hs, ids: list[int]):
        db = hs.Database(mode=hs.HS_MODE_BLOCK)
        db.compile(
            expressions=[hs_source(self.entries[i].pattern) for i in ids],
            ids=ids,
            elements=len(ids),
            flags=[self._flags(hs, i) for i in ids],
        )
        return db

    def _compiles(self, hs, i: int) -> bool:
        try:
            self._build(hs, [i])
        except hs.HyperscanError:
            return False
        return True

    def hit_indexes(self, data: bytes) -> list[int]:
        """Indexes of the entries that match somewhere in ``data``."""
        hits: set[int] = set()
        if self._hs is not None and data:

            def on_match(idx: int, _from: int, _to: int, _flags: int, _ctx: object) -> None:
                hits.add(idx)

            self._hs.scan(data, match_event_handler=on_match)
        for i in self._re2_always:
            if self._re2[i].search(data):
                hits.add(i)
        return sorted(hits)

    def scan(self, data: bytes) -> Iterator[tuple[int, int, int]]:
        """Yield ``(entry index, start, end)`` byte spans of matches in ``data`` (unordered)."""
        for i in self.hit_indexes(data):
            limit = self.entries[i].max_matches
            for n, m in enumerate(self._re2[i].finditer(data)):
                if limit and n >= limit:
                    break
                yield i, m.start(), m.end()


@dataclass(slots=True)
class RuleHit:
    """A line a rule fired on."""

    line: int
    text: str
    match: str
    rank: str | None


@dataclass
class RuleHits:
    """The first and last :data:`HITS_KEPT_PER_RULE` hits of one rule plus the total count."""

    first: list[RuleHit] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=HITS_KEPT_PER_RULE))
    count: int = 0

    def add(self, hit: RuleHit) -> None:
        self.count += 1
        if len(self.first) < HITS_KEPT_PER_RULE:
            self.first.append(hit)
        else:
            self.last.append(hit)

    def kept(self) -> list[RuleHit]:
        return [*self.first, *self.last]


def rule_entries(rules: tuple[Rule, ...]) -> list[Entry]:
    """One :class:`Entry` per rule pattern, tagged ``rule:<id>``."""
    return [Entry(f"rule:{r.id}", p, r.case_sensitive) for r in rules for p in r.patterns]


def export_ere(rules: tuple[Rule, ...]) -> tuple[list[str], list[str]]:
    """Translate rule patterns to POSIX ERE for ``grep -E -i`` (benchmark baseline).

    Returns ``(translated, skipped)``; patterns using RE2-only syntax that has no ERE form are skipped.
    """
    out: list[str] = []
    skipped: list[str] = []
    for r in rules:
        for p in r.patterns:
            ere = (
                p.replace("(?:", "(")
                .replace(r"\d", "[0-9]")
                .replace(r"\s", "[[:space:]]")
                .replace(r"\S", "[^[:space:]]")
            )
            if "(?" in ere or "\\x" in ere or "\\p" in ere:
                skipped.append(p)
            else:
                out.append(ere)
    return out, skipped
