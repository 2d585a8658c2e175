"""Hyperscan is only a prefilter: with RE2 alone (ARM, or TRAINFIX_NO_HYPERSCAN=1) every answer is the same.

Compared on every rule example, the team's triage cases and the real-world test split: same candidates,
confidences, evidence lines, causes and follow-ups, field for field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.signatures import PatternSet, hyperscan_module, load_rules
from assistant.triage import engine_for, triage

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def _texts() -> list[str]:
    texts = [ex for r in load_rules() for kind in ("match", "no_match") for ex in getattr(r.examples, kind)]
    for path in (DATA / "triage_cases.jsonl", DATA / "realworld" / "test.jsonl"):
        texts += [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return texts


def _answer(text: str) -> str:
    t = triage(text)
    return t.model_dump_json(exclude={"warnings"})


def test_forcing_re2_really_uses_re2(monkeypatch):
    monkeypatch.setenv("TRAINFIX_NO_HYPERSCAN", "1")
    assert hyperscan_module() is None
    assert engine_for().patterns.engine == "re2"


@pytest.mark.skipif(hyperscan_module() is None, reason="Hyperscan is not installed here: RE2 is the only path")
def test_re2_alone_gives_the_same_answers(monkeypatch):
    texts = _texts()
    assert len(texts) > 500
    with_hs = [_answer(t) for t in texts]
    assert engine_for().patterns.engine == "hyperscan+re2"
    monkeypatch.setenv("TRAINFIX_NO_HYPERSCAN", "1")
    assert engine_for().patterns.engine == "re2"
    differ = [i for i, t in enumerate(texts) if _answer(t) != with_hs[i]]
    assert differ == [], f"{len(differ)} input(s) answered differently, first: {texts[differ[0]][:200]!r}"


def test_a_hyperscan_failure_falls_back_to_re2():
    hs = hyperscan_module()
    if hs is None:
        pytest.skip("Hyperscan is not installed here")
    ps = PatternSet(engine_for().patterns.entries)

    class Refusing:
        def scan(self, *_a, **_k):
            raise hs.HyperscanError("database is not compatible with this CPU")

    ps._hs = Refusing()
    data = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    expected = sorted(engine_for().patterns.scan(data))
    assert sorted(ps.scan(data)) == expected and ps.engine == "re2"
