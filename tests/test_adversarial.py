"""Hostile input: catastrophic-backtracking strings, a 50 MB single line, binary noise, empty/whitespace.

Each must return (no exception, no hang — pytest-timeout guards) with a clear notice or abstention.
No timing assertions: speed is measured in bench/.
"""

from __future__ import annotations

import os

import pytest
import re2

from assistant.signatures import Entry, PatternSet
from assistant.triage import triage

pytestmark = pytest.mark.timeout(120)


def test_backtracking_pattern_is_linear_with_re2_and_hyperscan():
    # (a+)+$ takes exponential time in a backtracking engine (Python `re`) on 'a'*n + '!'.
    evil = b"a" * 50000 + b"!"
    assert re2.compile(rb"(a+)+$").search(evil) is None
    ps = PatternSet([Entry("evil", r"(a+)+$"), Entry("evil2", r"(?:a|aa)+b")])
    assert list(ps.scan(evil)) == []
    assert ps.engine in ("hyperscan+re2", "re2")


def test_backtracking_bait_against_the_real_rules():
    text = "a" * 50000 + "!\n" + "loss " * 20000 + "\n" + "(" * 30000 + "\n" + "'loss': " * 10000
    result = triage(text)
    assert result.warnings == [] and result.input_lines == 4


def test_fifty_megabyte_single_line():
    line = ("x" * 1000 + " ") * 50_000  # ~50 MB, no newline
    result = triage(line + "CUDA out of memory")
    assert result.input_lines == 1
    assert any("pieces" in n for n in result.notices)
    assert result.candidates and result.candidates[0].failure_mode == "cuda-oom"
    ev = result.candidates[0].evidence[0]
    assert ev.line == 1 and len(ev.text) < 3000  # evidence text is truncated, not 50 MB


def test_binary_noise_is_reported_and_abstains_or_survives():
    noise = os.urandom(2_000_000)
    result = triage(noise)
    assert any("binary" in n for n in result.notices)
    assert result.warnings == []


def test_empty_input_abstains_with_notice():
    result = triage("")
    assert result.abstained and result.input_lines == 0
    assert any("empty" in n for n in result.notices)


def test_whitespace_only_abstains_with_notice():
    result = triage(" \n\t\n   \r\n" * 1000)
    assert result.abstained
    assert any("only whitespace" in n for n in result.notices)


def test_nul_bytes_inside_an_error_are_removed():
    result = triage(b"CUDA out\x00 of memory\x00\n")
    assert result.candidates[0].failure_mode == "cuda-oom"
    assert any("NUL" in n for n in result.notices)


def test_deeply_repeated_metric_keys_do_not_blow_up():
    line = "loss=1 " * 100000
    result = triage(line)
    assert result.input_lines == 1


def test_non_text_argument_is_a_clear_error():
    from assistant.errors import InputError

    with pytest.raises(InputError):
        triage(12345)  # type: ignore[arg-type]
