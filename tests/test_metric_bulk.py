"""A long log's metric points are analysed in bulk (``MetricsAnalyser.flush``: numpy screens every point, the check
itself runs on those that pass). Point by point (``batch=False``) is the reference: the same findings (kind, step,
line, value, baseline, detail, in the same order and with the same five kept of a kind), series summaries, samples
and state must come out, whatever the series do and wherever the flushes fall."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import assistant.metrics as M
from assistant.metrics import MetricsAnalyser
from assistant.normalise import split_prefix


def _state(a: MetricsAnalyser) -> str:
    report = a.report().model_dump()
    s = {name: (x.points, x.finite, list(x.window), x.base, x.dropped, x.grew, list(x.trend), list(x.recent),
                x.stride, x.samples) for name, x in a.series.items()}
    return repr((report, sorted(a.formats), a.entries, a.last_step, a._epoch, sorted(a.finding_lines.items()),
                 a._counts, s))


def _run(lines: list[str], flush_every: int = 0) -> tuple[str, str]:
    bulk, ref = MetricsAnalyser(), MetricsAnalyser(batch=False)
    for number, line in enumerate(lines, 1):
        rank, body = split_prefix(line)
        bulk.feed(number, body, rank)
        ref.feed(number, body, rank)
        if flush_every and number % flush_every == 0:
            bulk.flush()
    return _state(bulk), _state(ref)


def _series(rng: random.Random, n: int, events: list[str]) -> list[str]:
    """A multi-rank training log: HF dict lines, DeepSpeed throughput lines and tqdm bars, with ``events``."""
    lines = []
    loss, gnorm, rate, step_time = 2.5, 1.0, 100.0, 0.5
    spike_at = {rng.randrange(n) for _ in range(3)} if "spike" in events else set()
    nan_at = {rng.randrange(n) for _ in range(7)} if "nan" in events else set()
    drop_from = rng.randrange(n // 2, n) if "drop" in events else n + 1
    grow_from = rng.randrange(n // 3, n) if "growth" in events else n + 1
    slow_from = rng.randrange(n // 2, n) if "slow" in events else n + 1
    for step in range(1, n + 1):
        loss = max(0.05, loss * 0.999 + rng.gauss(0, 0.01))
        shown = loss * (rng.uniform(3, 8) if step in spike_at else 1.0)
        if "spike" in events and rng.random() < 0.02:
            shown = loss * rng.uniform(1.03, 1.5)  # near the check's first threshold: the screen must let it through
        if step in nan_at:
            shown = rng.choice([math.nan, math.inf])
        g = gnorm * (1.25 ** (step - grow_from) if step >= grow_from else 1.0) * rng.uniform(0.9, 1.1)
        if "jump" in events and rng.random() < 0.01:
            g *= rng.uniform(20, 200)
        if step in nan_at and rng.random() < 0.5:
            g = rng.choice([math.nan, math.inf])
        rank = rng.randrange(3) if "ranks" in events else 0
        lines.append(f"[rank{rank}]: {{'loss': {shown!r}, 'grad_norm': {g!r}, 'learning_rate': {2e-5 * (1 - step / n)!r}, "
                     f"'epoch': {step / n:.4f}}}")
        r = rate * (rng.uniform(0.3, 0.5) if step >= drop_from else 1.0) * rng.uniform(0.95, 1.05)
        lines.append(f"[Rank {rank}] step={step}, RunningAvgSamplesPerSec={r!r}, CurrSamplesPerSec={r * 1.01!r}")
        t = step_time * (rng.uniform(2.0, 3.0) if step >= slow_from else 1.0) * rng.uniform(0.95, 1.05)
        lines.append(f"step {step} | step_time: {t!r}")
        if rng.random() < 0.3:
            lines.append(f"{step * 100 // n:3d}%|##   | {step}/{n} [00:10<00:20, {rng.uniform(1.4, 1.6):.2f}it/s]")
    return lines


EVENTS = ["spike", "nan", "drop", "growth", "slow", "jump", "ranks"]


@pytest.mark.parametrize("events", [[], ["spike"], ["nan"], ["drop", "slow"], ["growth"], ["jump"], EVENTS,
                                    ["ranks", "nan", "spike"]])
def test_bulk_is_point_by_point(events):
    rng = random.Random(len(events) * 7 + sum(map(len, events)))
    lines = _series(rng, 1500, events)
    bulk, ref = _run(lines)
    assert bulk == ref
    # flushed every few hundred lines, as the scanner does after each chunk
    bulk, ref = _run(lines, flush_every=rng.randrange(200, 900))
    assert bulk == ref


def test_bulk_screen_runs_and_finds():
    """The long series go through the numpy screen (not point by point) and the events are found there."""
    rng = random.Random(5)
    lines = _series(rng, 1200, ["spike", "drop", "growth", "nan"])
    a = MetricsAnalyser()
    calls = []
    original = MetricsAnalyser._bulk

    def spy(self, s, name, points):
        calls.append((name, len(points)))
        return original(self, s, name, points)

    MetricsAnalyser._bulk = spy
    try:
        for number, line in enumerate(lines, 1):
            rank, body = split_prefix(line)
            a.feed(number, body, rank)
        kinds = {f.kind for f in a.report().findings}
    finally:
        MetricsAnalyser._bulk = original
    assert {name for name, _ in calls} >= {"loss", "grad_norm", "runningavgsamplespersec", "step_time"}
    assert {"loss-spike", "throughput-drop", "grad-explosion", "nan-onset"} <= kinds


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.sampled_from(EVENTS), max_size=4, unique=True),
       st.integers(M.WARM, 900), st.integers(0, 400), st.integers(1, 300))
def test_any_series_any_flushes(seed, events, n, flush_every, bulk_from):
    """Random series, random flush points and bulk thresholds down to a single point."""
    lines = _series(random.Random(seed), n, events)
    old = M.BULK_FROM
    M.BULK_FROM = bulk_from
    try:
        bulk, ref = _run(lines, flush_every)
    finally:
        M.BULK_FROM = old
    assert bulk == ref


def test_flat_and_repeated_values():
    """Ties everywhere (a loss that does not move, a rate stuck at one value): medians and screens on equal values."""
    lines = []
    for step in range(1, 800):
        loss = 1.0 if step % 97 else 9.0
        rate = 50.0 if step < 500 else 20.0
        lines.append(f"{{'loss': {loss}, 'grad_norm': {0.0 if step % 50 else 5.0}, 'epoch': 1.0}}")
        lines.append(f"step={step}, samples/sec={rate}")
    bulk, ref = _run(lines)
    assert bulk == ref
    assert "throughput-drop" in bulk and "loss-spike" in bulk


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 5000), st.integers(0, 511), st.sampled_from([1, 2, 4, 8, 64]), st.integers(0, 3000))
def test_bulk_samples_are_those_kept_point_by_point(p0, kept, stride, n):
    """Every stride-th point, the stride doubling when the samples fill up: in bulk as point by point."""
    ref = M._Series("loss", None, points=p0, stride=stride, samples=[(float(i), 0.0, i, (None, "")) for i in range(kept)])
    bulk = M._Series("loss", None, points=p0, stride=stride, samples=list(ref.samples))
    points = [(float(i), None, 10_000 + i, None, (None, str(i)), None, i) for i in range(n)]
    for value, step, number, _, text, _, _ in points:
        ref.points += 1
        ref.sample(step, value, number, text)
    MetricsAnalyser._bulk_samples(bulk, points, list(range(n)), p0)
    assert (bulk.samples, bulk.stride) == (ref.samples, ref.stride)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.binary(max_size=80).map(lambda b: b.replace(b"\x00", b"\n")), st.lists(st.integers(0, 80), max_size=12),
       st.integers(1, 10_000))
def test_line_numbers_of_many_spans_are_counted_the_same(data, starts, first_line):
    """The one-pass scanner numbers a chunk's metric lines with numpy when there are many: as counting does."""
    import assistant.triage as T

    spans = [(s, s) for s in sorted({min(s, len(data)) for s in starts})]
    counted = T._lines_of(data, spans, first_line)
    old = T.BULK_LINES
    T.BULK_LINES = 0
    try:
        indexed = T._lines_of(data, spans, first_line)
    finally:
        T.BULK_LINES = old
    assert indexed == counted
    for (number, start, end), (s, _) in zip(counted, spans):
        assert start <= s <= end and b"\n" not in data[start:end]
        assert number == first_line + data.count(b"\n", 0, s)
