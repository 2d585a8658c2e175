"""Trends in metric series, stated as an on-call engineer would: over which steps, by how much.

Points (single steps) are the metric stage's findings; this module looks at the whole series
(:attr:`SeriesSummary.samples`, evenly thinned) for behaviour that only shows over many steps:
steady growth of step time or decline of throughput (ratio, slope, since when), loss spikes that
recur with a period, a loss scale that keeps halving (FP16 overflow every step), and a gradient
norm that grows for many steps before the loss blows up.
"""

from __future__ import annotations

import math

from statistics import median

from assistant.models import MetricFinding, MetricsReport, SeriesPoint, Trend

MIN_POINTS = 8  # fewer logged points than this show no trend
GROWTH_RATIO = 1.5  # last level / first level for a steady rise (or its inverse for a decline)
STEADY_SHARE = 0.6  # share of consecutive level changes in the trend's direction
JUMP_SHARE = 0.6  # one jump between windows carrying this share of the whole change is a step change
PERIOD_TOLERANCE = 0.1  # spikes whose gaps differ by at most 10 % of the median gap are periodic
MIN_SPIKES = 3
MIN_PERIOD_POINTS = 5  # spikes closer than this many logged points apart are a divergence, not a period
COLLAPSE_HALVINGS = 4  # the loss scale halved at least this many times ...
PRECURSOR_RATIO = 5.0  # grad norm at least 5x its starting level before the blow-up
DATA_WAIT_SECONDS = 0.5  # a mean wait for the next batch above this (or ...
DATA_WAIT_SHARE = 0.25  # ... above this share of the step time) starves the GPU

_RISING = {"step_time"}
_FALLING = {"it/s", "samples_per_second", "samples/sec", "samples/s", "currsamplespersec", "tokens_per_sec", "tokens/s",
            "tokens_per_second", "tok/s", "throughput", "tflops", "throughput_tokens_per_sec", "tokens per second",
            "runningavgsamplespersec"}
_UNITS: dict[str, str] = {}  # step times come in s or ms depending on the log: shown without a unit


def find_trends(report: MetricsReport) -> list[Trend]:
    """Every trend the series of ``report`` show."""
    out: list[Trend] = []
    by_name = {s.name: s for s in report.series}
    for name, s in by_name.items():
        pts = [p for p in s.samples if p.value is not None]
        if name in _RISING or name in _FALLING:
            t = _monotone(name, pts, rising=name in _RISING)
            if t is not None:
                out.append(t)
        elif name == "data_time":
            t = _data_wait(pts, by_name.get("step_time"))
            if t is not None:
                out.append(t)
        elif name == "gpu_mem":
            t = _memory_growth(pts)
            if t is not None:
                out.append(t)
        elif name == "loss_scale":
            t = _collapse(pts, report)
            if t is not None:
                out.append(t)
    spikes = [f for f in report.findings if f.kind == "loss-spike" and f.step is not None]
    loss = by_name.get("loss")
    t = _periodic(spikes, _interval(loss.samples) if loss is not None else None)
    if t is not None:
        out.append(t)
    grad = by_name.get("grad_norm")
    blow = next((f for f in report.findings if f.kind == "nan-onset"), None) or next(
        (f for f in report.findings if f.kind == "loss-spike"), None)
    if grad is not None and blow is not None:
        t = _precursor(grad.samples, blow)
        if t is not None:
            out.append(t)
    if loss is not None and spikes and not any(t.kind == "periodic" for t in out):
        t = _transient(loss.samples, grad.samples if grad is not None else [], report.last_step is not None)
        if t is not None:
            out.append(t)
    if grad is not None and not any(t.kind == "precursor" for t in out) and any(
            f.kind == "grad-explosion" for f in report.findings):
        t = _surge(grad.samples, loss.samples if loss is not None else [], report.last_step is not None)
        if t is not None:
            out.append(t)
    return out


def _interval(samples: list[SeriesPoint]) -> float | None:
    """Median steps between logged points (of the thinned samples, so an upper bound on the logging interval)."""
    gaps = [b.step - a.step for a, b in zip(samples, samples[1:]) if b.step > a.step]
    return median(gaps) if gaps else None


def _level(values: list[float]) -> float:
    return median(values)


def _fmt(v: float, unit: str = "") -> str:
    """A level as people read it: 3 significant digits, but whole numbers below a million as they are."""
    text = f"{v:.0f}" if 100 <= abs(v) < 1e6 else f"{v:.3g}"
    return f"{text} {unit}".strip() if unit else text


def _about(v: float, unit: str = "") -> str:
    """A steady level rounded to 3 significant digits (3953.25 → "3950"): the noise is larger than the rest."""
    if v == 0 or not math.isfinite(v):
        return _fmt(v, unit)
    r = round(v, 2 - int(math.floor(math.log10(abs(v)))))
    return _fmt(r, unit) if abs(r) < 100 else f"{r:.0f} {unit}".strip()


def _monotone(name: str, pts: list[SeriesPoint], rising: bool) -> Trend | None:
    if len(pts) < MIN_POINTS:
        return None
    k = max(len(pts) // 8, 2)
    first, last = _level([p.value for p in pts[:k]]), _level([p.value for p in pts[-k:]])
    if first <= 0 or last <= 0:
        return None
    ratio = last / first
    if (ratio < GROWTH_RATIO) if rising else (ratio > 1 / GROWTH_RATIO):
        return None
    # steadiness: compare medians of consecutive windows, so one slow step is not a trend
    levels = [_level([p.value for p in pts[i:i + k]]) for i in range(0, len(pts) - k + 1, k)]
    moves = [b - a for a, b in zip(levels, levels[1:]) if b != a]
    along = sum(1 for d in moves if (d > 0) == rising)
    if not moves or along / len(moves) < STEADY_SHARE:
        return None
    # one jump between two windows that carries most of the change is a step change, not a trend
    starts = list(range(0, len(pts) - k + 1, k))
    jumps = [(abs(b - a), i) for i, (a, b) in enumerate(zip(levels, levels[1:]))]
    size, at = max(jumps) if jumps else (0.0, 0)
    if size >= JUMP_SHARE * abs(last - first) and at + 1 < len(starts):
        window = pts[starts[at + 1]:starts[at + 1] + k]
        before = _level([p.value for p in pts[starts[at]:starts[at] + k]])
        # the first point of the later window that is already at the new level
        onset = next((p for p in pts[starts[at]:starts[at + 1] + k] if (p.value - before) * (1 if rising else -1)
                      > 0.5 * abs(last - first)), window[0])
        label_en = "step time" if name == "step_time" else f"throughput ({name})"
        label_zh = "每步耗时" if name == "step_time" else f"吞吐（{name}）"
        # the two levels are the medians of everything before and after the onset, as a person reads them
        i = pts.index(onset)
        first, last = _level([p.value for p in pts[:i]] or [first]), _level([p.value for p in pts[i:]])
        ratio = last / first
        unit = _UNITS.get(name, "")
        first_s, last_s = _about(first, unit), _about(last, unit)
        en = (f"{label_en} jumped {ratio:.1f}× at step {onset.step:g} (about {first_s} → about {last_s}) and stayed "
              "there: something changed at that point (a restart with other settings or environment, another "
              "node, different data), not a cost that grows step by step.")
        zh = (f"{label_zh}在第 {onset.step:g} 步突然变为原来的 {ratio:.1f} 倍（约 {first_s} → 约 {last_s}）并一直保持："
              "是那个时间点发生了变化（换了设置或环境重启、换了节点、数据变了），而不是每步开销逐渐增长。")
        return Trend(kind="jump", series=name, start_step=onset.step, end_step=pts[-1].step, line=onset.line,
                     ratio=round(ratio, 3), en=en, zh=zh)
    # where it started: the first window clearly above (below) the starting level
    start = pts[0]
    for i in range(0, len(pts) - k + 1, k):
        lvl = _level([p.value for p in pts[i:i + k]])
        if (lvl > first * 1.1) if rising else (lvl < first / 1.1):
            start = pts[max(i - 1, 0)]
            break
    end = pts[-1]
    unit = _UNITS.get(name, "")
    span = end.step - start.step
    slope = (last - first) / span * 1000 if span > 0 else None
    label_en = "step time" if name == "step_time" else f"throughput ({name})"
    label_zh = "每步耗时" if name == "step_time" else f"吞吐（{name}）"
    if rising:
        en = (f"{label_en} rose steadily {ratio:.1f}× ({_fmt(first, unit)} → {_fmt(last, unit)}) from step "
              f"{start.step:g} to step {end.step:g}" + (f", about +{_fmt(slope, unit)} per 1000 steps" if slope else "")
              + ": a growing cost per step (accumulating state, a leak, growing inputs), not a one-off stall.")
        zh = (f"{label_zh}从第 {start.step:g} 步到第 {end.step:g} 步稳定上升了 {ratio:.1f} 倍（{_fmt(first, unit)} → "
              f"{_fmt(last, unit)}）" + (f"，约每 1000 步增加 {_fmt(slope, unit)}" if slope else "")
              + "：每一步的开销在持续增长（状态累积、内存泄漏、输入变长），不是偶发的卡顿。")
        kind = "growth"
    else:
        en = (f"{label_en} fell steadily to {ratio:.2f}× ({_fmt(first)} → {_fmt(last)}) from step {start.step:g} "
              f"to step {end.step:g}: a growing cost per step, not a one-off stall.")
        zh = (f"{label_zh}从第 {start.step:g} 步到第 {end.step:g} 步稳定下降到原来的 {ratio:.2f} 倍（{_fmt(first)} → "
              f"{_fmt(last)}）：每一步的开销在持续增长，不是偶发的卡顿。")
        kind = "decline"
    return Trend(kind=kind, series=name, start_step=start.step, end_step=end.step, line=start.line,
                 ratio=round(ratio, 3), en=en, zh=zh)


def _periodic(spikes: list[MetricFinding], interval: float | None) -> Trend | None:
    steps: list[float] = []
    for st in sorted({f.step for f in spikes if f.step is not None}):
        # a spike's after-effect (the next logged points still high) is the same episode, not a new spike
        if not steps or interval is None or st - steps[-1] >= MIN_PERIOD_POINTS * interval:
            steps.append(st)
    if len(steps) < MIN_SPIKES:
        return None
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    period = median(gaps)
    if period <= 0 or any(abs(g - period) > PERIOD_TOLERANCE * period for g in gaps):
        return None
    if interval is None or period < MIN_PERIOD_POINTS * interval:
        return None
    listed = ", ".join(f"{s:g}" for s in steps[:6])
    en = (f"loss spikes recur every {period:g} steps (steps {listed}): something periodic — a data shard or "
          "epoch boundary, a scheduled evaluation or checkpoint, an LR restart — not random bad batches.")
    zh = (f"loss 尖峰每隔 {period:g} 步重复出现（第 {listed} 步）：是周期性的原因——数据分片或 epoch 边界、"
          "定时的评估或保存、学习率重启——而不是随机的坏 batch。")
    first = min(spikes, key=lambda f: f.step or 0)
    return Trend(kind="periodic", series="loss", start_step=steps[0], end_step=steps[-1], line=first.line,
                 period=period, en=en, zh=zh)


def _overflow_step(p: SeriesPoint, report: MetricsReport) -> float:
    """The step an overflow line belongs to: the scaler reports inside ``optimizer.step()``, before the loop logs
    that step, so a step logged on the next two lines is its step (else the last one logged before it)."""
    later = [q.step for s in report.series for q in s.samples if p.line < q.line <= p.line + 2 and q.step > p.step]
    return min(later) if later else p.step


def _collapse(pts: list[SeriesPoint], report: MetricsReport) -> Trend | None:
    if len(pts) < 3:
        return None
    peak = max(pts, key=lambda p: p.value)
    after = pts[pts.index(peak):]
    low = min(after, key=lambda p: p.value)
    if low.value <= 0 or peak.value / low.value < 2 ** COLLAPSE_HALVINGS:
        return None
    peak = peak.model_copy(update={"step": _overflow_step(peak, report)})
    low = low.model_copy(update={"step": _overflow_step(low, report)})
    span = f"steps {peak.step:g}–{low.step:g}, lines {peak.line}–{low.line}"
    en = (f"the loss scale collapsed from {peak.value:g} to {low.value:g} ({span}): FP16 "
          "gradients overflow on (nearly) every step, so the scaler keeps halving and steps are skipped.")
    zh = (f"loss scale 从 {peak.value:g} 一路降到 {low.value:g}（第 {peak.step:g}–{low.step:g} 步，第 {peak.line}–{low.line} 行）：FP16 梯度几乎每一步都溢出，"
          "scaler 不断减半，step 被跳过。")
    return Trend(kind="collapse", series="loss_scale", start_step=None, end_step=None, line=peak.line,
                 ratio=round(low.value / peak.value, 6), en=en, zh=zh)


def _precursor(samples: list[SeriesPoint], blow: MetricFinding) -> Trend | None:
    before = [p for p in samples if p.value is not None and p.line < blow.line]
    if len(before) < 5:
        return None
    base = median(p.value for p in before[:3])
    run = 0
    for a, b in zip(before, before[1:]):
        run = run + 1 if b.value > a.value else 0
    peak = before[-1]
    if base <= 0 or run < 4 or peak.value / base < PRECURSOR_RATIO:
        return None
    # the onset: the first point of the final rise that left the baseline (2x), else where the rise began
    rise = before[-run - 1:]
    start = next((p for p in rise if p.value > 2 * base), rise[0])
    run = len(before) - before.index(start) - 1
    what = "the loss became NaN/inf" if blow.kind == "nan-onset" else "the blow-up"
    what_zh = "loss 变成 NaN/inf" if blow.kind == "nan-onset" else "爆炸"
    where = f"step {blow.step:g}" if blow.step is not None else f"line {blow.line}"
    where_zh = f"第 {blow.step:g} 步" if blow.step is not None else f"第 {blow.line} 行"
    ratio = peak.value / base
    en = (f"grad norm grew {ratio:.0f}× over {run} consecutive logged steps (from {start.value:.3g} at step "
          f"{start.step:g} to {peak.value:.3g} at step {peak.step:g}) before {what} at {where}: the gradients "
          "exploded first; the NaN is the symptom.")
    zh = (f"在{what_zh}（{where_zh}）之前，grad norm 连续 {run} 次上升、增长了 {ratio:.0f} 倍（从第 {start.step:g} 步的 "
          f"{start.value:.3g} 到第 {peak.step:g} 步的 {peak.value:.3g}）：先是梯度爆炸，NaN 只是症状。")
    return Trend(kind="precursor", series="grad_norm", start_step=start.step, end_step=peak.step, line=start.line,
                 ratio=round(ratio, 2), en=en, zh=zh)


MEMORY_GROWTH_RATIO = 1.5  # GPU memory allocated at the end at least 1.5x the start ...
MEMORY_RISES = 0.8  # ... having risen between at least 80 % of consecutive logged points


def _memory_growth(pts: list[SeriesPoint]) -> Trend | None:
    """GPU memory allocated that climbs step after step: a leak (tensors kept alive), not one large batch."""
    if len(pts) < 5:
        return None
    first, last = pts[0], pts[-1]
    rises = sum(b.value > a.value for a, b in zip(pts, pts[1:]))
    if first.value <= 0 or last.value < MEMORY_GROWTH_RATIO * first.value or rises < MEMORY_RISES * (len(pts) - 1):
        return None
    span = last.step - first.step
    per = (last.value - first.value) / span if span > 0 else None
    rate = f", about {per:.2g} more per step" if per else ""
    rate_zh = f"，每步约多 {per:.2g}" if per else ""
    en = (f"GPU memory allocated grew from {first.value:g} to {last.value:g} (steps {first.step:g}–{last.step:g}, lines "
          f"{first.line}–{last.line}){rate}: a leak — something keeps each step's tensors alive (a tensor or a view of "
          "the outputs stored in a list, a loss summed without .item()); a smaller batch only delays the OOM.")
    zh = (f"GPU 已分配显存从 {first.value:g} 增长到 {last.value:g}（第 {first.step:g}–{last.step:g} 步，第 {first.line}–{last.line} 行）"
          f"{rate_zh}：这是泄漏——有东西让每一步的张量一直存活（把张量或输出的视图存进 list、累加 loss 时没有用 .item()）；"
          "减小 batch 只会推迟 OOM。")
    return Trend(kind="memory-growth", series="gpu_mem", start_step=first.step, end_step=last.step, line=first.line,
                 ratio=round(last.value / first.value, 2), en=en, zh=zh)


def _at(p: SeriesPoint, stepped: bool) -> str:
    """Where a point is: its step when the log has steps, else its input line (an entry index is no step)."""
    return f"step {p.step:g}" if stepped else f"line {p.line}"


def _at_zh(p: SeriesPoint, stepped: bool) -> str:
    return f"第 {p.step:g} 步" if stepped else f"第 {p.line} 行"


SURGE_RATIO = 20.0  # grad norm peak at least 20x where it started ...
RECOVERED = 3.0  # ... and not back within 3x of it by the last logged point


def _surge(samples: list[SeriesPoint], loss: list[SeriesPoint], stepped: bool) -> Trend | None:
    """A gradient explosion stated with its numbers: from where to what peak, and what the loss did meanwhile."""
    pts = [p for p in samples if p.value is not None]
    if len(pts) < 3:
        return None
    peak = max(pts, key=lambda p: p.value)
    before = [p for p in pts if p.line < peak.line]
    if not before:
        return None
    start = min(before[:3], key=lambda p: p.value)
    if start.value <= 0 or peak.value / start.value < SURGE_RATIO:
        return None
    after = [p for p in pts if p.line > peak.line]
    if after and after[-1].value <= RECOVERED * start.value:
        return None  # back near where it started: a transient spike, not a divergence
    n = sum(1 for p in pts if start.line < p.line <= peak.line)

    def at(p: SeriesPoint) -> str:
        return f"{_at(p, stepped)}, line {p.line}" if stepped else _at(p, stepped)

    def at_zh(p: SeriesPoint) -> str:
        return f"{_at_zh(p, stepped)}，第 {p.line} 行" if stepped else _at_zh(p, stepped)

    en = (f"grad norm went from {start.value:g} ({at(start)}) to {peak.value:g} ({at(peak)}), "
          f"{peak.value / start.value:.0f}× in {n} logged point(s)")
    zh = (f"grad norm 从 {start.value:g}（{at_zh(start)}）升到 {peak.value:g}（{at_zh(peak)}），"
          f"{n} 个记录点内增长了 {peak.value / start.value:.0f} 倍")
    lv = [p for p in loss if p.value is not None and p.line >= start.line - 1]
    if len(lv) >= 2:
        first, last = lv[0], lv[-1]
        top = max(lv, key=lambda p: p.value)
        if first.value > 0 and top.value / first.value >= 1.5:
            en += f"; meanwhile the loss rose from {first.value:g} to {top.value:g}" + (
                f" and stayed at {last.value:g}" if last is not top and last.value >= 0.8 * top.value else "")
            zh += f"；同时 loss 从 {first.value:g} 升到 {top.value:g}" + (
                f"，之后停在 {last.value:g}" if last is not top and last.value >= 0.8 * top.value else "")
    en += ": the run diverged; this is not one noisy step."
    zh += "：训练已经发散，而不是某一步的噪声。"
    # the peak is the line that proves it (its start is quoted in the text)
    return Trend(kind="surge", series="grad_norm", start_step=start.step, end_step=peak.step, line=peak.line,
                 ratio=round(peak.value / start.value, 2), en=en, zh=zh)


TRANSIENT_RISE = 1.5  # a loss peak at least 1.5x the level before it ...
TRANSIENT_BACK = 1.25  # ... that is back within 1.25x of that level by the last point


def _transient(loss: list[SeriesPoint], grad: list[SeriesPoint], stepped: bool) -> Trend | None:
    """One loss spike that recovers on its own: a batch, not a divergence."""
    pts = [p for p in loss if p.value is not None]
    if len(pts) < 6:
        return None
    peak = max(pts, key=lambda p: p.value)
    before = [p for p in pts if p.line < peak.line]
    after = [p for p in pts if p.line > peak.line]
    if len(before) < 3 or len(after) < 2 or any(p.value is None for p in loss if p.line > before[0].line):
        return None
    base = median(p.value for p in before)
    last = after[-1]
    if base <= 0 or peak.value < TRANSIENT_RISE * base or last.value > TRANSIENT_BACK * base:
        return None
    g = next((p for p in grad if p.line == peak.line and p.value is not None), None)
    at, at_zh, by, by_zh = _at(peak, stepped), _at_zh(peak, stepped), _at(last, stepped), _at_zh(last, stepped)
    gn = f" (grad norm {g.value:.3g})" if g is not None else ""
    gn_zh = f"（grad norm {g.value:.3g}）" if g is not None else ""
    en = (f"the loss jumped from about {base:.3g} to {peak.value:.3g} at {at}{gn} and was back to {last.value:.3g} by {by}: "
          "one transient spike — a batch, not a divergence. Look at the samples fed at that step first; "
          "training settings that apply to every step are not what changed.")
    zh = (f"loss 在{at_zh}从约 {base:.3g} 跳到 {peak.value:.3g}{gn_zh}，到{by_zh}已回落到 {last.value:.3g}：这是一次性的尖峰——"
          "问题在某个 batch，而不是训练发散。先检查那一步喂进去的样本；对每一步都生效的训练设置并没有变化。")
    return Trend(kind="transient", series="loss", start_step=peak.step, end_step=last.step, line=peak.line,
                 ratio=round(peak.value / base, 2), en=en, zh=zh)


def _data_wait(pts: list[SeriesPoint], step_time) -> Trend | None:
    if len(pts) < MIN_POINTS:
        return None
    mean = sum(p.value for p in pts) / len(pts)
    worst = max(pts, key=lambda p: p.value)
    step_pts = [p for p in step_time.samples if p.value is not None] if step_time is not None else []
    share = mean / (sum(p.value for p in step_pts) / len(step_pts)) if step_pts else None
    if mean < DATA_WAIT_SECONDS and (share is None or share < DATA_WAIT_SHARE):
        return None
    slow = [p for p in pts if p.value > 10 * median(q.value for q in pts)]
    gaps = [b.step - a.step for a, b in zip(slow, slow[1:])]
    periodic = len(slow) >= 3 and len(set(gaps)) == 1
    typical = sum(p.value for p in slow) / len(slow) if slow else 0.0
    every = f"; the long waits, about {typical:.2g} s each, come every {median(gaps):g} steps" if periodic else ""
    every_zh = f"；长等待每次约 {typical:.2g} 秒，每隔 {median(gaps):g} 步出现一次" if periodic else ""
    en = (f"the training loop waits {mean:.3g} s per step on average for the next batch (up to {worst.value:.3g} s at "
          f"step {worst.step:g}){every}: data loading, not the GPU, sets the pace.")
    zh = (f"训练循环平均每步要等 {mean:.3g} 秒才拿到下一个 batch（第 {worst.step:g} 步最长 {worst.value:.3g} 秒）{every_zh}："
          "决定速度的是数据加载，而不是 GPU。")
    return Trend(kind="data-wait", series="data_time", start_step=pts[0].step, end_step=pts[-1].step, line=worst.line,
                 ratio=round(share, 3) if share is not None else None, en=en, zh=zh)
