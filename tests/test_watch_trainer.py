"""A real (tiny) Hugging Face Trainer run that diverges, watched by TrainfixCallback.

The model is built from a config in the test (nothing from a hub). Divergence is made certain rather than likely:
plain SGD without clipping at lr=1e4, so the loss leaves its starting level by orders of magnitude at the second
step and the weights overflow to NaN a few steps later, on any CPU. The assertions are about what is robust: the
step of the first anomaly (read from the logged records by the test itself), the step it was caught at, that the
run stopped, and that no checkpoint on disk holds NaN.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytestmark = [pytest.mark.zoo, pytest.mark.slow]

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from app.hf_callback import TrainfixCallback  # noqa: E402

MAX_STEPS = 30
FEW = 3  # "within a few logging steps"


class Records(transformers.TrainerCallback):
    """The logged records as the Trainer produced them (the test's own view of the run)."""

    def __init__(self) -> None:
        self.logs: list[tuple[int, dict]] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.logs.append((state.global_step, dict(logs)))


class Tokens(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 64, (64, 16), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def _run(tmp_path: Path, callback: TrainfixCallback) -> tuple[transformers.Trainer, Records]:
    transformers.set_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(cfg)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=MAX_STEPS, per_device_train_batch_size=8, learning_rate=1e4,
        optim="sgd", max_grad_norm=0.0, lr_scheduler_type="constant", logging_steps=1, save_strategy="steps",
        save_steps=1, report_to=[], use_cpu=True, seed=0, disable_tqdm=True, dataloader_num_workers=0)
    records = Records()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[records, callback])
    trainer.train()
    return trainer, records


def _first_anomaly(records: Records) -> int:
    """The first logged step whose loss or grad norm is not finite, or whose loss is 10x the first one."""
    first_loss = records.logs[0][1]["loss"]
    for step, logs in records.logs:
        loss, grad = logs.get("loss", 0.0), logs.get("grad_norm", 0.0)
        if not math.isfinite(loss) or not math.isfinite(grad) or loss > 10 * first_loss:
            return step
    raise AssertionError(f"the run did not diverge: {records.logs}")


def _weights_finite(directory: Path) -> bool:
    files = list(directory.glob("*.safetensors"))
    assert files, f"no weights in {directory}"
    return all(bool(torch.isfinite(t).all()) for f in files for t in load_file(f).values())


def test_divergence_is_caught_and_training_stops_without_a_nan_checkpoint(tmp_path):
    alerts: list[str] = []
    cb = TrainfixCallback(stop_on_failure=True, save_last_good=tmp_path / "last-good", echo=alerts.append)
    trainer, records = _run(tmp_path, cb)

    anomaly = _first_anomaly(records)
    failures = [f for f in cb.findings if f.kind == "failure"]
    assert failures, "the callback found nothing"
    caught = failures[0].step
    assert caught is not None and anomaly <= caught <= anomaly + FEW, (anomaly, caught, records.logs[:6])
    assert cb.stopped_at == caught
    assert trainer.state.global_step == caught < MAX_STEPS  # stopped right there, not at max_steps
    # the alert is a cited answer: mode, step, evidence line, causes, a fix, sources
    assert alerts and "gradient-explosion" in alerts[0] and f"step {caught:g}" in alerts[0]
    assert "**Sources**" in alerts[0] and "**What to do first**" in alerts[0]
    # nothing written holds NaN: the Trainer's checkpoints and the last good copy
    checkpoints = sorted((tmp_path / "out").glob("checkpoint-*"))
    assert checkpoints
    assert all(_weights_finite(c) for c in checkpoints)
    assert cb.saved is not None and _weights_finite(cb.saved)


def test_without_stop_the_run_goes_on_but_no_checkpoint_with_nan_is_written(tmp_path):
    alerts: list[str] = []
    cb = TrainfixCallback(echo=alerts.append)
    trainer, records = _run(tmp_path, cb)

    assert trainer.state.global_step == MAX_STEPS
    nan_steps = [s for s, logs in records.logs if not math.isfinite(logs.get("grad_norm", 0.0))]
    assert nan_steps, "the weights never overflowed: the test's premise failed"
    # each failure mode alerted once, however many NaN steps followed
    keys = [k for f in cb.findings for k in f.keys]
    assert len(keys) == len(set(keys))
    assert {"failure:gradient-explosion", "failure:nan-loss"} <= set(keys)
    # the saves due once the weights held NaN were skipped; every checkpoint on disk is finite
    assert cb.skipped_saves and min(cb.skipped_saves) <= min(nan_steps)
    checkpoints = sorted((tmp_path / "out").glob("checkpoint-*"))
    assert checkpoints and all(_weights_finite(c) for c in checkpoints)
    assert len(checkpoints) + len(cb.skipped_saves) == MAX_STEPS
