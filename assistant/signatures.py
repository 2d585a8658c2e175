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

import hashlib
import json
import os
import platform
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assistant import fastre
from assistant.errors import KnowledgeBaseError
from assistant.snapshot import prune, touch
from kb.taxonomy import MODE_IDS
from kb.yamlio import YAMLError, line_of, load_yaml, where

Strength = Literal["strong", "medium", "weak"]
STRENGTH_CONFIDENCE: dict[str, float] = {"strong": 0.9, "medium": 0.65, "weak": 0.4}
HITS_KEPT_PER_RULE = 10  # first and last N matching lines of each rule are kept as evidence

# Words that deny what follows them: "this is not a gradient explosion", "loss 还没变 nan". A match of a rule
# that reads words (medium or weak) right after one, or with a Chinese denial inside it, evidences nothing.
# Strong rules match machine output, which is never negated this way. Bare 没/未 are left out on purpose:
# "没多久就 nan 了" (soon after, it became NaN) says the opposite.
_DENIED_BEFORE = re2.compile(
    r"(?i)(?:\b(?:not|no|never|without|isn't|wasn't|aren't|weren't|doesn't|didn't|don't|hasn't|haven't|hadn't|"
    r"won't|rather than|instead of|no sign of|ruled out)\W+(?:\w+\W+){0,2}"
    r"|(?:不是|并不是|并非|没有|还没有|还没|并没有|并未|不会|不像|排除了|排除|而不是)\s*.{0,2})$")
_DENIED_INSIDE = re2.compile(r"(?i)还没|并没有|并非|并未|不是|\b(?:is|was|are|were|does|did|has|have)(?: not|n't)\b|\bnever\b|\bno longer\b")


_DENIAL_WORD = re2.compile(r"(?i)\bnot\b|n.t\b|never|no longer|还没|并没有|并非|并未|不是")  # in a pattern's source


# Questions and doubts that contain a denial word but deny nothing: "是不是通信太慢？", "有没有梯度爆炸",
# "not sure whether it is a loss spike".
_NOT_A_DENIAL = re2.compile(r"(?i)是不是|有没有|会不会|是否|\b(?:not sure|not certain|not clear|not only|"
                            r"don't know|do not know|whether or not)\b")


def denied(before: str, matched: str, *, inside: bool = True) -> bool:
    """Whether a words-rule match is negated: a denial ends the text ``before`` it on its line, or (``inside``)
    sits inside it. A question or a doubt ("是不是…", "not sure whether…") is not a denial."""
    before, matched = _NOT_A_DENIAL.sub("?", before[-60:]), _NOT_A_DENIAL.sub("?", matched)
    return bool(_DENIED_BEFORE.search(before) or (inside and _DENIED_INSIDE.search(matched)))


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
    def _valid(self) -> Rule:
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

    def negated(self, before: str, matched: str) -> bool:
        """Whether this match is denied by the words around it (only rules that read words, see :func:`denied`).
        A rule whose own patterns say "not" ("weights are not synchronized", "flash_attn is not installed") is
        only denied by what comes before its match."""
        return self.strength != "strong" and denied(before, matched, inside=not self._says_not)

    @property
    def _says_not(self) -> bool:
        return any(_DENIAL_WORD.search(p) for p in self.patterns)

    def first_match(self, text: str) -> tuple[int, str] | None:
        """``(line number, matched substring)`` of the first line of ``text`` this rule fires on (RE2, line by line)."""
        for number, line in enumerate(text.split("\n"), 1):
            for p in self.patterns:
                for m in _compiled(p, self.case_sensitive).finditer(line):
                    if self.line_ok(line) and not self.negated(line[:m.start()], m.group(0)):
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
            data = RuleFile.model_validate(load_yaml(path))
        except (ValidationError, YAMLError) as err:
            raise KnowledgeBaseError(f"invalid rule file: {where(path, err)}") from None
        for i, raw in enumerate(data.rules):
            name = raw.get("id", f"#{i + 1}") if isinstance(raw, dict) else f"#{i + 1}"
            try:
                rule = Rule.model_validate({"failure_mode": data.failure_mode, **raw})
            except ValidationError as err:
                raise KnowledgeBaseError(where(path, err, ("rules", i), label=f"rule {name}")) from None
            if rule.id in seen:
                raise KnowledgeBaseError(f"{path}, line {line_of(path, ('rules', i))}: rule {rule.id}: duplicate id")
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

    def __reduce__(self):
        # unpickled by calling the class: the default for a frozen slots dataclass looks up its fields per
        # object, 40 ms for the engine snapshot's thousand entries in a fresh process
        return Entry, (self.tag, self.pattern, self.case_sensitive, self.max_matches)


_BOUNDED_DOT = re2.compile(r"\.\{\d*,?\d*\}")


def hs_source(pattern: str) -> bytes:
    """The Hyperscan prefilter form of a pattern: bounded ``.{m,n}`` widened to ``.*``.

    Hyperscan runs in byte mode (no UTF-8 flag) with ``HS_FLAG_PREFILTER``: a byte-level ``.*``
    still covers any run of characters on the line, so the prefilter reports a superset of RE2's
    matches, and compiling stays fast (bounded repeats are what make Hyperscan slow to build).
    """
    return _BOUNDED_DOT.sub(".*", pattern).encode("utf-8")


def entries_digest(entries: list[Entry]) -> str:
    """sha256 of what Hyperscan compiles for ``entries``: keys the compiled database on disk. (Computing it
    rewrites every pattern, ~20 ms for the packaged rules: the engine snapshot keeps it.)"""
    return hashlib.sha256(repr([(hs_source(e.pattern), e.case_sensitive) for e in entries]).encode()).hexdigest()


def hyperscan_module():
    """The ``hyperscan`` module, or None where it is not installed (ARM) or ``TRAINFIX_NO_HYPERSCAN=1`` forces
    RE2 alone (the tests compare both paths). Hyperscan is only a prefilter: answers are the same without it."""
    if os.environ.get("TRAINFIX_NO_HYPERSCAN", "").strip() not in ("", "0"):
        return None
    try:
        import hyperscan
    except ImportError:
        return None
    return hyperscan


@lru_cache(maxsize=1)
def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return hashlib.sha256(line.split(":", 1)[-1].strip().encode()).hexdigest()[:16]
    except OSError:
        pass
    return platform.processor()


class PatternSet:
    """Many patterns scanned in one pass: Hyperscan finds which occur, RE2 extracts their spans."""

    def __init__(self, entries: list[Entry], digest: str | None = None):
        """``digest`` is :func:`entries_digest` of ``entries`` when the caller has it (from a snapshot)."""
        self.entries = entries
        self._digest = digest
        self._re2_compiled: list = [None] * len(entries)  # compiled on first use: most patterns never occur
        self._hs = None
        self._re2_always: list[int] = []  # patterns Hyperscan cannot compile are prefiltered by RE2 instead
        self.engine = "re2"
        self._re2_always = list(range(len(entries)))
        hyperscan = hyperscan_module()
        if hyperscan is None:
            return
        try:
            self._hs, bad = self._load_or_build(hyperscan)
        except hyperscan.HyperscanError:  # e.g. a CPU Hyperscan cannot run on: RE2 alone gives the same answers
            self._hs, bad = None, list(range(len(entries)))
        self._re2_always = bad
        if self._hs is not None:
            self.engine = "hyperscan+re2"

    def _cache_path(self, hs) -> Path | None:
        """Where the compiled database for exactly these patterns is kept between runs."""
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        # The database is tuned for the CPU it was compiled on: the key carries the CPU's features, so a
        # home directory shared between machines never loads a database built for another instruction set.
        digest = self._digest or entries_digest(self.entries)
        key = hashlib.sha256(repr((getattr(hs, "__version__", ""), platform.machine(), _cpu_flags(), digest)).encode())
        return Path(base) / "trainfix" / f"hyperscan-{key.hexdigest()[:24]}.db"

    def _load_or_build(self, hs):
        """Compile once per machine: the database and the unsupported pattern ids are cached on disk."""
        path = self._cache_path(hs)
        try:
            meta, blob = path.read_bytes().split(b"\n", 1)
            bad = json.loads(meta)
            if not blob:
                return None, bad
            db = hs.loadb(blob, hs.HS_MODE_BLOCK)
            db.scratch = hs.Scratch(db)  # a deserialised database comes without scratch space
            touch(path)
            return db, bad
        except (OSError, ValueError, hs.HyperscanError):
            pass  # no usable cache: compile
        bad = self._unsupported(hs, list(range(len(self.entries))))
        ok = [i for i in range(len(self.entries)) if i not in set(bad)]
        db = self._build(hs, ok) if ok else None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(json.dumps(bad).encode() + b"\n" + (hs.dumpb(db) if db is not None else b""))
            os.replace(tmp, path)
            prune(path)  # the databases of earlier rule sets
        except OSError:
            pass  # a read-only home only costs the compile time on the next run
        return db, bad

    def _unsupported(self, hs, ids: list[int]) -> list[int]:
        """Ids Hyperscan cannot compile, found by bisection (its error does not say which one)."""
        if not ids or self._compiles_all(hs, ids):
            return []
        if len(ids) == 1:
            return ids
        mid = len(ids) // 2
        return self._unsupported(hs, ids[:mid]) + self._unsupported(hs, ids[mid:])

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

    def _compiles_all(self, hs, ids: list[int]) -> bool:
        try:
            self._build(hs, ids)
        except hs.HyperscanError:
            return False
        return True

    def _re2(self, i: int):
        rx = self._re2_compiled[i]
        if rx is None:
            e = self.entries[i]
            rx = self._re2_compiled[i] = _compiled_bytes(e.pattern, e.case_sensitive)
        return rx

    def hit_indexes(self, data: bytes) -> list[int]:
        """Indexes of the entries that match somewhere in ``data``."""
        hits: set[int] = set()
        if self._hs is not None and data:

            def on_match(idx: int, _from: int, _to: int, _flags: int, _ctx: object) -> None:
                hits.add(idx)

            try:
                self._hs.scan(data, match_event_handler=on_match)
            except Exception:  # noqa: BLE001 - Hyperscan refused (platform, scratch): RE2 prefilters everything
                self._hs, self._re2_always, self.engine = None, list(range(len(self.entries))), "re2"
                return self.hit_indexes(data)
        for i in self._re2_always:
            if self._re2(i).search(data):
                hits.add(i)
        return sorted(hits)

    def scan(self, data: bytes) -> Iterator[tuple[int, int, int]]:
        """Yield ``(entry index, start, end)`` byte spans of matches in ``data`` (unordered)."""
        for i, spans in self.spans(data):
            for start, end in spans:
                yield i, start, end

    def spans(self, data: bytes) -> Iterator[tuple[int, list[tuple[int, int]]]]:
        """``(entry index, its match spans in order)`` for each entry found in ``data``."""
        for i in self.hit_indexes(data):
            yield i, fastre.byte_spans(self._re2(i), data, self.entries[i].max_matches)


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
