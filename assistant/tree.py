"""The decision tree engine: rank a mode's causes from evidence and answers; pick follow-up questions.

The tree itself is data (``kb/tree.yaml``): per mode its causes with base scores (the guide's
likelihoods where it gives them), adjustments when a *fact* has a value (precision=bf16,
oom-when=start, …), and text hints. Facts come from the text (detect patterns, scanned in the
same pass as the signature rules), from metric findings and tracebacks, or from the user's
answers — answers win. Every reason is built in English and Chinese (``reason`` / ``reason_zh`` in
the data, parallel templates here), so a ranked cause carries ``reasons`` and ``reasons_zh``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assistant.errors import InputError, KnowledgeBaseError
from assistant.models import FollowUp, MetricsReport, RankedCause, TracebackInfo
from assistant.signatures import Entry, _check_re2, _compiled
from kb.taxonomy import MODE_IDS
from kb.yamlio import YAMLError, load_yaml, where

EARLY_STEPS = 50  # a NaN at or before this step counts as 'within the first steps'
EARLY_EPOCH = 0.05  # ... or at or before this epoch, when only the epoch is logged
LATE_POINTS = 20  # this many finite loss values before the NaN show a run that was healthy for a while
DEEP_STEPS = 500  # a log that reached this step shows a run deep into training (stage=deep)


_CJK = re2.compile(r"[\p{Han}]")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _chinese(v: str) -> str:
    """A ``*_zh`` text must be an actual translation, not the English copied over."""
    if not _CJK.search(v):
        raise ValueError(f"not Chinese: {v!r}")
    return v


class Reason(NamedTuple):
    """One reason for a score, in English and in Chinese."""

    en: str
    zh: str


class _Reasoned(_M):
    reason: str
    reason_zh: str

    @field_validator("reason_zh")
    @classmethod
    def _zh(cls, v: str) -> str:
        return _chinese(v)


class _Patterned(_M):
    """Fires when one of ``patterns`` matches a line and none of ``unless`` does (RE2, checked at load)."""

    patterns: list[str] = Field(min_length=1)
    unless: list[str] = []

    @field_validator("patterns", "unless")
    @classmethod
    def _re2(cls, v: list[str]) -> list[str]:
        return [_check_re2(p, False) for p in v]


class Detect(_Patterned, _Reasoned):
    value: str
    weight: float = 1.0


class Fact(_M):
    question_en: str
    question_zh: str
    options: list[str] = Field(min_length=2)
    answers: dict[str, list[str]]
    detect: list[Detect] = []

    @model_validator(mode="after")
    def _consistent(self) -> Fact:
        for key, pats in self.answers.items():
            if key not in self.options:
                raise ValueError(f"answer key {key!r} is not an option")
            for p in pats:
                _check_re2(p, False)
        for d in self.detect:
            if d.value not in self.options:
                raise ValueError(f"detect value {d.value!r} is not an option")
        return self


class CauseBase(_M):
    id: str
    likelihood: str | None = None
    base: float | None = None
    basis: str
    basis_zh: str

    @field_validator("basis_zh")
    @classmethod
    def _zh(cls, v: str) -> str:
        return _chinese(v)

    @model_validator(mode="after")
    def _one(self) -> CauseBase:
        if (self.likelihood is None) == (self.base is None):
            raise ValueError(f"cause {self.id}: give exactly one of likelihood / base")
        return self


class Adjust(_Reasoned):
    when: dict[str, str]
    cause: str
    delta: float


class Hint(_Patterned, _Reasoned):
    cause: str
    delta: float


class ModeTree(_M):
    causes: list[CauseBase] = Field(min_length=1)
    adjust: list[Adjust] = []
    hints: list[Hint] = []
    ask: list[str] = []


class Contradiction(_Reasoned):
    """Advice ruled out when the case's facts are ``when``: causes by id, fixes by RE2 pattern."""

    when: dict[str, str] = Field(min_length=1)
    modes: list[str] = Field(default=[], description="modes it applies to (empty: every mode)")
    causes: list[str] = []
    fixes: list[str] = []
    strip_code: bool = Field(default=False, description="keep the matched fixes' advice, drop only their code")

    @field_validator("fixes")
    @classmethod
    def _re2(cls, v: list[str]) -> list[str]:
        return [_check_re2(p, False) for p in v]

    def applies(self, mode: str, facts: dict[str, str]) -> bool:
        return (not self.modes or mode in self.modes) and all(facts.get(k) == v for k, v in self.when.items())


class TreeData(_M):
    """The whole ``kb/tree.yaml``."""

    likelihood_base: dict[str, float]
    facts: dict[str, Fact]
    modes: dict[str, ModeTree]
    contradicted: list[Contradiction] = []

    @model_validator(mode="after")
    def _consistent(self) -> TreeData:
        for mode_id, mt in self.modes.items():
            if mode_id not in MODE_IDS:
                raise ValueError(f"unknown mode {mode_id!r}")
            ids = {c.id for c in mt.causes}
            for c in mt.causes:
                if c.likelihood is not None and c.likelihood not in self.likelihood_base:
                    raise ValueError(f"{mode_id}: cause {c.id}: unknown likelihood {c.likelihood!r}")
            for a in mt.adjust:
                if a.cause not in ids:
                    raise ValueError(f"{mode_id}: adjust names cause {a.cause!r} not listed for the mode")
                for fact, value in a.when.items():
                    if fact not in self.facts or value not in self.facts[fact].options:
                        raise ValueError(f"{mode_id}: adjust condition {fact}={value} is not a fact option")
            for h in mt.hints:
                if h.cause not in ids:
                    raise ValueError(f"{mode_id}: hint names cause {h.cause!r} not listed for the mode")
            for fact in mt.ask:
                if fact not in self.facts:
                    raise ValueError(f"{mode_id}: asks unknown fact {fact!r}")
        known = {c.id for mt in self.modes.values() for c in mt.causes}
        for c in self.contradicted:
            for fact, value in c.when.items():
                if fact not in self.facts or value not in self.facts[fact].options:
                    raise ValueError(f"contradicted: condition {fact}={value} is not a fact option")
            for m in c.modes:
                if m not in MODE_IDS:
                    raise ValueError(f"contradicted: unknown mode {m!r}")
            for cause in c.causes:
                if cause not in known:
                    raise ValueError(f"contradicted: unknown cause {cause!r}")
        return self

    def contradictions(self, mode: str, facts: dict[str, str]) -> list[Contradiction]:
        """The entries of ``contradicted`` that this case's ``facts`` trigger for ``mode``."""
        return [c for c in self.contradicted if c.applies(mode, facts)]

    def cause_ids(self) -> dict[str, list[str]]:
        """Mode id -> its cause ids, in tree order."""
        return {m: [c.id for c in mt.causes] for m, mt in self.modes.items()}

    def base_score(self, c: CauseBase) -> float:
        return c.base if c.base is not None else self.likelihood_base[c.likelihood or ""]


def load_tree(path: Path | None = None) -> TreeData:
    """Load and validate ``kb/tree.yaml``; :class:`KnowledgeBaseError` names what is wrong."""
    if path is None:
        from assistant.config import KB_DIR

        path = KB_DIR / "tree.yaml"
    return _load_tree(Path(path))


@lru_cache(maxsize=4)
def _load_tree(path: Path) -> TreeData:
    try:
        return TreeData.model_validate(load_yaml(path))
    except FileNotFoundError:
        raise KnowledgeBaseError(f"decision tree not found: {path}") from None
    except (ValidationError, YAMLError) as err:
        raise KnowledgeBaseError(f"invalid decision tree: {where(path, err)}") from None


# ----------------------------------------------------------------------------------------------
# Entries for the one-pass scanner; tags: "fact:<fact>:<detect index>" and "hint:<mode>:<hint index>".


def tree_entries(tree: TreeData) -> list[Entry]:
    """Patterns of fact detectors and cause hints, tagged for :func:`collect`."""
    out: list[Entry] = []
    for fact_id, fact in tree.facts.items():
        for i, d in enumerate(fact.detect):
            out.extend(Entry(f"fact:{fact_id}:{i}", p) for p in d.patterns)
    for mode_id, mt in tree.modes.items():
        for i, h in enumerate(mt.hints):
            out.extend(Entry(f"hint:{mode_id}:{i}", p) for p in h.patterns)
    return out


@dataclass
class TextSignals:
    """Fact detections and hint hits seen in the text: tag -> first line number."""

    first_line: dict[str, int] = field(default_factory=dict)
    line_text: dict[int, str] = field(default_factory=dict)  # the text of each line in first_line (for evidence)

    def add(self, tag: str, line: int, text: str, tree: TreeData) -> None:
        if tag in self.first_line:
            return
        _, group, idx = tag.split(":")
        unless = tree.facts[group].detect[int(idx)].unless if tag.startswith("fact:") else (
            tree.modes[group].hints[int(idx)].unless)
        if any(_compiled(p, False).search(text) for p in unless):
            return
        self.first_line[tag] = line
        self.line_text.setdefault(line, text)


def facts_from_text(tree: TreeData, signals: TextSignals) -> tuple[dict[str, str], dict[str, Reason]]:
    """Fact values the text settles (ties stay unknown) and a reason for each."""
    facts: dict[str, str] = {}
    reasons: dict[str, Reason] = {}
    for fact_id, fact in tree.facts.items():
        weights: dict[str, float] = {}
        why: dict[str, Reason] = {}
        for i, d in enumerate(fact.detect):
            line = signals.first_line.get(f"fact:{fact_id}:{i}")
            if line is None:
                continue
            weights[d.value] = weights.get(d.value, 0.0) + d.weight
            why.setdefault(d.value, Reason(f"{d.reason} seen at line {line}", f"{d.reason_zh}，见第 {line} 行"))
        if not weights:
            continue
        ranked = sorted(weights.items(), key=lambda kv: -kv[1])
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            continue
        facts[fact_id] = ranked[0][0]
        reasons[fact_id] = why[ranked[0][0]]
    return facts, reasons


def facts_from_analysis(
    metrics: MetricsReport | None, tracebacks: list[TracebackInfo]
) -> tuple[dict[str, str], dict[str, Reason]]:
    """Facts derived from metric findings and tracebacks (NaN onset, when an OOM happened)."""
    facts: dict[str, str] = {}
    reasons: dict[str, Reason] = {}
    if metrics is not None:
        nan = next((f for f in metrics.findings if f.kind == "nan-onset"), None)
        if nan is not None:
            loss = next((s for s in metrics.series if s.name == "loss"), None)
            finite_before = loss.points if loss is not None else 0
            # The step decides when the log gives one; otherwise only a long healthy run before the
            # NaN says "late" and only a NaN among the first logged values says "early"; a short paste
            # of a few lines says nothing about when the run started, so no fact is claimed.
            if nan.step is not None:
                onset: str | None = "early" if nan.step <= EARLY_STEPS else "late"
            elif nan.epoch is not None:  # HF Trainer lines carry no step, but an epoch
                onset = "early" if nan.epoch <= EARLY_EPOCH else "late"
            else:
                onset = "late" if finite_before >= LATE_POINTS else None
            if onset is not None:
                facts["nan-onset"] = onset
                en = f"loss first NaN/inf at line {nan.line}"
                zh = f"loss 在第 {nan.line} 行"
                if nan.step is not None:
                    en, zh = f"{en} (step {nan.step:g})", f"{zh}（第 {nan.step:g} 步）首次出现 NaN/inf"
                elif nan.epoch is not None:
                    en, zh = f"{en} (epoch {nan.epoch:g})", f"{zh}（epoch {nan.epoch:g}）首次出现 NaN/inf"
                else:
                    en = f"{en} after {finite_before} finite values"
                    zh = f"{zh}首次出现 NaN/inf，此前有 {finite_before} 个正常值"
                reasons["nan-onset"] = Reason(en, zh)
    if metrics is not None and metrics.last_step is not None and metrics.last_step >= DEEP_STEPS:
        facts["stage"] = "deep"
        reasons["stage"] = Reason(f"training logged up to step {metrics.last_step:g}",
                                  f"训练日志已记录到第 {metrics.last_step:g} 步")
    for tb in tracebacks:
        if any(f.function.startswith("generate") or "generation/utils.py" in f.file for f in tb.frames):
            facts["oom-when"] = "inference"
            reasons["oom-when"] = Reason(f"generate() in the traceback at line {tb.start_line}",
                                         f"第 {tb.start_line} 行的 traceback 中有 generate()")
            break
    else:
        if metrics is not None and metrics.last_step is not None:
            loss = next((s for s in metrics.series if s.name == "loss"), None)
            if metrics.last_step <= 1 or (loss is not None and loss.points == 0):
                facts["oom-when"] = "start"
                reasons["oom-when"] = Reason("no training step completed before the error", "报错前一个训练 step 都没有完成")
            elif loss is not None and loss.points >= 3:
                facts["oom-when"] = "mid"
                reasons["oom-when"] = Reason(f"training logged up to step {metrics.last_step:g} before the error",
                                             f"报错前训练日志已记录到第 {metrics.last_step:g} 步")
    return facts, reasons


def rank_causes(
    tree: TreeData,
    mode_id: str,
    facts: dict[str, str],
    fact_reasons: dict[str, Reason],
    signals: TextSignals,
    rule_boosts: dict[str, tuple[float, Reason]],
) -> list[RankedCause]:
    """The mode's causes, best first: base score, then fact adjustments, hints and rule cause boosts.

    Each cause gets its reasons in English (``reasons``) and Chinese (``reasons_zh``), in the same order.
    """
    mt = tree.modes.get(mode_id)
    if mt is None:
        return []
    scores: dict[str, float] = {}
    reasons: dict[str, list[Reason]] = {}
    for c in mt.causes:
        scores[c.id] = tree.base_score(c)
        reasons[c.id] = [Reason(f"base {scores[c.id]:.2f} ({c.basis})", f"基础分 {scores[c.id]:.2f}（{c.basis_zh}）")]
    for a in mt.adjust:
        if all(facts.get(k) == v for k, v in a.when.items()):
            scores[a.cause] += a.delta
            whys = [fact_reasons.get(k, Reason(f"{k}={v}", f"{k}={v}")) for k, v in a.when.items()]
            d = f"{'+' if a.delta >= 0 else ''}{a.delta:.2f}"
            reasons[a.cause].append(Reason(f"{d}: {a.reason} ({'; '.join(w.en for w in whys)})",
                                           f"{d}：{a.reason_zh}（{'；'.join(w.zh for w in whys)}）"))
    for i, h in enumerate(mt.hints):
        line = signals.first_line.get(f"hint:{mode_id}:{i}")
        if line is not None:
            scores[h.cause] += h.delta
            d = f"{'+' if h.delta >= 0 else ''}{h.delta:.2f}"
            reasons[h.cause].append(Reason(f"{d}: {h.reason} seen at line {line}", f"{d}：{h.reason_zh}（见第 {line} 行）"))
    for cause, (boost, why) in rule_boosts.items():
        if cause in scores:
            scores[cause] += boost
            reasons[cause].append(Reason(f"{boost:+.2f}: {why.en}", f"{boost:+.2f}：{why.zh}"))
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    return [
        RankedCause(cause_id=c, score=round(min(0.99, max(0.01, s)), 3), reasons=[r.en for r in reasons[c]],
                    reasons_zh=[r.zh for r in reasons[c]])
        for c, s in ranked
    ]


def follow_ups(tree: TreeData, modes: list[str], facts: dict[str, str], limit: int = 3) -> list[FollowUp]:
    """Questions for facts the ranked ``modes`` depend on and nothing has settled yet."""
    out: list[FollowUp] = []
    seen: set[str] = set()
    for mode_id in modes:
        mt = tree.modes.get(mode_id)
        if mt is None:
            continue
        for fact_id in mt.ask:
            if fact_id in facts or fact_id in seen:
                continue
            seen.add(fact_id)
            f = tree.facts[fact_id]
            out.append(FollowUp(id=fact_id, question_en=f.question_en, question_zh=f.question_zh,
                                options=list(f.options)))
            if len(out) >= limit:
                return out
    return out


def check_answers(tree: TreeData, answers: dict[str, str]) -> None:
    """Raise :class:`InputError` for an answer to a question that does not exist or a reply naming no option."""
    for fid, reply in answers.items():
        fact = tree.facts.get(fid)
        if fact is None:
            raise InputError(f"unknown follow-up id {fid!r}; the questions are: {', '.join(tree.facts)}")
        if parse_answer(fid, reply, tree) is None:
            raise InputError(f"could not read {reply!r} as an answer to {fid!r}; answer one of: {', '.join(fact.options)}")


def parse_answer(follow_up_id: str, text: str, tree: TreeData | None = None) -> str | None:
    """Map a free-text reply ("it's bf16 already", "就是bf16") to one of the question's options.

    The option mentioned last wins ("not fp16, bf16" → bf16); ``None`` when no option is recognised
    or the question id is unknown.
    """
    tree = tree or load_tree()
    fact = tree.facts.get(follow_up_id)
    if fact is None or not text:
        return None
    text = text[:2000]
    stripped = text.strip().lower()
    if stripped in fact.options:
        return stripped
    best: tuple[int, int, str] | None = None
    for option in fact.options:
        for p in [re2.escape(option), *fact.answers.get(option, [])]:
            for m in _compiled(p, False).finditer(text):
                key = (m.end(), m.end() - m.start(), option)
                if best is None or key[:2] > best[:2]:
                    best = key
    return best[2] if best else None
