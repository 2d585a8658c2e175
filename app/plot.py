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
    for ax, s in zip(axes, series):
        _panel(ax, s, [f for f in report.findings if f.series == s.name] if report else [],
               [f for f in report.findings if f.series != s.name] if report else [])
    axes[-1].set_xlabel("step")
    if title:
        fig.suptitle(title, fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _panel(ax, s: SeriesSummary, own: list[MetricFinding], other: list[MetricFinding]) -> None:
    steps = [p.step for p in s.samples if p.value is not None]
    values = [p.value for p in s.samples if p.value is not None]
    ax.plot(steps, values, lw=1.2, color="#1f6feb")
    finite = [v for v in values if v is not None]
    top = max(finite) if finite else 1.0
    # NaN/inf points have no value: show them as red crosses along the top edge, where the curve breaks.
    bad = [p.step for p in s.samples if p.value is None]
    if bad:
        ax.scatter(bad, [top] * len(bad), marker="x", color="#d1242f", s=22, zorder=3, label="NaN / inf")
    for f in own:
        if f.step is not None:
            ax.axvline(f.step, color="#d1242f", ls="--", lw=1.1)
            ax.annotate(f"{FINDING_LABEL.get(f.kind, f.kind)} @ step {f.step:g}", xy=(f.step, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(3, -10), textcoords="offset points",
                        fontsize=8, color="#d1242f")
    for f in other:  # another series' finding: a faint line so onsets line up across panels
        if f.step is not None:
            ax.axvline(f.step, color="#d1242f", ls=":", lw=0.8, alpha=0.6)
    ax.set_ylabel(s.name, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    if bad:
        ax.legend(fontsize=7, loc="upper left")
