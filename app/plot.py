"""One picture of a log's metric series against step, with the onset of each finding marked.

Shared by the web chat and (later) Slack: ``metrics_png(report)`` returns PNG bytes, or ``None``
when the input held no series worth drawing. matplotlib is imported here only (Agg backend, no display).
"""

from __future__ import annotations

import io

from assistant.models import MetricFinding, MetricsReport, SeriesSummary

MAX_PANELS = 4
MIN_POINTS = 2
# Series worth a panel, in this order; others (epoch, samples counters) only when nothing else exists.
PREFERRED = ("loss", "grad_norm", "learning_rate", "lr", "loss_scale", "step_time", "throughput",
             "tokens_per_sec", "samples_per_second", "eval_loss")
SKIP = {"epoch", "step", "global_step", "iteration"}
FINDING_LABEL = {"nan-onset": "first NaN", "loss-spike": "loss spike", "grad-explosion": "grad-norm growth",
                 "throughput-drop": "slowdown", "low-gpu-util": "low GPU use"}


def plottable(report: MetricsReport | None) -> list[SeriesSummary]:
    """The series to draw (at most MAX_PANELS), preferred metrics first."""
    if report is None:
        return []
    series = [s for s in report.series if s.name.lower() not in SKIP and len(s.samples) >= MIN_POINTS]

    def order(s: SeriesSummary) -> tuple[int, str]:
        name = s.name.lower()
        return (PREFERRED.index(name) if name in PREFERRED else len(PREFERRED), name)

    # A finding's series always gets a panel, whatever its name.
    flagged = {f.series for f in report.findings}
    series.sort(key=lambda s: (s.name not in flagged, *order(s)))
    return series[:MAX_PANELS]


def metrics_png(report: MetricsReport | None, *, title: str | None = None, dpi: int = 110) -> bytes | None:
    """PNG bytes of the metric series against step with the findings' onsets marked, or ``None``."""
    series = plottable(report)
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # Figure without pyplot: no global state, thread-safe

    fig = Figure(figsize=(7.5, 1.9 * len(series) + 0.6), dpi=dpi, layout="constrained")
    axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    onsets = _onsets(report, series)
    for ax, s in zip(axes, series):
        _panel(ax, s, [o for o in onsets if o[0].series == s.name], [o for o in onsets if o[0].series != s.name])
    axes[-1].set_xlabel("step (log entry where the log has no step)")
    if title:
        fig.suptitle(title, fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _onsets(report: MetricsReport, series: list[SeriesSummary]) -> list[tuple[MetricFinding, float]]:
    """The first finding of each (kind, series), with the step to mark it at.

    A finding without a step (logs that print none) is placed at the step of the sample read from
    its input line, or the first one after it.
    """
    samples = sorted((p.line, p.step) for s in series for p in s.samples)
    out: list[tuple[MetricFinding, float]] = []
    seen: set[tuple[str, str]] = set()
    for f in sorted(report.findings, key=lambda f: f.line):
        if (f.kind, f.series) in seen:
            continue
        step = f.step
        if step is None:
            step = next((st for line, st in samples if line >= f.line), samples[-1][1] if samples else None)
        if step is not None:
            seen.add((f.kind, f.series))
            out.append((f, step))
    return out


def _panel(ax, s: SeriesSummary, own: list[tuple[MetricFinding, float]],
           other: list[tuple[MetricFinding, float]]) -> None:
    steps = [p.step for p in s.samples if p.value is not None]
    values = [p.value for p in s.samples if p.value is not None]
    ax.plot(steps, values, lw=1.2, color="#1f6feb")
    finite = [v for v in values if v is not None]
    top = max(finite) if finite else 1.0
    # NaN/inf points have no value: show them as red crosses along the top edge, where the curve breaks.
    bad = [p.step for p in s.samples if p.value is None]
    if bad:
        ax.scatter(bad, [top] * len(bad), marker="x", color="#d1242f", s=22, zorder=3, label="NaN / inf")
    for i, (f, step) in enumerate(own):
        ax.axvline(step, color="#d1242f", ls="--", lw=1.1)
        ax.annotate(f"{FINDING_LABEL.get(f.kind, f.kind)} @ {step:g} (line {f.line})", xy=(step, 1.0),
                    xycoords=("data", "axes fraction"), xytext=(-4, -11 - 11 * i), textcoords="offset points",
                    fontsize=8, color="#d1242f", ha="right")
    for _f, step in other:  # another series' finding: a faint line so onsets line up across panels
        ax.axvline(step, color="#d1242f", ls=":", lw=0.8, alpha=0.6)
    positive = [v for v in finite if v > 0]
    if len(positive) == len(finite) and finite and max(finite) / min(positive) > 1e3:
        ax.set_yscale("log")  # growing grad norms span orders of magnitude; a linear axis flattens the onset
    ax.set_ylabel(s.name, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    if bad:
        ax.legend(fontsize=7, loc="upper left")
