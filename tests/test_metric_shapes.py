"""key_values (the pairs the span scan ``_plan`` finds, which every metric line program is built from) gives the
pairs of the plain scan kept here as the reference, on known lines, their shapes and generated lines. That a
program made on one line of a shape reads every other line of it alike: tests/test_metric_programs.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assistant.metrics import (
    _DELIM_TABLE,
    _KEY_JUNK,
    _NOT_TRAINING,
    _NUM_START,
    _NUM_STR,
    _SPACE_KEYS,
    _VALUE_SKIP,
    KNOWN_KEYS,
    _num,
    _space_value,
    key_values,
)


def reference_key_values(line: str) -> list[tuple[str, float]]:
    """``(lowercase key, value)`` pairs of ``key: number`` / ``key=number`` / ``'key': number`` in a line.

    A linear scan with string methods (no regex): for each ``:`` or ``=``, the value is the number
    after it (quotes, ``[`` and ``(`` skipped) and the key the run of key characters before it,
    shortened word by word until it is a known metric name ("train loss" in "Epoch 3 train loss").
    """
    out: list[tuple[str, float]] = []
    seps: list[int] = []
    for ch in ":=":
        p = line.find(ch)
        while p >= 0:
            seps.append(p)
            p = line.find(ch, p + 1)
    seps.sort()
    prev_end = 0
    for i in seps:
        if i < prev_end:
            continue
        # the value: skip quotes/brackets, then the run of number characters (str.lstrip runs in C)
        window = line[i + 1 : i + 48]
        rest = window.lstrip(_VALUE_SKIP)
        if not rest or rest[0] not in _NUM_START:
            continue
        tail = rest[:32].lstrip(_NUM_STR)
        raw = rest[: min(32, len(rest)) - len(tail)]
        value = _num(raw) if raw else None
        if value is None:
            continue
        # the key: after the last delimiter before the separator, at most 48 characters
        e = i
        while e > prev_end and line[e - 1] in " \t'\"":
            e -= 1
        start = max(prev_end, e - 48)
        segment = line[start:e].translate(_DELIM_TABLE)  # every delimiter becomes NUL: one rfind finds the last
        key = line[start + segment.rfind("\0") + 1 : e].lower().lstrip(_KEY_JUNK).rstrip()
        while key and key not in KNOWN_KEYS and " " in key:
            dropped, key = key.split(" ", 1)
            if dropped in _NOT_TRAINING:
                key = ""  # "val loss", "eval loss": not the training series
            key = key.lstrip()
        if key:
            out.append((key, value))
        prev_end = i + 1 + (len(window) - len(rest)) + len(raw)
    found = {k for k, _ in out}
    low = None
    for kw in _SPACE_KEYS:
        if kw in found:
            continue
        low = low if low is not None else line.lower()
        out.extend(_space_value(line, low, kw))
    return out




TOKENS = ["loss", "grad_norm", "grad_l2_norm", "grad_l3_norm", "lr", "learning_rate", "step", "Step", "epoch",
          "val loss", "train loss", "eval", "iter", "tok/s", "tokens/s", "samples/s", "[Rank 0]", "[rank1]:",
          "'loss'", "{", "}", ": ", "=", ":", ", ", " | ", " ", "  ", "\t", "[", "]", "(", ")", "'", '"', "nan",
          "inf", "-inf", "1e-05", "3.25", "0.0001", "12", "7", "152,408", "2.0e+03", "İ", "ß", "x", "_", "/", "%",
          "9", "99", "0.5", "it/s", "s/it", "lm loss", "mem_alloc", "GiB"]
LINES = [
    "{'loss': 2.3456, 'grad_norm': 1.0234, 'learning_rate': 1.9990e-05, 'epoch': 0.0100}",
    "[Rank 0] step=10, skipped=0, lr=[1.999900e-05], mom=[(0.9, 0.999)]",
    "epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=99.1234, CurrSamplesPerSec=101.0000",
    "step 4200 | loss 1.83 | lr 3e-4 | tok/s 152,408 | grad_l2_norm: 3.5",
    " iteration      120/    1000 | lm loss: 2.300E+00 | grad norm: 1.234 | loss scale: 65536.0 |",
    "Epoch 3 train loss: 0.25 val loss: 0.31",
]


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """Equal pairs, NaN equal to NaN (``nan != nan`` would fail every line with a NaN loss)."""
    return [(k, repr(v)) for k, v in a] == [(k, repr(v)) for k, v in b]


def _digits(line: str, k: int) -> str:
    return "".join(str((int(c) + k) % 10) if c.isdigit() and c.isascii() else c for c in line)


def test_known_lines_and_their_shapes():
    for line in LINES:
        for k in range(10):
            variant = _digits(line, k)
            assert _same(key_values(variant), reference_key_values(variant)), variant


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30), st.lists(st.integers(0, 9), min_size=1, max_size=4))
def test_any_line_of_any_shape(tokens, shifts):
    line = "".join(tokens)
    for k in shifts:  # the same shape with other digits
        variant = _digits(line, k)
        assert _same(key_values(variant), reference_key_values(variant)), variant
