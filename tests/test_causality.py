"""Root cause before symptom (kb/causality.yaml): the examples run through the whole triage."""

from __future__ import annotations

import pytest

from assistant import Assistant
from assistant.causality import load_causality
from assistant.triage import triage

CAUSALITY = load_causality()


def test_packaged_links_carry_examples():
    assert CAUSALITY.links and len(CAUSALITY.examples) >= 4


@pytest.mark.parametrize("example", CAUSALITY.examples, ids=[f"ex{i}" for i in range(len(CAUSALITY.examples))])
def test_causality_examples(example):
    modes = [c.failure_mode for c in triage(example.text).candidates]
    assert modes[: len(example.expect)] == example.expect, modes


def test_growth_then_inf_is_gradient_explosion_not_nan():
    """A grad norm growing ~5 %/step for many steps, then the loss turning inf: the growth is the cause."""
    lines = [f"step={s} loss={2.0 + s * 0.01:.3f} grad_norm={0.5 * 1.05 ** s:.4g}" for s in range(1, 120)]
    lines.append("step=120 loss=inf grad_norm=inf")
    result = triage("\n".join(lines))
    assert [c.failure_mode for c in result.candidates][:2] == ["gradient-explosion", "nan-loss"]
    growth = [f for f in result.metrics.findings if f.kind == "grad-explosion"]
    assert growth and growth[0].step < 120


def test_nan_without_prior_growth_stays_nan_loss():
    lines = [f"step={s} loss=2.{s % 7} grad_norm=0.{s % 5 + 3}" for s in range(1, 40)] + ["step=40 loss=nan grad_norm=nan"]
    assert triage("\n".join(lines)).candidates[0].failure_mode == "nan-loss"


def test_first_failing_rank_is_named():
    text = "\n".join([
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.1 GiB",
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600056 milliseconds before timing out.",
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",
    ])
    d = Assistant(retrieval="never").diagnose(text)
    assert d.candidates[0].failure_mode == "cuda-oom"
    assert "rank 5 failed first (line 1)" in d.candidates[0].note
    assert "network-timeout" in [c.failure_mode for c in d.candidates[1:]]
