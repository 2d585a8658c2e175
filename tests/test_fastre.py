"""The ASCII fast path of assistant.fastre gives exactly re2's matches, for every pattern the rule path
compiles with it, on real pasted text (ASCII and not)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import re2

from assistant import fastre

MODULES = ("cases", "intent", "metrics", "normalise", "readings", "timeline", "tracebacks", "triage",
           "retrieval.tokenize")
DATA = Path(__file__).parent / "data"


def _patterns() -> list[fastre.Pattern]:
    found = []
    for name in MODULES:
        module = importlib.import_module(f"assistant.{name}")
        found += [v for v in vars(module).values() if isinstance(v, fastre.Pattern)]
    return found


def _lines(limit: int = 1200) -> list[str]:
    lines: list[str] = []
    for path in (DATA / "realworld" / "dev.jsonl", DATA / "triage_cases.jsonl"):
        for row in path.read_text(encoding="utf-8").splitlines():
            lines += [ln for ln in json.loads(row)["text"].splitlines() if ln.strip()]
    step = max(1, len(lines) // limit)
    return lines[::step] + ["", " ", "é", "loss 还没变 nan: 1.5", "{'loss': nan}"]


def _spans(m) -> object:
    return None if m is None else [m.span(i) for i in range(m.re.groups + 1)] + [m.group(0)]


def test_every_rule_path_pattern_uses_the_fast_path():
    assert fastre._FAST  # this google-re2 has the internals the fast path uses, and they behave as expected
    patterns = _patterns()
    assert len(patterns) > 100
    assert all(type(p) is fastre.Pattern for p in patterns)


def test_without_the_internals_patterns_are_re2s_own(monkeypatch):
    monkeypatch.setattr(fastre, "_FAST", False)
    p = fastre.compile(r"(\d+) it/s")
    assert type(p) is re2._Regexp and p.search("3 it/s").group(1) == "3"


def test_fast_path_matches_are_re2_matches():
    lines = _lines()
    assert any(not ln.isascii() for ln in lines) and sum(ln.isascii() for ln in lines) > 500
    checked = 0
    for p in _patterns():
        for ln in lines:
            for fast, slow in ((p.search, re2._Regexp.search), (p.match, re2._Regexp.match),
                               (p.fullmatch, re2._Regexp.fullmatch)):
                assert _spans(fast(ln)) == _spans(slow(p, ln)), (p.pattern, ln)
            checked += 1
    assert checked > 100_000


def test_fast_findall_is_re2s_findall():
    lines = _lines(600)
    text = "\n".join(lines)
    patterns = [p for p in _patterns() if not p.groups]
    patterns += [fastre.compile(x) for x in (r"", r"a*", r"\b", r"[\p{Han}]*", r"(?m)^", r"x*$")]  # empty matches
    assert any(p.pattern == fastre.compile(r"").pattern for p in patterns) and len(patterns) > 10
    for p in patterns:
        for t in [text, *lines[:200], "", "é", "训练 loss 还没变", "aé\n训x"]:
            assert p.findall(t) == re2._Regexp.findall(p, t), (p.pattern, t[:80])


def test_positions_bytes_and_other_methods_take_re2s_own_path():
    p = fastre.compile(r"(\d+) it/s")
    assert p.search("12 it/s and 34 it/s", 5).group(1) == "34"
    assert fastre.compile(rb"(\d+) it/s").search(b"7 it/s").group(1) == b"7"
    assert p.findall("1 it/s 2 it/s") == ["1", "2"]
    assert fastre.compile(p) is p
    assert type(fastre.compile(re2.compile("x"))) is fastre.Pattern


def test_byte_spans_are_re2s_finditer_spans():
    from assistant.triage import engine_for

    text = "\n".join(_lines(600)).encode("utf-8")
    entries = engine_for().patterns.entries
    patterns = [re2.compile(e.pattern.encode("utf-8")) for e in entries[:: max(1, len(entries) // 150)]]
    patterns += [re2.compile(x) for x in (rb"", rb"a*", rb"\b", rb"(?m)^", rb"x*$", rb"(?m)^.*loss.*$")]
    assert len(patterns) > 100
    for rx in patterns:
        for data in (text, b"", b"\xc3\xa9", "训练 loss\n还没变".encode("utf-8")):
            want = [m.span() for m in rx.finditer(data)]
            assert fastre.byte_spans(rx, data) == want, rx.pattern
            assert fastre.byte_spans(rx, data, 3) == want[:3], rx.pattern


def test_byte_spans_without_the_internals(monkeypatch):
    monkeypatch.setattr(fastre, "_FAST", False)
    rx = re2.compile(rb"\d+")
    assert fastre.byte_spans(rx, b"1 22 333") == [(0, 1), (2, 4), (5, 8)]
    assert fastre.byte_spans(rx, b"1 22 333", 2) == [(0, 1), (2, 4)]
