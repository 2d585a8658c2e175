"""Answer checks: realistic on-call inputs with what the answer must (and must not) say.

Labelled cases (:mod:`assistant.evaluate`) score only the failure mode. An answer check also asserts
on the content: the first failing rank named, a number computed from the input, the trend with its
steps, fix #1 about the real problem and not a band-aid, advice a fact contradicts gone. The file
(``tests/data/answer_checks.yaml``) is a list of::

    - id: short-id
      lang: en | zh
      answers: {precision: bf16}        # optional follow-up answers
      input: |
        ...
      expect:
        mode: [cuda-oom]                # acceptable first modes; [none] = no failure mode named
        says: ["rank 13", "5.91 GiB"]   # case-insensitive substrings of the rendered answer
        not_says: ["<secret>"]          # substrings that must not appear
        first_fix: 'regex'              # fix #1 (its text and code) must match
        not_first_fix: 'regex'          # ... and must not match
        absent: ['regex']               # no shown cause or fix may match
      known_gap: why it fails today   # optional: an expected failure in the test suite
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from assistant.diagnosis import Diagnosis
from assistant.errors import InputError


class Expect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: list[str] = Field(min_length=1)
    says: list[str] = []
    not_says: list[str] = []
    first_fix: str | None = None
    not_first_fix: str | None = None
    absent: list[str] = []


class AnswerCheck(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    topic: str = ""
    lang: str = "en"
    answers: dict[str, str] = {}
    input: str
    expect: Expect
    note: str = ""
    known_gap: str | None = Field(default=None, description="why the engine does not pass this check yet")


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    topic: str
    passed: bool
    failures: list[str] = []


def load_checks(path: str | Path) -> list[AnswerCheck]:
    """Read and validate an answer-check file; :class:`InputError` names what is wrong."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        checks = [AnswerCheck.model_validate(item) for item in data]
    except (OSError, yaml.YAMLError, TypeError, ValueError) as err:
        raise InputError(f"{path}: not a valid answer-check file: {err}") from None
    for c in checks:
        for p in [c.expect.first_fix, c.expect.not_first_fix, *c.expect.absent]:
            if p is not None:
                try:
                    re.compile(p)
                except re.error as err:
                    raise InputError(f"{path}: {c.id}: bad pattern {p!r}: {err}") from None
    return checks


def _fix_text(fix) -> str:
    return "\n".join(filter(None, [fix.text, fix.here, fix.code.code if fix.code else None]))


def judge(check: AnswerCheck, d: Diagnosis, rendered: str) -> CheckResult:
    """Every expectation of ``check`` that the diagnosis ``d`` (rendered as ``rendered``) fails."""
    e = check.expect
    failures: list[str] = []
    top = d.candidates[0] if d.candidates else None
    got = top.failure_mode if top else "none"
    if got not in e.mode:
        failures.append(f"first mode is {got}, expected one of {e.mode}")
    low = rendered.lower()
    failures += [f"does not say {s!r}" for s in e.says if s.lower() not in low]
    failures += [f"says {s!r}" for s in e.not_says if s.lower() in low]
    first = _fix_text(top.fixes[0]) if top and top.fixes else ""
    if e.first_fix and not re.search(e.first_fix, first):
        failures.append(f"fix #1 does not match {e.first_fix!r}: {first[:120]!r}")
    if e.not_first_fix and first and re.search(e.not_first_fix, first):
        failures.append(f"fix #1 is the band-aid {e.not_first_fix!r}: {first[:120]!r}")
    if top is not None:
        shown = [_fix_text(f) for f in top.fixes[:5]] + [c.text for c in top.causes[:4]]
        for p in e.absent:
            hit = next((s for s in shown if re.search(p, s)), None)
            if hit is not None:
                failures.append(f"shows contradicted advice {p!r}: {hit[:100]!r}")
    return CheckResult(id=check.id, topic=check.topic, passed=not failures, failures=failures)


def run_checks(checks: list[AnswerCheck], diagnose: Callable[[AnswerCheck], Diagnosis],
               render: Callable[[Diagnosis], str]) -> list[CheckResult]:
    """Diagnose and judge every check."""
    return [judge(c, d := diagnose(c), render(d)) for c in checks]
