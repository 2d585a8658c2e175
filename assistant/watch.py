"""Diagnose a training log while it grows: the same rules and metric analysis as a pasted log, fed incrementally.

Data in, findings out, no I/O: a front-end (``trainfix watch``, the Trainer callback) feeds bytes or metric
records as they arrive and calls :meth:`Watcher.check`, which returns the findings not reported before.

- **Failures** are what :func:`assistant.triage.analyse` finds in everything fed so far: one finding per
  failure mode and run (``Watcher.reset`` starts a new run: a truncated or rotated log).
- **Early warnings** come before a failure: grad norm rising step after step, the FP16 loss scale halving
  again and again, step time creeping up, GPU memory reserved (or allocated) climbing. Each is watched
  point by point with a threshold from :class:`~assistant.config.Settings` (``TRAINFIX_WATCH_*``) and
  reported once per run.

State is bounded whatever the stream's length: the scanner keeps its head, tail and capped error lines,
the metric analyser thinned samples, and each early-warning detector a fixed window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from statistics import median
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assistant.config import Settings
from assistant.models import Candidate, Evidence, Reading, Triage
from assistant.normalise import display
from assistant.tree import Reason, TextSignals, rank_causes
from assistant.triage import Scanner, analyse, engine_for

__all__ = ["Thresholds", "WatchFinding", "Watcher", "record_line"]

# What each early warning is about, and the cause it points at (as the matching trend does in triage).
WARNING_MODE = {
    "divergence": ("gradient-explosion", "lr-too-high", 0.3),
    "grad-growth": ("gradient-explosion", "no-grad-clipping", 0.15),
    "loss-scale": ("nan-loss", "fp16-overflow", 0.4),
    "step-time": ("slow-training", "per-step-cost-growth", 0.5),
    "memory": ("cuda-oom", "step-tensors-kept-alive", 0.5),
}
WARNING_CONFIDENCE = 0.5  # a warning is a precursor, not a failure: shown below any failure the rules name
FAILURE_CONFIDENCE = 0.8  # a loss an order of magnitude above its start: the run has diverged
TREND_LINES_MIN = 2_000  # with nothing new, the whole analysis runs again after this many lines ...
TREND_LINES_MAX = 1_000_000  # ... doubling each time, up to this many
_RATE_SERIES = {"it/s", "samples_per_second", "samples/sec", "samples/s", "tokens_per_sec", "tokens/s",
                "tokens_per_second", "tok/s", "throughput", "throughput_tokens_per_sec"}


def _setting(name: str):
    """The default of ``Settings.watch_<name>``: the one place a watch threshold is declared."""
    return Settings.model_fields[f"watch_{name}"].default


@dataclass(frozen=True)
class Thresholds:
    """When a watched run is alerted on; defaults are :class:`~assistant.config.Settings`' (``TRAINFIX_WATCH_*``)."""

    min_confidence: float = _setting("min_confidence")
    grad_growth_steps: int = _setting("grad_growth_steps")
    grad_growth_ratio: float = _setting("grad_growth_ratio")
    loss_scale_halvings: int = _setting("loss_scale_halvings")
    step_time_window: int = _setting("step_time_window")
    step_time_ratio: float = _setting("step_time_ratio")
    memory_steps: int = _setting("memory_steps")
    memory_ratio: float = _setting("memory_ratio")
    loss_divergence_ratio: float = _setting("loss_divergence_ratio")

    @classmethod
    def from_settings(cls, settings: Settings) -> Thresholds:
        return cls(**{f.name: getattr(settings, f"watch_{f.name}") for f in fields(cls)})


class WatchFinding(BaseModel):
    """Something found in a watched run, reported once: a failure the rules or metrics name, or an early warning.

    ``triage`` holds the analysis at the time, with the finding's candidate first (turn it into a cited
    answer with :meth:`assistant.Assistant.explain`).
    """

    model_config = ConfigDict(extra="forbid")
    keys: list[str] = Field(description="what makes it the same finding: 'failure:<mode>' (every new mode found at "
                                        "once is one finding) or 'warning:<kind>:<series>'")
    kind: Literal["failure", "warning"]
    failure_mode: str
    step: float | None = Field(default=None, description="the logged step it was found at (or the last one before it)")
    line: int | None = Field(default=None, description="input line of its first evidence")
    en: str = Field(description="one line: what was found, where")
    zh: str
    triage: Triage


@dataclass
class _Warning:
    kind: str
    series: str
    step: float | None
    line: int
    text: str
    en: str
    zh: str
    failure: bool = False  # not a precursor: the run is broken already (a diverged loss)


def _at(step: float | None, line: int) -> tuple[str, str]:
    return (f"step {step:g}", f"第 {step:g} 步") if step is not None else (f"line {line}", f"第 {line} 行")


@dataclass
class _EarlyWarnings:
    """Per-series detectors with fixed windows; ``pending`` collects warnings until ``check`` takes them."""

    t: Thresholds
    pending: list[_Warning] = field(default_factory=list)
    _grad_prev: float | None = None
    _grad_run: int = 0
    _grad_from: tuple[float, float | None] | None = None  # (value, step) before the current rise
    _scale_peak: float | None = None
    _time_recent: dict[str, deque] = field(default_factory=dict)
    _time_bases: dict[str, list[float]] = field(default_factory=dict)
    _memory: dict[str, deque] = field(default_factory=dict)
    _loss_start: list[float] = field(default_factory=list)
    _diverged: bool = False

    def point(self, name: str, value: float, step: float | None, line: int, text: str) -> None:
        if not math.isfinite(value):
            return
        if name == "loss":
            self._loss(value, step, line, text)
        elif name == "grad_norm":
            self._grad(value, step, line, text)
        elif name == "loss_scale":
            self._scale(value, step, line, text)
        elif name == "step_time" or name in _RATE_SERIES:
            if value > 0:
                self._time(name, value if name == "step_time" else 1.0 / value, step, line, text)
        elif name in ("gpu_reserved", "gpu_mem"):
            self._mem(name, value, step, line, text)

    def _loss(self, x: float, step: float | None, line: int, text: str) -> None:
        """A loss an order of magnitude above where it started has diverged (no history of many points needed: the
        rolling checks of the metric stage need several, and a run at a far too high LR blows up at its second step)."""
        if len(self._loss_start) < 3:
            if not self._loss_start or x < self.t.loss_divergence_ratio * median(self._loss_start):
                self._loss_start.append(x)
                return
        base = median(self._loss_start)
        if self._diverged or base <= 0 or x < self.t.loss_divergence_ratio * base or x - base < 1.0:
            return
        self._diverged = True
        at_en, at_zh = _at(step, line)
        self.pending.append(_Warning(
            "divergence", "loss", step, line, text,
            f"the loss diverged: {x:.4g} at {at_en}, {x / base:.0f}× its starting level {base:.4g}.",
            f"loss 已发散：{at_zh}为 {x:.4g}，是起始水平 {base:.4g} 的 {x / base:.0f} 倍。", failure=True))

    def _grad(self, x: float, step: float | None, line: int, text: str) -> None:
        prev = self._grad_prev
        self._grad_prev = x
        if prev is None or x <= prev:
            self._grad_run, self._grad_from = 0, None
            return
        if self._grad_run == 0:
            self._grad_from = (prev, step)
        self._grad_run += 1
        start, _ = self._grad_from
        if (self._grad_run >= self.t.grad_growth_steps and start > 0 and x / start >= self.t.grad_growth_ratio):
            at_en, at_zh = _at(step, line)
            self.pending.append(_Warning(
                "grad-growth", "grad_norm", step, line, text,
                f"grad norm has risen for {self._grad_run} consecutive logged steps, {start:.3g} → {x:.3g} "
                f"({x / start:.1f}×) at {at_en}: gradients are growing before any NaN or spike.",
                f"grad norm 已连续 {self._grad_run} 个记录点上升，{start:.3g} → {x:.3g}（{x / start:.1f} 倍，{at_zh}）："
                "梯度在 NaN 或尖峰出现之前就在增长。"))
            self._grad_run = -10**9  # once per run of growth (reset() re-arms for a new run)

    def _scale(self, x: float, step: float | None, line: int, text: str) -> None:
        if x <= 0:
            return
        if self._scale_peak is None or x > self._scale_peak:
            self._scale_peak = x
            return
        halvings = math.log2(self._scale_peak / x)
        if halvings >= self.t.loss_scale_halvings - 1e-9:
            at_en, at_zh = _at(step, line)
            self.pending.append(_Warning(
                "loss-scale", "loss_scale", step, line, text,
                f"the loss scale fell from {self._scale_peak:g} to {x:g} ({halvings:.0f} halvings) by {at_en}: FP16 "
                "gradients keep overflowing; NaN loss usually follows.",
                f"loss scale 从 {self._scale_peak:g} 降到 {x:g}（减半 {halvings:.0f} 次，{at_zh}）：FP16 梯度不断溢出，"
                "通常接下来就是 NaN loss。"))
            self._scale_peak = math.inf  # once per run

    def _time(self, name: str, x: float, step: float | None, line: int, text: str) -> None:
        w = self.t.step_time_window
        base = self._time_bases.setdefault(name, [])
        if len(base) < w:
            base.append(x)
            return
        recent = self._time_recent.setdefault(name, deque(maxlen=w))
        if recent.maxlen is None:
            return  # reported already
        recent.append(x)
        if len(recent) < w:
            return
        b, now = median(base), median(recent)
        if b > 0 and now / b >= self.t.step_time_ratio:
            at_en, at_zh = _at(step, line)
            what = "step time" if name == "step_time" else f"time per step (from {name})"
            what_zh = "每步耗时" if name == "step_time" else f"每步耗时（由 {name} 换算）"
            self.pending.append(_Warning(
                "step-time", name, step, line, text,
                f"{what} crept up {now / b:.2f}× (median of the last {w} points vs the first {w}) by {at_en}: "
                "something makes every step slower.",
                f"{what_zh}上升到原来的 {now / b:.2f} 倍（最近 {w} 个点与最初 {w} 个点的中位数之比，{at_zh}）："
                "有东西让每一步都变慢了。"))
            self._time_recent[name] = deque()  # maxlen None: reported, stays quiet for this run

    def _mem(self, name: str, x: float, step: float | None, line: int, text: str) -> None:
        n = self.t.memory_steps
        window = self._memory.setdefault(name, deque(maxlen=n + 1))
        if window.maxlen is None:
            return
        window.append(x)
        if len(window) <= n:
            return
        values = list(window)
        rises = sum(b > a for a, b in zip(values, values[1:]))
        first = values[0]
        if first > 0 and rises >= 0.8 * n and x / first >= self.t.memory_ratio:
            at_en, at_zh = _at(step, line)
            what = "GPU memory reserved" if name == "gpu_reserved" else "GPU memory allocated"
            what_zh = "GPU 预留显存" if name == "gpu_reserved" else "GPU 已分配显存"
            self.pending.append(_Warning(
                "memory", name, step, line, text,
                f"{what} climbed in {rises} of the last {n} logged steps, {first:g} → {x:g} ({x / first:.2f}×) by "
                f"{at_en}: at this rate the run heads for an out-of-memory error.",
                f"{what_zh}在最近 {n} 个记录点中上升了 {rises} 次，{first:g} → {x:g}（{x / first:.2f} 倍，{at_zh}）："
                "照这个速度会显存不足。"))
            self._memory[name] = deque()


def record_line(record: Mapping[str, object], step: float | int | None = None) -> str:
    """One metric record (a Trainer ``on_log`` dict) as the log line the Trainer would print, with its step."""
    items = {k: v for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if step is not None:
        items = {**items, "step": step}
    return "{" + ", ".join(f"'{k}': {_num(v)}" for k, v in items.items()) + "}"


def _num(v: float | int) -> str:
    if isinstance(v, int):
        return str(v)
    return "nan" if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else repr(float(v))))


class Watcher:
    """Feed a run's output as it comes (``feed`` bytes, or ``feed_record`` metric dicts); ``check`` returns
    what is new. ``reset`` starts over for a new run (a truncated or rotated log)."""

    def __init__(self, thresholds: Thresholds | None = None, *, kb_dir: Path | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self.engine = engine_for(kb_dir)
        self.runs = 0
        self.reported: set[str] = set()
        self.lines = 0
        self._start()

    def _start(self) -> None:
        self.scanner = Scanner(engine=self.engine)
        self.early = _EarlyWarnings(self.thresholds)
        self.scanner.metrics.on_point = self.early.point
        self.reported = set()
        self._dirty = False
        self._signature_seen: tuple = ()
        self._analysed_lines = 0
        self.runs += 1

    def _signature(self) -> tuple:
        s = self.scanner
        return (sum(h.count for h in s.hits.values()), len(s.metrics.findings), len(s.metrics.finding_lines),
                len(s.outside), len(s.signals.first_line), len(s.flagged), s.flagged_dropped,
                len(s.metrics.series), s.metrics.last_step is None)

    def reset(self) -> None:
        """A new run: forget everything seen (the same failure in the new run is reported again)."""
        self._start()

    def feed(self, data: bytes) -> None:
        """Raw bytes of the log, in any pieces (a partial last line waits for its newline)."""
        if data:
            self.scanner.feed(data)
            self._dirty = True

    def feed_record(self, record: Mapping[str, object], step: float | int | None = None) -> None:
        """One metric record (e.g. the Trainer's ``on_log`` dict), analysed as its log line would be."""
        self.feed((record_line(record, step) + "\n").encode())

    def finish(self) -> list[WatchFinding]:
        """The stream ended: flush a last line without a newline and return what is new."""
        self.scanner.finish()
        self._dirty = True
        return self.check()

    def check(self) -> list[WatchFinding]:
        """Findings not reported before in this run (failures first, then early warnings)."""
        warnings, self.early.pending = self.early.pending, []
        if not self._dirty and not warnings:
            return []
        self._dirty = False
        # The full analysis costs about a second on a large state: run it when the scan saw something new (a rule
        # hit, a metric finding, an error line), and for trends over many steps at doubling intervals of lines.
        signature = self._signature()
        lines = self.scanner.chunker.stats.lines
        due = lines - self._analysed_lines >= min(TREND_LINES_MAX, max(TREND_LINES_MIN, self._analysed_lines))
        if signature == self._signature_seen and not due and not warnings:
            return []
        self._signature_seen, self._analysed_lines = signature, lines
        result = analyse(self.scanner)
        out: list[WatchFinding] = []
        new = [c for c in result.candidates if c.confidence >= self.thresholds.min_confidence
               and f"failure:{c.failure_mode}" not in self.reported]
        if new:  # modes found together are one alert: the root (ranked first by triage) leads, the rest follow it
            keys = [f"failure:{c.failure_mode}" for c in new]
            self.reported.update(keys)
            out.append(self._failure(new, result, keys))
        for w in warnings:
            mode = WARNING_MODE[w.kind][0]
            key = f"failure:{mode}" if w.failure else f"warning:{w.kind}:{w.series}"
            if key in self.reported:
                continue
            self.reported.add(key)
            out.append(self._warning(w, result, key))
        return out

    # -- findings ------------------------------------------------------------------------------

    def _failure(self, new: list[Candidate], result: Triage, keys: list[str]) -> WatchFinding:
        cand = new[0]
        first = min(cand.evidence, key=lambda e: e.line) if cand.evidence else None
        step = self._step(result, first)
        where_en, where_zh = (_at(step, first.line) if first is not None else ("the end", "末尾"))
        near = "" if step is None or _finding_step(result, first) is not None else "after "
        near_zh = "" if not near else "之后"
        also = [c.failure_mode for c in new[1:]]
        en = f"{cand.failure_mode} {near or 'at '}{where_en}" + (f" (line {first.line})" if first and step is not None else "")
        zh = f"{cand.failure_mode}：{where_zh}{near_zh}" + (f"（第 {first.line} 行）" if first and step is not None else "")
        if also:
            en += f"; also {', '.join(also)}"
            zh += f"；另有 {', '.join(also)}"
        ordered = new + [c for c in result.candidates if c not in new]
        focused = result.model_copy(update={"candidates": ordered})
        return WatchFinding(keys=keys, kind="failure", failure_mode=cand.failure_mode,
                            step=step, line=first.line if first else None, en=en, zh=zh, triage=focused)

    def _step(self, result: Triage, ev: Evidence | None) -> float | None:
        exact = _finding_step(result, ev)
        if exact is not None or ev is None or result.metrics is None:
            return exact
        # An error line carries no step: the last step logged before it.
        before = [p.step for s in result.metrics.series for p in s.samples if p.line <= ev.line]
        return max(before) if before else result.metrics.last_step

    def _warning(self, w: _Warning, result: Triage, key: str) -> WatchFinding:
        mode, cause, delta = WARNING_MODE[w.kind]
        why = Reason(f"early warning at line {w.line}: {w.series}", f"第 {w.line} 行的预警：{w.series}")
        causes = rank_causes(self.engine.tree, mode, dict(result.facts), {}, TextSignals(), {cause: (delta, why)})
        ev = Evidence(line=w.line, text=display(w.text), match=f"{w.kind} of {w.series}", source=f"watch:{w.kind}",
                      strength="medium")
        cand = Candidate(failure_mode=mode, confidence=FAILURE_CONFIDENCE if w.failure else WARNING_CONFIDENCE,
                         evidence=[ev], causes=causes, route="metrics")
        reading = Reading(kind=f"watch-{w.kind}", modes=[mode], line=w.line, en=w.en, zh=w.zh)
        focused = result.model_copy(update={"candidates": [cand], "readings": [reading], "follow_up": [],
                                            "abstained": False})
        return WatchFinding(keys=[key], kind="failure" if w.failure else "warning", failure_mode=mode, step=w.step,
                            line=w.line, en=w.en, zh=w.zh, triage=focused)


def _finding_step(result: Triage, ev: Evidence | None) -> float | None:
    """The step a metric finding or trend on the evidence's line was logged at."""
    if ev is None or result.metrics is None:
        return None
    for f in result.metrics.findings:
        if f.line == ev.line and f.step is not None:
            return f.step
    for s in result.metrics.series:
        for p in s.samples:
            if p.line == ev.line:
                return p.step
    return None
