"""The readings skip a pattern found nowhere in the kept lines' joined text: the readings are exactly those of
trying every pattern on every line, on real logs and pastes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant import fastre, readings
from assistant.normalise import split_prefix
from assistant.tracebacks import KeptLine

DATA = Path(__file__).parent / "data"


def _kept(text: str) -> list[KeptLine]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        rank, body = split_prefix(line[:4000])
        out.append(KeptLine(n, rank, body))
    return out


def _texts() -> list[str]:
    return [json.loads(row)["text"] for name in ("realworld/dev.jsonl", "triage_cases.jsonl")
            for row in (DATA / name).read_text(encoding="utf-8").splitlines()]


def test_prefiltered_readings_are_the_readings(monkeypatch):
    texts = _texts()
    monkeypatch.setattr(readings, "PREFILTER_FROM", 0)  # every text through the prefilter, however short
    fast = [readings.read_numbers(_kept(t), 1000.0) for t in texts]
    monkeypatch.setattr(readings._Lines, "may_match", lambda self, pattern: True)
    slow = [readings.read_numbers(_kept(t), 1000.0) for t in texts]
    assert fast == slow
    assert sum(map(len, fast)) > 50  # the texts do hold readings


@pytest.mark.parametrize("pattern, lines, found", [
    (r"^loss", ["x", "loss 1"], True),  # ^ at a line start that is not the text's start
    (r"nan$", ["loss nan", "ok"], True),  # $ at a line end that is not the text's end
    (r"\bstep\b", ["a", "step"], True),
    (r"(?i)OOM", ["oom here"], True),
    (r"absent", ["a", "b"], False),
])
def test_may_match(pattern, lines, found):
    kept = readings._Lines([KeptLine(i, None, b) for i, b in enumerate(lines, 1)])
    assert kept.may_match(fastre.compile(pattern)) is found
    assert (readings._first(kept, fastre.compile(pattern)) is not None) is found
