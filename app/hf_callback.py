"""A Hugging Face ``TrainerCallback`` that diagnoses the run while it trains (the ``hf`` extra: transformers).

Each ``on_log`` record goes through :class:`app.train_monitor.TrainMonitor` (the analysis of ``trainfix watch``).
On a failure it reports (console, the ``trainfix.watch`` logger, Slack when asked) and, with
``stop_on_failure=True``, stops training and saves the model to ``save_last_good`` — only if no parameter holds
NaN/inf. Whatever the options, the Trainer's own checkpoints are guarded the same way: a save due at a step where
a parameter is NaN/inf is skipped (reported), so a resume never starts from a poisoned state.

    from app.hf_callback import TrainfixCallback
    trainer = Trainer(..., callbacks=[TrainfixCallback(stop_on_failure=True, save_last_good="out/last-good")])
"""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from app.train_monitor import TrainMonitor, log, nonfinite_parameter, safe_save


class TrainfixCallback(TrainerCallback):
    """Diagnose a Trainer run from its logs; optionally stop it and keep a last good (finite) model."""

    def __init__(self, *, stop_on_failure: bool = False, save_last_good: str | Path | None = None,
                 slack: bool = False, slack_channel: str | None = None, lang: str | None = None,
                 settings=None, echo=None) -> None:
        self.monitor = TrainMonitor(settings, slack=slack, slack_channel=slack_channel, lang=lang,
                                    source="Trainer", echo=echo)
        self.stop_on_failure = stop_on_failure
        self.save_last_good = Path(save_last_good) if save_last_good else None
        self.stopped_at: int | None = None
        self.saved: Path | None = None
        self.skipped_saves: list[int] = []  # steps whose checkpoint was not written: NaN/inf in the parameters

    @property
    def findings(self):
        return self.monitor.findings

    def on_train_begin(self, args, state, control, **kwargs):
        self.monitor.reset()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self._guard_save(state, control, model)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        self._guard_save(state, control, model)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        findings = self.monitor.log(state.global_step, logs or {})
        if not any(f.kind == "failure" for f in findings) or not self.stop_on_failure:
            return
        control.should_training_stop = True
        self.stopped_at = state.global_step
        self._guard_save(state, control, model)
        if self.save_last_good is not None and model is not None and self.saved is None:
            self.saved = safe_save(model, self.save_last_good)
            if self.saved is None:
                log.warning("trainfix: the model already holds NaN/inf: no last good copy saved; resume from the "
                            "last checkpoint in %s", args.output_dir)

    def _guard_save(self, state, control, model) -> None:
        if not control.should_save or model is None:
            return
        bad = nonfinite_parameter(model)
        if bad is not None:
            control.should_save = False
            self.skipped_saves.append(state.global_step)
            log.warning("trainfix: checkpoint at step %s not written: parameter %s holds NaN/inf", state.global_step, bad)
