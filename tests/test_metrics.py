"""Metric series from log formats and the robust findings (NaN onset, spikes, explosions, drops)."""

from __future__ import annotations

import math
import random

from assistant.metrics import MetricsAnalyser


def _run(lines: list[str]) -> MetricsAnalyser:
    a = MetricsAnalyser()
    for n, line in enumerate(lines, 1):
        a.feed(n, line)
    return a


def _series(a: MetricsAnalyser, name: str):
    return next(s for s in a.report().series if s.name == name)


def test_hf_trainer_dicts_without_step_use_position():
    a = _run([f"{{'loss': {2.5 - i * 0.01:.4f}, 'grad_norm': 1.1, 'learning_rate': 5e-05, 'epoch': {i / 100}}}"
              for i in range(20)])
    r = a.report()
    assert "hf-dict" in r.formats
    assert _series(a, "loss").points == 20 and _series(a, "grad_norm").points == 20
    assert r.findings == []


def test_key_value_deepspeed_megatron_and_tqdm_formats():
    a = _run([
        "step=120 loss=2.3 lr=1e-4 grad_norm=0.9",
        "[Rank 0] step=130, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
        " iteration      140/    1000 | consumed samples:  17920 | learning rate: 1.000E-04 | lm loss: 2.345E+00 | loss scale: 65536.0 | grad norm: 1.234 |",
        " 15%|█▌        | 150/1000 [01:40<09:25,  1.50it/s, loss=2.31, grad_norm=1.1]",
    ])
    r = a.report()
    loss = _series(a, "loss")
    assert loss.points == 3 and loss.last_step == 150 and math.isclose(loss.last_value, 2.31)
    assert _series(a, "learning_rate").points == 3
    assert r.total_steps == 1000 and r.last_step == 150
    assert {"megatron", "tqdm", "deepspeed", "key-value"} <= set(r.formats)


def test_nan_onset_cites_first_nan_step_and_line():
    lines = [f"step={i * 10} loss={2.0 - i * 0.01}" for i in range(30)]
    lines[17] = "step=170 loss=nan"
    lines[18] = "step=180 loss=nan"
    f = [f for f in _run(lines).report().findings if f.kind == "nan-onset"]
    assert len(f) == 2 and f[0].step == 170 and f[0].line == 18


def test_loss_spike_found_relative_to_rolling_median_despite_noise():
    rng = random.Random(0)
    lines = [f"step={i} loss={2.0 + rng.gauss(0, 0.05):.4f}" for i in range(200)]
    lines[150] = "step=150 loss=4.8"
    spikes = [f for f in _run(lines).report().findings if f.kind == "loss-spike"]
    assert [s.step for s in spikes] == [150] and spikes[0].line == 151


def test_noisy_loss_without_spikes_has_no_finding():
    rng = random.Random(1)
    lines = [f"step={i} loss={3.0 - i * 0.005 + rng.gauss(0, 0.08):.4f}" for i in range(300)]
    assert _run(lines).report().findings == []


def test_spike_threshold_scales_with_series_noise():
    # A jump that is a spike in a quiet series is ordinary noise in a very noisy one.
    rng = random.Random(2)
    quiet = [f"step={i} loss={2.0 + rng.gauss(0, 0.01):.4f}" for i in range(100)] + ["step=100 loss=2.6"]
    noisy = [f"step={i} loss={2.0 + rng.gauss(0, 0.4):.4f}" for i in range(100)] + ["step=100 loss=2.6"]
    assert any(f.kind == "loss-spike" for f in _run(quiet).report().findings)
    assert not any(f.kind == "loss-spike" for f in _run(noisy).report().findings)


def test_gradient_explosion_order_of_magnitude_and_inf():
    lines = [f"{{'loss': 2.0, 'grad_norm': {1.0 + 0.1 * (i % 3)}, 'epoch': {i}}}" for i in range(20)]
    lines.append("{'loss': 2.1, 'grad_norm': 85.0, 'epoch': 20}")
    lines.append("{'loss': 2.1, 'grad_norm': inf, 'epoch': 21}")
    kinds = [(f.kind, f.line) for f in _run(lines).report().findings]
    assert ("grad-explosion", 21) in kinds and ("grad-explosion", 22) in kinds


def test_sustained_throughput_drop_but_not_a_single_dip():
    base = [f"step={i} loss=2.0 samples_per_second={100 + (i % 5)}" for i in range(40)]
    dip = base + ["step=40 loss=2.0 samples_per_second=30"] + base[:10]
    assert not any(f.kind == "throughput-drop" for f in _run(dip).report().findings)
    drop = base + [f"step={40 + i} loss=2.0 samples_per_second={40 + i % 3}" for i in range(10)]
    f = [f for f in _run(drop).report().findings if f.kind == "throughput-drop"]
    assert len(f) == 1 and f[0].step == 40 and f[0].line == 41


def test_nvidia_smi_low_utilisation():
    row = "| N/A   38C    P0    72W / 400W |  30123MiB / 81920MiB |     {u}%      Default |"
    low = _run([row.format(u=u) for u in (12, 8, 15, 30)]).report()
    assert [f.kind for f in low.findings] == ["low-gpu-util"] and low.findings[0].line == 1
    high = _run([row.format(u=u) for u in (97, 99, 12)]).report()
    assert high.findings == []


def test_memory_is_bounded_by_the_window(monkeypatch):
    import assistant.metrics as M

    monkeypatch.setattr(M, "MAX_WAITING", 1000)  # points waiting for a bulk flush: flushed when this many wait
    a = MetricsAnalyser()
    waiting = 0
    for i in range(20000):
        a.feed(i + 1, f"step={i} loss={2.0 + (i % 7) * 0.01}")
        waiting = max(waiting, sum(map(len, a._pending.values())))
    assert 0 < waiting < 1000
    s = a.series["loss"]
    assert len(s.window) <= 50 and len(s.samples) <= M.MAX_SAMPLES
    assert a.report().series[0].points == s.points == 20000


def test_short_paste_with_a_large_spike():
    a = _run(["step 10 loss 2.10", "step 20 loss 2.05", "step 30 loss 2.02", "step 40 loss 7.90", "step 50 loss 2.2"])
    assert [(f.kind, f.step, f.line) for f in a.report().findings] == [("loss-spike", 40, 4)]


def test_short_paste_small_wiggle_is_not_a_spike():
    a = _run(["step 10 loss 2.10", "step 20 loss 2.05", "step 30 loss 2.02", "step 40 loss 2.6"])
    assert a.report().findings == []


def test_an_excerpt_of_a_few_entries_with_one_spike_that_falls_back():
    # Two points of history are too few for the rolling check; the points after the jump show it was one.
    a = _run(["{'loss': 0.52, 'epoch': 1.1}", "{'loss': 0.61, 'epoch': 1.2}", "{'loss': 3.4, 'epoch': 1.3}",
              "{'loss': 0.58, 'epoch': 1.4}", "{'loss': 0.49, 'epoch': 1.5}"])
    assert [(f.kind, f.line) for f in a.report().findings] == [("loss-spike", 3)]


def test_an_excerpt_whose_loss_rises_and_stays_or_falls_from_the_start_has_no_short_spike():
    stays = _run(["loss 0.52", "loss 0.61", "loss 3.4", "loss 3.1", "loss 3.3"])  # a rise that stays: not one point
    falls = _run(["loss 6.2", "loss 2.9", "loss 1.4", "loss 1.2", "loss 1.1"])  # the first points of a run
    noisy = _run(["loss 0.10", "loss 0.55", "loss 0.06", "loss 0.19", "loss 0.18"])  # a DPO loss jumps like this
    assert noisy.report().findings == []
    assert not any("falls back" in f.detail for f in stays.report().findings)
    assert falls.report().findings == []


def test_short_series_throughput_drop():
    a = _run([f"step={i} tokens_per_sec={v}" for i, v in enumerate([3100, 3050, 3120, 3080, 1200, 1150, 1180])])
    f = a.report().findings
    assert [(x.kind, x.step, x.line) for x in f] == [("throughput-drop", 4, 5)]


def test_short_series_steady_throughput_has_no_drop():
    a = _run([f"step={i} tokens_per_sec={v}" for i, v in enumerate([3100, 3050, 2900, 3080, 3000, 3150])])
    assert a.report().findings == []


def test_nvidia_smi_dmon_and_csv_query():
    dmon = ["# gpu    sm   mem   enc   dec", "# Idx     %     %     %     %", "    0     12     5     0     0",
            "    1      8     3     0     0", "    0     20     6     0     0"]
    r = _run(dmon).report()
    assert [f.kind for f in r.findings] == ["low-gpu-util"] and r.findings[0].line == 3
    csv = ["utilization.gpu [%]", "23 %", "31 %", "18 %"]
    assert [f.kind for f in _run(csv).report().findings] == ["low-gpu-util"]
    busy = ["# gpu    sm   mem   enc   dec", "    0     97     50     0     0", "    1     99     51     0     0"]
    assert _run(busy).report().findings == []


def test_nan_gradient_norm_is_a_nan_onset_even_when_the_loss_is_filtered():
    lines = ["{'loss': 2.3, 'grad_norm': 1.3, 'epoch': 0.1}", "{'loss': '0', 'grad_norm': 'nan', 'epoch': 0.2}"]
    f = _run(lines).report().findings
    assert [(x.kind, x.series, x.line) for x in f] == [("nan-onset", "grad_norm", 2)]
