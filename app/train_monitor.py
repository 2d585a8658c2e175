"""Watch a training run from inside the training loop: each logged metric record goes through the same analysis as
``trainfix watch`` (:class:`assistant.watch.Watcher`); findings are reported once (console, logger, Slack).

For a custom PyTorch loop::

    from app.train_monitor import TrainMonitor, safe_save

    monitor = TrainMonitor()                          # TRAINFIX_* settings; slack=True to post alerts too
    for step, batch in enumerate(loader, 1):
        loss = ...; grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if step % 10 == 0 and monitor.log(step, loss=loss.item(), grad_norm=grad_norm.item(),
                                           learning_rate=scheduler.get_last_lr()[0]):
            if monitor.failed:
                safe_save(model, "last-good")         # refuses (returns None) when a parameter is NaN/inf
                break

No torch or transformers import here: a model is only asked for ``named_parameters()`` (and ``save_pretrained``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from pathlib import Path

from app.watch_alerts import Reporter
from assistant.config import Settings
from assistant.watch import Thresholds, Watcher, WatchFinding

log = logging.getLogger("trainfix.watch")


def nonfinite_parameter(model) -> str | None:
    """The name of the first parameter holding NaN or inf, or None when every parameter is finite."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if not torch.isfinite(param).all():
                return name
    return None


def safe_save(model, path: str | Path) -> Path | None:
    """The guide's ``safe_save``, enforced: save only when no parameter holds NaN/inf; returns the path, or None."""
    bad = nonfinite_parameter(model)
    if bad is not None:
        log.warning("trainfix: not saving %s: parameter %s holds NaN/inf", path, bad)
        return None
    path = Path(path)
    if hasattr(model, "save_pretrained"):
        model.save_pretrained(path)
    else:
        import torch

        path.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), path / "model.pt")
    return path


class TrainMonitor:
    """Feed metric records (``log``) or raw log text (``feed_text``); findings are reported as they appear.

    ``slack=True`` posts alerts too (``TRAINFIX_SLACK_WEBHOOK_URL``, or the bot token and ``slack_channel`` /
    ``TRAINFIX_SLACK_WATCH_CHANNEL``). ``echo`` writes an alert (default: stderr); every alert's headline is also
    logged on the ``trainfix.watch`` logger.
    """

    def __init__(self, settings: Settings | None = None, *, slack: bool = False, slack_channel: str | None = None,
                 lang: str | None = None, source: str = "training run", echo=None) -> None:
        from app.slack_settings import SlackSettings

        self.settings = settings if settings is not None else SlackSettings()
        target = None
        if slack or slack_channel:
            s = self.settings if isinstance(self.settings, SlackSettings) else SlackSettings(**self.settings.model_dump())
            target = s.watch_target(slack_channel)
        self.watcher = Watcher(Thresholds.from_settings(self.settings), kb_dir=self.settings.kb_dir)
        self.reporter = Reporter(self.settings, source=source, echo=echo or _stderr, warn=log.warning, slack=target,
                                 lang=lang)
        self.findings: list[WatchFinding] = []

    @property
    def failed(self) -> bool:
        """A failure (not only an early warning) was found in this run."""
        return any(f.kind == "failure" for f in self.findings)

    def reset(self) -> None:
        """A new run starts (``Trainer.train()`` again): the same failure will be reported again."""
        self.watcher.reset()
        self.findings = []

    def log(self, step: int | float | None = None, record: Mapping[str, object] | None = None,
            **metrics: float) -> list[WatchFinding]:
        """One logged record (``loss=…, grad_norm=…`` or a dict such as the Trainer's ``logs``); the new findings."""
        self.watcher.feed_record({**(record or {}), **metrics}, step)
        return self._report(self.watcher.check())

    def feed_text(self, text: str) -> list[WatchFinding]:
        """Log lines (an exception, a warning) analysed with the rules; the new findings."""
        self.watcher.feed(text.encode("utf-8", errors="replace") + (b"" if text.endswith("\n") else b"\n"))
        return self._report(self.watcher.check())

    def _report(self, findings: list[WatchFinding]) -> list[WatchFinding]:
        for f in findings:
            self.findings.append(f)
            log.warning("trainfix: %s", f.en)
            self.reporter.report(f)
        return findings


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
