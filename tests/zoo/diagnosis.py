"""Check what `assistant.triage` makes of a zoo log against the case's expectations."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .catalogue import CaseSpec, lines_of


@dataclass
class DiagnosisCheck:
    """The diagnosis of one log and everything in it that disagrees with the case."""

    case: CaseSpec
    available: bool
    modes: list[str] = field(default_factory=list)
    abstained: bool = False
    evidence_lines: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    triage: Any = None

    @property
    def ok(self) -> bool:
        return self.available and not self.problems

    def summary(self) -> str:
        if not self.available:
            return "assistant.triage not available"
        got = ", ".join(self.modes) or ("abstained" if self.abstained else "no candidates")
        if self.ok:
            return f"ok — {got} (evidence lines {self.evidence_lines})"
        return f"WRONG — got [{got}], expected {self.case.failure_mode}: " + "; ".join(self.problems)


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def _as_displayed(line: str) -> str:
    """The line as a terminal shows it: last '\r' redraw of a progress bar, no ANSI styling codes."""
    tail = line.rstrip("\r").rsplit("\r", 1)[-1]
    return _ANSI.sub("", tail)


def check_diagnosis(text: str, case: CaseSpec) -> DiagnosisCheck:
    """Run the triage on `text` and list every way it misses `case`'s failure mode or evidence."""
    try:
        from assistant.triage import triage
    except ModuleNotFoundError as err:
        if err.name not in ("assistant.triage", "assistant"):
            raise  # the module exists but is broken: that must fail loudly
        return DiagnosisCheck(case, available=False)
    result = triage(text)
    check = DiagnosisCheck(
        case, available=True, triage=result, abstained=result.abstained,
        modes=[c.failure_mode for c in result.candidates],
    )
    if result.abstained or not result.candidates:
        check.problems.append("no diagnosis (abstained)" if result.abstained else "no candidates")
        return check
    first = result.candidates[0]
    if first.failure_mode != case.failure_mode:
        check.problems.append(f"first candidate is {first.failure_mode}, not {case.failure_mode}")
    lines = lines_of(text)
    pointed: list[str] = []
    for ev in first.evidence:
        check.evidence_lines.append(ev.line)
        if not 1 <= ev.line <= len(lines):
            check.problems.append(f"evidence line {ev.line} is outside the log (1..{len(lines)})")
            continue
        shown = _as_displayed(lines[ev.line - 1])
        if ev.text.rstrip("…").strip() not in shown:
            check.problems.append(f"evidence text {ev.text!r} is not on line {ev.line}: {shown!r}")
        pointed.append(shown)
    for expected in case.evidence:
        if not any(expected.matches(line) for line in pointed):
            check.problems.append(
                f"no evidence line {expected.describe()} (evidence points at lines {check.evidence_lines})"
            )
    return check
