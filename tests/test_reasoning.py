"""Answers that reason about the case: timeline, dead ends, facts that rule advice out, numbers, trends."""

from __future__ import annotations

import pytest

from app.render import code_span, markdown
from assistant import Assistant
from assistant.errors import InputError
from assistant.models import MetricFinding, MetricsReport, SeriesPoint, SeriesSummary
from assistant.readings import read_numbers
from assistant.tracebacks import KeptLine
from assistant.trends import find_trends
from assistant.tree import load_tree


@pytest.fixture(scope="module")
def assistant():
    return Assistant(retrieval="never")


def _lines(text: str) -> list[KeptLine]:
    return [KeptLine(number=i, rank=None, body=b) for i, b in enumerate(text.splitlines(), start=1)]


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {req}. GPU 0 has a total capacity of 39.38 GiB "
       "of which 612.00 MiB is free. Including non-PyTorch memory, this process has 38.77 GiB memory in use. Of the "
       "allocated memory 30.10 GiB is allocated by PyTorch, and {slack} is reserved by PyTorch but unallocated.")


# -- numbers -------------------------------------------------------------------------------------

def test_oom_with_large_reserved_unallocated_is_fragmentation_and_fix_one_is_expandable_segments(assistant):
    d = assistant.diagnose("micro_batch_size: 4\n" + OOM.format(req="2.25 GiB", slack="7.40 GiB"))
    top = d.candidates[0]
    assert top.failure_mode == "cuda-oom"
    assert any("Fragmentation" in r and "7.40 GiB" in r for r in top.readings)
    assert "expandable_segments" in (top.fixes[0].code.code if top.fixes[0].code else top.fixes[0].text)
    assert all("empty_cache" not in (f.code.code if f.code else f.text or "") for f in top.fixes)
    assert top.causes[0].id == "memory-fragmentation"


def test_oom_capacity_verdict_keeps_the_global_batch():
    text = ("per_device_train_batch_size=16 gradient_accumulation_steps=2\n"
            + OOM.format(req="4.00 GiB", slack="96.00 MiB"))
    (r,) = read_numbers(_lines(text))
    assert r.kind == "oom-capacity"
    assert "per_device_train_batch_size=8" in r.en and "gradient_accumulation_steps=4" in r.en and "32" in r.en


def test_token_id_against_vocabulary_size():
    (r,) = read_numbers(_lines("IndexError: index 50260 is out of bounds for dimension 0 with size 50257"))
    assert "50260" in r.en and "50257" in r.en and r.causes == {"token-out-of-range": "vocab-mismatch-added-tokens"}


def test_oom_killer_names_the_worker_and_its_memory():
    text = "[8812.1] Out of memory: Killed process 7731 (pt_data_worker) total-vm:90112000kB, anon-rss:41943040kB"
    (r,) = read_numbers(_lines(text))
    assert "pt_data_worker" in r.en and "40.00 GiB" in r.en and r.causes["cpu-oom"] == "dataloader-workers-memory"


def test_no_numbers_no_readings():
    assert read_numbers(_lines("RuntimeError: CUDA out of memory.\nsomething else")) == []


# -- trends --------------------------------------------------------------------------------------

def _series(name: str, points: list[tuple[float, float]]) -> SeriesSummary:
    return SeriesSummary(name=name, points=len(points),
                         samples=[SeriesPoint(step=s, value=v, line=i) for i, (s, v) in enumerate(points, start=1)])


def test_steady_step_time_growth_is_a_trend_with_ratio_and_steps():
    pts = [(s, 0.8 + s / 1000) for s in range(100, 2100, 100)]
    (t,) = find_trends(MetricsReport(series=[_series("step_time", pts)]))
    assert t.kind == "growth" and t.ratio and t.ratio > 2
    assert "2000" in t.en and "per 1000 steps" in t.en


def test_one_slow_step_is_not_a_trend():
    pts = [(s, 1.0) for s in range(100, 2100, 100)]
    pts[10] = (pts[10][0], 9.0)
    assert find_trends(MetricsReport(series=[_series("step_time", pts)])) == []


def _spike(step: float, line: int) -> MetricFinding:
    return MetricFinding(kind="loss-spike", series="loss", step=step, line=line, value=5.0, detail="")


def test_periodic_spikes_are_named_with_their_period():
    loss = _series("loss", [(s, 2.0) for s in range(50, 8050, 50)])
    report = MetricsReport(series=[loss], findings=[_spike(s, s // 50) for s in (2000, 4000, 6000, 8000)])
    (t,) = find_trends(report)
    assert t.kind == "periodic" and t.period == 2000 and "every 2000 steps" in t.en


def test_consecutive_spikes_of_a_divergence_are_not_periodic():
    loss = _series("loss", [(s, 2.0) for s in range(1, 30)])
    report = MetricsReport(series=[loss], findings=[_spike(s, s) for s in (10, 11, 12, 13)])
    assert [t for t in find_trends(report) if t.kind == "periodic"] == []


def test_loss_scale_collapse():
    pts = [(s, 65536 / 2 ** s) for s in range(0, 12)]
    (t,) = find_trends(MetricsReport(series=[_series("loss_scale", pts)]))
    assert t.kind == "collapse" and "65536" in t.en


# -- facts rule advice out -----------------------------------------------------------------------

NAN_LOG = "\n".join(f"step {s} | loss {2.0 - s / 1000:.3f}" for s in range(10, 300, 10)) + "\nstep 300 | loss nan"


def test_bf16_answer_removes_switch_to_bf16_and_says_why(assistant):
    plain = assistant.diagnose(NAN_LOG)
    answered = assistant.diagnose(NAN_LOG, answers={"precision": "it's bf16 already"})
    said = lambda d: " ".join((f.text or "") for f in d.candidates[0].fixes)  # noqa: E731
    assert "BF16" in said(plain)
    assert "BF16" not in said(answered) and "GradScaler" not in said(answered)
    left = answered.candidates[0].left_out
    assert any("BF16" in x.text for x in left) and all(x.reason == "you already train in BF16" for x in left)
    assert "fp16-overflow" not in [c.id for c in answered.candidates[0].causes]
    assert "Left out for this case" in markdown(answered)


def test_deep_watchdog_timeout_drops_start_up_causes(assistant):
    text = ("[rank2]:[E1201 10:00:00.000000 1 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=52011, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600021 milliseconds before timing out.")
    d = assistant.diagnose(text)
    assert d.facts.get("stage") == "deep"
    for c in d.candidates:
        assert "rank-never-joined" not in [x.id for x in c.causes]


def test_unknown_follow_up_id_or_value_is_an_input_error(assistant):
    with pytest.raises(InputError, match="unknown follow-up id"):
        assistant.diagnose(NAN_LOG, answers={"precisoin": "bf16"})
    with pytest.raises(InputError, match="answer one of"):
        assistant.diagnose(NAN_LOG, answers={"precision": "no idea"})


def test_contradictions_name_known_facts_and_causes():
    tree = load_tree()
    assert tree.contradicted
    with pytest.raises(ValueError, match="not a fact option"):
        type(tree).model_validate({**tree.model_dump(), "contradicted": [
            {"when": {"precision": "fp8"}, "causes": [], "reason": "x", "reason_zh": "中文"}]})


# -- rendering -----------------------------------------------------------------------------------

def test_healthy_log_says_so_and_lists_what_was_checked():
    a = Assistant(retrieval="auto")
    log = "\n".join(f"{{'loss': {3.0 - i / 100:.4f}, 'grad_norm': 0.7, 'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}"
                    for i in range(1, 60))
    d = a.diagnose(log)
    assert d.healthy and not d.candidates
    md = markdown(d)
    assert "This looks healthy" in md and "`loss`: 59 points" in md


def test_evidence_shows_a_few_decisive_lines_and_counts_the_rest(assistant):
    lines = [f"[rank{r}]: RuntimeError: CUDA error: out of memory" for r in range(8)]
    md = markdown(assistant.diagnose("\n".join(lines)))
    assert md.count("CUDA error: out of memory`") <= 4
    assert "similar line(s)" in md


SPIKE_LOG = "\n".join(f"step {s} | loss {(6.5 if s == 400 else 2.0 - s / 2000):.3f}" for s in range(10, 600, 10))


def test_english_answers_drop_chinese_code_comments_but_keep_the_code(assistant):
    en, zh = (markdown(assistant.diagnose(SPIKE_LOG, lang=lang)) for lang in ("en", "zh"))
    code = lambda md: [ln for ln in md.split("**Sources**")[0].splitlines() if ln.startswith("   ")]  # noqa: E731
    assert any("clip_grad_norm_" in ln for ln in code(en))
    assert not any("\u4e00" <= ch <= "\u9fff" for ln in code(en) for ch in ln)
    assert any("\u4e00" <= ch <= "\u9fff" for ln in code(zh) for ch in ln)  # the guide's own comments, in Chinese


def test_follow_up_questions_say_how_to_answer(assistant):
    md = markdown(assistant.diagnose(NAN_LOG))
    assert "--answer precision=" in md


def test_sources_are_named_by_title_with_the_file_in_brackets(assistant):
    md = markdown(assistant.diagnose("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"))
    sources = md.split("**Sources**")[1]
    assert "训练失败模式与排障指南 §" in sources and "(000_416041118514696b.txt)" in sources


@pytest.mark.parametrize("text", ["a `b` c", "``x``", "`", "plain"])
def test_code_span_keeps_text_verbatim(text):
    span = code_span(text)
    fence = span[: len(span) - len(span.lstrip("`"))]
    assert span.startswith(fence) and span.endswith(fence)
    assert span[len(fence):-len(fence)].strip(" ") == text.strip(" ") or span[len(fence):-len(fence)] == f" {text} "


# -- timeline ------------------------------------------------------------------------------------

def _watchdog(rank: int, t: str, seq: int = 9001, numel: int = 4096) -> str:
    return (f"[rank{rank}]:[E1202 {t}.000100 77 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, "
            "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")


def test_first_failing_rank_is_named_and_the_timeouts_are_consequences(assistant):
    text = "\n".join([
        "[rank1]:[E1202 05:00:01.000100 77 train.py:9] step 4410 starting",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 88, in <module>',
        "[rank1]: ValueError: Expected input batch_size (8) to match target batch_size (6).",
        *(_watchdog(r, "05:10:02") for r in (0, 2, 3)),
    ])
    d = assistant.diagnose(text)
    tl = d.timeline
    assert tl is not None and tl.first_failure.rank == "1"
    assert {e.rank for e in tl.consequences if e.kind == "timeout"} == {"0", "2", "3"}
    md = markdown(d)
    assert "rank 1 failed first" in md and "10 min later" in md and "05:10:02" in md
    top = d.candidates[0]
    assert top.failure_mode != "network-timeout"
    assert "timeout" not in (top.fixes[0].text or "").lower()  # raising the timeout is never fix #1


def test_ranks_waiting_in_different_collectives_are_a_sync_failure_not_the_network(assistant):
    text = "\n".join([_watchdog(0, "06:00:00"), _watchdog(1, "06:00:00"), _watchdog(2, "06:00:00", numel=1)])
    d = assistant.diagnose(text)
    top = d.candidates[0]
    assert top.failure_mode == "distributed-sync-failure"
    assert top.causes[0].id == "divergent-control-flow"
    assert "different collectives" in (top.note or "") and "rank 2" in top.note


def test_agreeing_timeouts_are_no_mismatch(assistant):
    d = assistant.diagnose("\n".join(_watchdog(r, "06:00:00") for r in range(4)))
    assert d.timeline is None or not d.timeline.mismatch


def test_srun_labels_and_per_rank_sections_give_lines_their_rank(assistant):
    text = "\n".join([
        " 0: step 10 loss 2.1",
        "=== node-b: logs/rank5.log (tail) ===",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "=== node-a: console ===",
        " 3: " + _watchdog(3, "07:30:00")[len("[rank3]:"):],
    ])
    d = assistant.diagnose(text)
    ranks = {e.rank for e in d.timeline.events} if d.timeline else set()
    assert {"5", "3"} <= ranks


def test_numbers_printed_in_a_repl_are_read():
    from assistant.readings import printed_values

    lines = _lines(">>> print(len(tokenizer), model.get_input_embeddings().num_embeddings)\n32003 32000")
    assert [(e, v) for e, v, _ in printed_values(lines)] == [
        ("len(tokenizer)", 32003), ("model.get_input_embeddings().num_embeddings", 32000)]
    (r,) = read_numbers(lines)
    assert "32003" in r.en and "3 added token(s)" in r.en


def test_data_wait_trend():
    data = _series("data_time", [(s, 4.0 if s % 8 == 0 else 0.01) for s in range(1, 65)])
    (t,) = find_trends(MetricsReport(series=[data]))
    assert t.kind == "data-wait" and "every 8 steps" in t.en


def test_code_for_another_framework_is_left_out_but_the_advice_kept(assistant):
    log = "\n".join(f"[2026-12-01 10:{i:02d}:00] iteration {i * 10}/ 9000 | lm loss: {3.0 - i / 100:.3f} | "
                    f"loss scale: 1.0 | grad norm: {0.5 * 2 ** max(0, i - 30):.3f} |" for i in range(1, 45))
    d = assistant.diagnose(log + "\n[2026-12-01 11:00:00] iteration 450/ 9000 | lm loss: nan | loss scale: 1.0 |")
    assert d.facts.get("framework") == "megatron"
    for c in d.candidates:
        assert all("TrainingArguments(" not in (f.code.code if f.code else "") for f in c.fixes)
    assert any(x.kind == "code" for c in d.candidates for x in c.left_out)
    assert d.facts.get("precision") != "fp16"  # Megatron's 'loss scale: 1.0' is not FP16 loss scaling


def test_a_step_change_is_a_jump_not_a_steady_trend():
    pts = [(s, 1.0 if s < 1000 else 2.6) for s in range(50, 2050, 50)]
    (t,) = find_trends(MetricsReport(series=[_series("step_time", pts)]))
    assert t.kind == "jump" and t.start_step == 1000 and "jumped 2.6× at step 1000" in t.en


def test_a_jump_states_the_levels_before_and_after_it_as_a_person_reads_them():
    before = [3961.0, 3942.0, 3957.0, 3949.0, 3944.0, 3963.0, 3952.0, 3958.0]
    after = [9874.0, 9876.0, 9811.0, 9813.0, 9796.0, 9757.0, 9806.0, 9820.0]
    pts = [(100 + 10 * i, v) for i, v in enumerate(before + after)]
    (t,) = find_trends(MetricsReport(series=[_series("step_time", pts)]))
    # medians of all points on each side (3954.5, 9812), not of the first and last few; 3 significant digits
    assert t.kind == "jump" and t.start_step == 180 and "about 3950 → about 9810" in t.en


# -- more readings: logits, unsupervised batches, skipped steps, truncated files, profiler -----------

def test_oom_whose_request_is_the_logits_names_the_product():
    # 2 x 4096 x 151936 x 4 B = 4.64 GiB of fp32 logits
    text = ("micro_batch_size: 2\nmax_seq_length: 4096\nvocab_size: 151936\n"
            + OOM.format(req="4.64 GiB", slack="120.00 MiB"))
    kinds = {r.kind: r for r in read_numbers(_lines(text))}
    assert "oom-logits" in kinds
    r = kinds["oom-logits"]
    assert "2 × 4096 × 151936 × 4 B" in r.en and "fp32" in r.en and r.line == 4


def test_an_allocation_that_is_not_the_logits_is_not_called_logits():
    text = "micro_batch_size: 2\nmax_seq_length: 4096\nvocab_size: 151936\n" + OOM.format(req="1.00 GiB", slack="1 GiB")
    assert "oom-logits" not in {r.kind for r in read_numbers(_lines(text))}


def test_a_batch_without_label_tokens_explains_a_deterministic_nan(assistant):
    text = ("{'loss': 0.91, 'grad_norm': 1.2, 'epoch': 0.4}\n"
            "rank0 batch 912: supervised_tokens=0 seq_len=2048\n"
            "{'loss': nan, 'grad_norm': nan, 'epoch': 0.41}\n")
    d = assistant.diagnose(text, answers={"precision": "bf16"})
    top = d.candidates[0]
    assert top.failure_mode == "nan-loss" and top.causes[0].id == "no-label-tokens"
    assert 2 in {e.line for e in top.evidence} and "0/0" in top.readings[0]
    assert "filter" in (top.fixes[0].code.code if top.fixes[0].code else "")


def test_log_of_a_softmax_is_named_as_the_nan_source(assistant):
    text = ("RuntimeError: Function 'LogBackward0' returned nan values in its 0th output.\n"
            "    probs = torch.softmax(out, dim=1)\n    loss = -(torch.log(probs) * onehot).sum(1).mean()\n")
    top = assistant.diagnose(text, answers={"precision": "fp32"}).candidates[0]
    assert top.failure_mode == "nan-loss" and top.causes[0].id == "log-of-softmax"
    assert "log_softmax" in top.fixes[0].code.code


def test_skipped_step_counters_make_the_share_explicit():
    lines = _lines("skip_nonfinite: skipped 3 of 500 steps\nskip_nonfinite: skipped 120 of 800 steps\n")
    (r,) = read_numbers(lines)
    assert r.kind == "skipped-steps" and "120/800" in r.en and "15%" in r.en and r.line == 2


def test_a_file_much_smaller_than_its_siblings_is_truncated():
    listing = "\n".join([
        "-rw-r--r-- 1 ml ml 9000000000 Mar  1 10:00 shard_00_of_03.bin",
        "-rw-r--r-- 1 ml ml 9000000123 Mar  1 10:00 shard_01_of_03.bin",
        "-rw-r--r-- 1 ml ml 1073741824 Mar  1 10:01 shard_02_of_03.bin",
        "-rw-r--r-- 1 ml ml       2048 Mar  1 10:01 config.json",
    ])
    (r,) = read_numbers(_lines(listing))
    assert r.kind == "short-file" and "shard_02_of_03.bin" in r.en and "1073741824" in r.en and r.line == 3


def test_profiler_table_with_a_slow_loader_points_at_the_loader():
    text = ("loader = DataLoader(ds, batch_size=32, num_workers=0)\n"
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__   48.10%   3.100s   50.00%   3.200s\n")
    (r,) = read_numbers(_lines(text))
    assert r.kind == "profiled-loader" and "48.10%" in r.en and "num_workers=0" in r.en
    assert r.causes["low-gpu-utilization"] == "dataloader-bottleneck"


def test_oom_killer_victim_is_matched_to_its_rank():
    text = ("E0101 failed (exitcode: -9) local_rank: 3 (pid: 4242) of binary: /usr/bin/python\n"
            "Out of memory: Killed process 4242 (python) total-vm:1kB, anon-rss:20971520kB\n")
    (r,) = read_numbers(_lines(text))
    assert "local_rank 3 (line 1)" in r.en and "20.00 GiB" in r.en


# -- more trends: a divergence with its peak, a spike that recovers, the step of an overflow ----------

def test_a_diverging_grad_norm_is_stated_from_start_to_peak():
    grad = _series("grad_norm", [(1, 0.9), (2, 1.1), (3, 40.0), (4, 900.0), (5, 300.0), (6, 250.0)])
    loss = _series("loss", [(1, 2.0), (2, 2.1), (3, 3.5), (4, 7.9), (5, 8.0), (6, 8.1)])
    f = MetricFinding(kind="grad-explosion", series="grad_norm", step=3, line=3, value=40.0, baseline=1.0, detail="")
    trends = find_trends(MetricsReport(series=[grad, loss], findings=[f], last_step=6))
    (t,) = [t for t in trends if t.kind == "surge"]
    assert "0.9" in t.en and "900" in t.en and "diverged" in t.en and "8.1" in t.en and t.line == 4


def test_a_spike_that_recovers_is_transient_not_a_divergence():
    grad = _series("grad_norm", [(1, 0.3), (2, 0.3), (3, 0.31), (4, 9.0), (5, 2.0), (6, 0.5), (7, 0.35)])
    loss = _series("loss", [(1, 2.0), (2, 2.02), (3, 1.99), (4, 6.1), (5, 3.0), (6, 2.2), (7, 2.05)])
    spike = MetricFinding(kind="loss-spike", series="loss", step=4, line=4, value=6.1, baseline=2.0, detail="")
    blow = MetricFinding(kind="grad-explosion", series="grad_norm", step=4, line=4, value=9.0, baseline=0.3, detail="")
    kinds = {t.kind: t for t in find_trends(MetricsReport(series=[grad, loss], findings=[spike, blow], last_step=7))}
    assert "surge" not in kinds
    assert "transient" in kinds and "6.1" in kinds["transient"].en and "step 7" in kinds["transient"].en


def test_an_overflow_line_belongs_to_the_step_logged_right_after_it():
    scale = SeriesSummary(name="loss_scale", points=6, samples=[
        SeriesPoint(step=99, value=65536.0, line=3), SeriesPoint(step=100, value=16384.0, line=5),
        SeriesPoint(step=101, value=4096.0, line=7), SeriesPoint(step=102, value=1024.0, line=9)])
    loss = SeriesSummary(name="loss", points=4, samples=[
        SeriesPoint(step=99, value=2.0, line=2), SeriesPoint(step=100, value=2.1, line=4),
        SeriesPoint(step=101, value=2.5, line=6), SeriesPoint(step=102, value=3.0, line=8),
        SeriesPoint(step=103, value=4.0, line=10)])
    (t,) = [t for t in find_trends(MetricsReport(series=[scale, loss])) if t.kind == "collapse"]
    assert "steps 100–103" in t.en


def test_memcg_at_its_limit_and_a_large_shuffle_buffer_per_worker():
    text = ("ds = wds.WebDataset(urls).shuffle(200_000).decode('rgb')   # ~50 KB per sample\n"
            "loader = DataLoader(ds, num_workers=4)\n"
            "memory: usage 33554432kB, limit 33554432kB, failcnt 12\n")
    kinds = {r.kind: r for r in read_numbers(_lines(text))}
    assert "32.00 GiB of 32.00 GiB" in kinds["memcg"].en
    buf = kinds["shuffle-buffer"]
    assert "200000" in buf.en and "4 workers" in buf.en and buf.causes == {"cpu-oom": "shuffle-buffer-per-worker"}


def test_nccl_on_sockets_without_ib_devices():
    text = ("NCCL INFO NET/IB : No device found.\nNCCL INFO Using network Socket\n"
            "# Avg bus bandwidth    : 9.4012\nls: cannot access '/dev/infiniband': No such file or directory\n")
    (r,) = read_numbers(_lines(text))
    assert r.kind == "busbw" and "9.4012 GB/s" in r.en and "/dev/infiniband" in r.en
    assert r.causes["communication-bottleneck"] == "ib-unavailable"


def test_pad_token_none_shown_in_a_repl():
    text = ">>> tok.pad_token, tok.eos_token, len(tok)\n(None, '</s>', 32000)\n"
    (r,) = read_numbers(_lines(text))
    assert r.kind == "pad-token" and "32000" in r.en and "'</s>'" in r.en and r.line == 2


def test_a_small_share_of_failed_fetches_is_transient():
    (r,) = read_numbers(_lines("3 of 900 shard downloads failed; training crashed at step 1200"))
    assert "3 of 900" in r.en and "transient" in r.en and "step 1200" in r.en


def test_gpu_memory_growing_every_step_is_a_leak(assistant):
    log = "\n".join(f"step {s} | loss 2.{s % 7} | mem_alloc {4 + 0.5 * s / 10:.2f} GiB" for s in range(10, 130, 10))
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
           "23.65 GiB of which 100.00 MiB is free. Of the allocated memory 22.10 GiB is allocated by PyTorch, and "
           "200.00 MiB is reserved by PyTorch but unallocated.")
    top = assistant.diagnose(log + "\n" + oom).candidates[0]
    assert top.failure_mode == "cuda-oom" and top.causes[0].id == "step-tensors-kept-alive"
    assert any("leak" in r and "steps 10–120" in r for r in top.readings)
    assert "detach" in top.fixes[0].code.code and not any("Fragmentation" in r for r in top.readings)


_WD = ("[rank{r}]:[E0301 10:40:00.1 1 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
       "WorkNCCL(SeqNum=900, OpType=ALLREDUCE, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600010 "
       "milliseconds before timing out.")


def test_the_rank_that_skipped_alone_is_named_and_the_fix_skips_together(assistant):
    text = "\n".join([
        "[2026-03-01 10:29:00][rank0] step 300 loss 1.90",
        "[2026-03-01 10:29:01][rank3] skipping micro-batch 301: empty after filtering",
        "[2026-03-01 10:29:02][rank0] step 301 loss 1.88",
        *[_WD.format(r=r, n=1 if r == 3 else 4096) for r in range(4)],
    ])
    d = assistant.diagnose(text)
    top = d.candidates[0]
    assert top.failure_mode == "distributed-sync-failure" and top.causes[0].id == "rank-local-skip"
    assert "Rank 3" in top.note and "line 2" in top.note and top.evidence[0].line == 2
    assert "all_reduce" in top.fixes[0].code.code


def test_the_one_rank_that_never_timed_out_was_busy(assistant):
    text = "\n".join([
        "[2026-03-01 10:29:00][rank0] step 5000: saving a full checkpoint to /nfs/ckpt (rank 0 only)",
        *[_WD.format(r=r, n=4096) for r in range(1, 4)],
        "[2026-03-01 10:40:01][rank0] still writing shard 61/64",
    ])
    top = assistant.diagnose(text).candidates[0]
    assert top.failure_mode == "network-timeout" and top.causes[0].id == "collective-timeout-too-short"
    assert "rank 0 never did" in top.note and "61/64" in top.note and "failed first" not in top.note
    assert "all_gather_object" in top.fixes[0].code.code


def test_a_classification_report_with_dead_classes_reads_as_imbalance():
    text = "\n".join([
        "              precision    recall  f1-score   support",
        "         ham       0.95      1.00      0.97      9500",
        "        spam       0.00      0.00      0.00       500",
        "    accuracy                           0.95     10000",
        "   macro avg       0.47      0.50      0.49     10000",
        "label counts: Counter({'ham': 47000, 'spam': 3000})",
    ])
    (r,) = read_numbers(_lines(text))
    assert r.kind == "class-report" and "never predicts spam" in r.en and "0.49" in r.en and "94.0% ham" in r.en
    assert r.causes == {"data-imbalance": "classifier-class-imbalance"}


def test_an_oom_inside_generate_points_at_the_generation_settings():
    text = ("per_device_train_batch_size=8 per_device_eval_batch_size=32 num_beams=5 max_new_tokens=512\n"
            '  File "x/generation/utils.py", line 1, in generate\n'
            + OOM.format(req="2.00 GiB", slack="100.00 MiB"))
    kinds = {r.kind: r for r in read_numbers(_lines(text))}
    assert "160 sequences" in kinds["generate-oom"].en
    assert "per_device_train_batch_size=4" not in kinds["oom-capacity"].en


def test_an_empty_shard_names_the_earlier_checkpoint_to_fall_back_to():
    text = "\n".join([
        "trainer.train(resume_from_checkpoint='out/checkpoint-900')",
        "$ ls -l out/checkpoint-900 out/checkpoint-600",
        "-rw-r--r-- 1 a a 2000000000 Jan  1 10:00 model-00001-of-00002.safetensors",
        "-rw-r--r-- 1 a a          0 Jan  1 10:01 model-00002-of-00002.safetensors",
        "-rw-r--r-- 1 a a 2000000000 Jan  1 09:00 model-00001-of-00002.safetensors",
        "-rw-r--r-- 1 a a  700000000 Jan  1 09:00 model-00002-of-00002.safetensors",
        "out/checkpoint-600 is from an hour earlier",
    ])
    (r,) = read_numbers(_lines(text))
    assert "0 bytes" in r.en and r.line == 4 and "checkpoint-900" in r.en and "fall back to checkpoint-600" in r.en
    assert r.act_en.startswith("resume from checkpoint-600") and "checkpoint-900 aside" in r.act_en


def test_the_recovery_fix_says_which_checkpoint_to_resume_from(assistant):
    text = "\n".join([
        "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory",
        "while resuming with resume_from_checkpoint=run7/step_4000",
        "-rw-r--r-- 1 u u 8000000000 Mar  3 11:00 rank_0.pt",
        "-rw-r--r-- 1 u u     524288 Mar  3 11:00 rank_1.pt",
        "step_3000 and step_2000 are still on disk",
    ])
    top = assistant.diagnose(text).candidates[0]
    assert top.failure_mode == "checkpoint-corruption"
    first = top.fixes[0]
    assert first.here and "step_3000" in first.here and "step_4000" in first.here
    assert sum(f.here is not None for f in top.fixes) == 1  # told once, with the fix that acts on the cause
    assert "step_3000" in markdown(assistant.diagnose(text))


def test_preference_pairs_whose_chosen_answer_is_nearly_always_longer_are_a_length_shortcut():
    text = "\n".join([
        "chosen is longer in 81% of 20000 pairs",
        "spearman corr between reward and length = 0.71",
        "accuracy on length-balanced pairs: 0.52",
    ])
    (r,) = read_numbers(_lines(text))
    assert r.kind == "length-preference" and r.modes == ["data-imbalance"] and r.confidence > 0
    assert "81%" in r.en and "0.71" in r.en and "0.52" in r.en and "longer answers" in r.en
    assert r.causes == {"data-imbalance": "reward-pair-skew"}
    assert read_numbers(_lines("chosen is longer in 52% of 20000 pairs")) == []  # an even split is no shortcut


def test_megatron_logging_a_grad_norm_means_clipping_is_on(assistant):
    line = ("iteration      {i}/  90000 | consumed samples:  {c} | lm loss: {l}E+00 | loss scale: 1.0 | "
            "grad norm: {g} | number of skipped iterations:   0 |")
    rows = [line.format(i=100 + k, c=2048 * k, l=v, g=gn)
            for k, (v, gn) in enumerate([(2.1, 0.3), (2.1, 0.3), (2.08, 0.31), (2.1, 0.3), (6.2, 12.0), (3.0, 2.0),
                                         (2.2, 0.5), (2.1, 0.32)])]
    d = assistant.diagnose("\n".join(rows))
    assert d.facts.get("grad-clipping") == "yes"


def test_comm_timers_that_grew_while_compute_did_not_name_a_comm_bottleneck(assistant):
    def table(sync, gather):
        return ["(min, max) time across ranks (ms):",
                "    forward-backward ...............................: (2100.10, 2110.50)",
                f"    all-grads-sync .................................: ({sync - 5:.2f}, {sync:.2f})",
                f"    params-all-gather ..............................: ({gather - 3:.2f}, {gather:.2f})",
                "    optimizer ......................................: (80.10, 81.00)"]
    text = "\n".join([
        "host-a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB; OOB eth0",
        *table(210.0, 90.0),
        "host-b:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_2:1/IB; OOB eth0",
        *table(1900.0, 700.0),
    ])
    d = assistant.diagnose(text)
    top = d.candidates[0]
    assert top.failure_mode == "communication-bottleneck" and top.causes[0].id == "ib-unavailable"
    assert any("all-grads-sync 210 → 1900 ms" in r for r in top.readings)
    assert any("1 InfiniBand HCA(s) (mlx5_2" in r and "used 4 before" in r for r in top.readings)
    assert "NCCL_IB_HCA" in top.fixes[0].code.code
