"""Scoring of a triage predictor on labelled cases (JSON lines ``{"text", "labels", "lang"}``).

``labels`` lists the acceptable failure-mode ids; an empty list means out of scope (the predictor
should abstain). Any ``predict(text) -> (ranked mode ids, abstained)`` can be scored, so the same
scorer serves the rule-first triage, the full assistant and a retrieval-only baseline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from assistant.errors import InputError

Predict = Callable[[str], tuple[list[str], bool]]


class Case(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str
    labels: list[str] = []
    lang: str | None = None
    kind: str | None = None
    source: str | None = None


class ModeScore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: str
    cases: int
    top1: int
    top3: int


class Miss(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int
    labels: list[str]
    predicted: list[str]
    abstained: bool
    text: str


class Report(BaseModel):
    """Accuracy of a predictor: top-1/top-3 over in-scope cases, abstention quality over all cases."""

    model_config = ConfigDict(extra="forbid")
    cases: int
    in_scope: int
    out_of_scope: int
    top1: float = Field(description="in-scope cases whose first prediction is an acceptable mode (no abstention)")
    top3: float = Field(description="in-scope cases with an acceptable mode among the first three")
    abstention_precision: float = Field(description="abstentions that were on out-of-scope cases")
    abstention_recall: float = Field(description="out-of-scope cases the predictor abstained on")
    abstention_accuracy: float = Field(description="cases where the abstain / answer decision was right")
    abstentions: int
    per_mode: list[ModeScore]
    by_lang: dict[str, dict[str, float]] = {}
    by_kind: dict[str, dict[str, float]] = Field(
        default={}, description="per kind (error / log / question / out-of-scope): cases, top-1, top-3, declined"
    )
    in_scope_declined: float = Field(default=0.0, description="in-scope cases answered 'no confident match'")
    out_of_scope_declined: float = Field(default=0.0, description="out-of-scope cases correctly declined")
    misses: list[Miss] = []


def load_cases(path: str | Path) -> list[Case]:
    """Read a JSON-lines case file; :class:`InputError` names the file and line of a bad record."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"case file not found: {path}") from None
    cases: list[Case] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cases.append(Case.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError) as err:
            raise InputError(f"{path}:{n}: not a valid case: {err}") from None
    return cases


def _ratio(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def evaluate(cases: Iterable[Case], predict: Predict, keep_misses: int = 50,
             before_each: Callable[[Case], None] | None = None) -> Report:
    """Run ``predict`` on every case and score it (``before_each(case)`` runs first, e.g. to leave
    the case's own thread out of the case memory)."""
    cases = list(cases)
    kinds: dict[str, list[int]] = {}  # cases, top1, top3, declined
    in_scope_declined = 0
    in_scope = top1 = top3 = 0
    abstained_n = abstained_right = out_scope_abstained = decisions_right = 0
    per_mode: dict[str, list[int]] = {}
    by_lang: dict[str, list[int]] = {}
    misses: list[Miss] = []
    for i, case in enumerate(cases):
        if before_each is not None:
            before_each(case)
        ranked, abstained = predict(case.text)
        ranked = [] if abstained else list(ranked)
        labels = set(case.labels)
        scope = bool(labels)
        hit1 = bool(ranked) and ranked[0] in labels
        hit3 = bool(labels & set(ranked[:3]))
        lang = case.lang or "?"
        row = by_lang.setdefault(lang, [0, 0, 0, 0])  # in-scope, top1, decisions, decisions right
        if scope:
            in_scope += 1
            top1 += hit1
            top3 += hit3
            row[0] += 1
            row[1] += hit1
            for mode in labels:
                s = per_mode.setdefault(mode, [0, 0, 0])
                s[0] += 1
                s[1] += hit1
                s[2] += hit3
        krow = kinds.setdefault(case.kind or ("out-of-scope" if not scope else "?"), [0, 0, 0, 0])
        krow[0] += 1
        krow[1] += hit1 if scope else (1 if abstained else 0)
        krow[2] += hit3 if scope else (1 if abstained else 0)
        krow[3] += bool(abstained)
        if scope and abstained:
            in_scope_declined += 1
        if abstained:
            abstained_n += 1
            abstained_right += not scope
        if not scope and abstained:
            out_scope_abstained += 1
        right = (abstained and not scope) or (not abstained and scope)
        decisions_right += right
        row[2] += 1
        row[3] += right
        if (scope and not hit1) or (not scope and not abstained):
            if len(misses) < keep_misses:
                misses.append(Miss(index=i, labels=sorted(labels), predicted=ranked[:3], abstained=abstained,
                                   text=case.text[:200]))
    out_scope = len(cases) - in_scope
    return Report(
        cases=len(cases),
        in_scope=in_scope,
        out_of_scope=out_scope,
        top1=_ratio(top1, in_scope),
        top3=_ratio(top3, in_scope),
        abstention_precision=_ratio(abstained_right, abstained_n),
        abstention_recall=_ratio(out_scope_abstained, out_scope),
        abstention_accuracy=_ratio(decisions_right, len(cases)),
        abstentions=abstained_n,
        per_mode=[ModeScore(mode=m, cases=v[0], top1=v[1], top3=v[2]) for m, v in sorted(per_mode.items())],
        by_lang={k: {"in_scope": v[0], "top1": _ratio(v[1], v[0]), "abstention_accuracy": _ratio(v[3], v[2])}
                 for k, v in sorted(by_lang.items())},
        by_kind={k: {"cases": v[0], "top1": _ratio(v[1], v[0]), "top3": _ratio(v[2], v[0]),
                     "declined": _ratio(v[3], v[0])} for k, v in sorted(kinds.items())},
        in_scope_declined=_ratio(in_scope_declined, in_scope),
        out_of_scope_declined=_ratio(out_scope_abstained, out_scope),
        misses=misses,
    )


def triage_predictor() -> Predict:
    """``predict`` for the rule-first triage (``assistant.triage.triage``)."""
    from assistant.triage import triage

    def predict(text: str) -> tuple[list[str], bool]:
        result = triage(text)
        return [c.failure_mode for c in result.candidates], result.abstained

    return predict
