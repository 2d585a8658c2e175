"""Write the independent labelled evaluation sets (``triage_cases.jsonl``, ``retrieval_queries.jsonl``).

The cases are hand-written here, in Python, so that escapes (ANSI colour codes, tqdm's ``\\r`` redraws,
tabs, newlines) end up in the JSONL exactly as a terminal would have produced them. The JSONL files are the
artefact; run ``python tests/data/build_sets.py`` after editing a case and commit both.

These sets are an evaluation, never a tuning target: nobody writing rules or retrieval reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent

ESC = "\x1b"
RED, YEL, GRN, MAG, BOLD, RST = f"{ESC}[31m", f"{ESC}[33m", f"{ESC}[32m", f"{ESC}[35m", f"{ESC}[1m", f"{ESC}[0m"

TRIAGE: list[dict] = []
QUERIES: list[dict] = []


def case(id_: str, labels: list[str], lang: str, kind: str, note: str, text: str) -> None:
    """Add one triage case (labels: primary first; empty = the assistant must abstain)."""
    TRIAGE.append({"id": id_, "text": text, "labels": labels, "lang": lang, "kind": kind, "note": note})


def query(id_: str, labels: list[str], lang: str, text: str) -> None:
    """Add one retrieval question (labels: acceptable record / passage ids)."""
    QUERIES.append({"id": id_, "text": text, "labels": labels, "lang": lang})


def tqdm_bar(start: int, stop: int, total: int, every: int, sec_per_it: float) -> str:
    """tqdm redraws of one progress bar, each preceded by a carriage return (as the terminal received them)."""
    out = []
    for step in range(start, stop + 1, every):
        pct = int(100 * step / total)
        filled = int(10 * step / total)
        bar = ("█" * filled).ljust(10)
        el = int(step * sec_per_it)
        rem = int((total - step) * sec_per_it)
        fmt = lambda s: f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"
        rate = f"{sec_per_it:.2f}s/it" if sec_per_it >= 1 else f"{1 / sec_per_it:.2f}it/s"
        out.append(f"\r{pct:3d}%|{bar}| {step}/{total} [{fmt(el)}<{fmt(rem)}, {rate}]")
    return "".join(out)


def trainer_dicts(rows: list[tuple], total_steps: int, steps_per_epoch: int, log_every: int, first: int) -> list[str]:
    """HF Trainer ``{'loss': ...}`` log lines; rows are (loss, grad_norm, lr) with ``None`` shown as nan."""
    lines = []
    for i, (loss, gn, lr) in enumerate(rows):
        step = first + i * log_every
        ep = round(step / steps_per_epoch, 2)
        ls = "nan" if loss is None else f"{loss}"
        gs = "nan" if gn is None else f"{gn}"
        lines.append(f"{{'loss': {ls}, 'grad_norm': {gs}, 'learning_rate': {lr}, 'epoch': {ep}}}")
    return lines


def megatron_line(it: int, total: int, ms: float, lr: str, loss: str, scale: str, gnorm: str,
                  skipped: int = 0, nans: int = 0, gbs: int = 1024) -> str:
    """One Megatron-LM iteration log line."""
    return (f" iteration {it:>8d}/{total:>8d} | consumed samples: {it * gbs:>12d} | elapsed time per iteration (ms): "
            f"{ms:.1f} | learning rate: {lr} | global batch size: {gbs:>5d} | lm loss: {loss} | loss scale: {scale} | "
            f"grad norm: {gnorm} | number of skipped iterations: {skipped:>3d} | number of nan iterations: {nans:>3d} |")


def torchrun_child_failed(script: str, host: str, rank: int, pid: int, exitcode: int, when: str, tb: str) -> str:
    """The ChildFailedError summary torchrun prints when a worker dies."""
    return f"""Traceback (most recent call last):
  File "/opt/conda/bin/torchrun", line 8, in <module>
    sys.exit(main())
             ^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/run.py", line 918, in main
    run(args)
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/run.py", line 909, in run
    elastic_launch(
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 138, in __call__
    return launch_agent(self._config, self._entrypoint, list(args))
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 269, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
{script} FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : {when}
  host      : {host}
  rank      : {rank} (local_rank: {rank % 8})
  exitcode  : {exitcode} (pid: {pid})
  error_file: <N/A>
  traceback : {tb}
============================================================"""


TRAINER_HEADER = """***** Running training *****
  Num examples = {n:,}
  Num Epochs = {ep}
  Instantaneous batch size per device = {bs}
  Total train batch size (w. parallel, distributed & accumulation) = {tbs}
  Gradient Accumulation steps = {ga}
  Total optimization steps = {steps:,}
  Number of trainable parameters = {params}"""


def trainer_header(n: int, ep: int, bs: int, tbs: int, ga: int, steps: int, params: str) -> str:
    return TRAINER_HEADER.format(n=n, ep=ep, bs=bs, tbs=tbs, ga=ga, steps=steps, params=params)



# ---------------------------------------------------------------------------------------------------------
# Numeric: nan-loss, loss-spike, gradient-explosion
# ---------------------------------------------------------------------------------------------------------


def add_numeric() -> None:
    rows = [(2.3141, 1.873, 1.99e-05), (2.0127, 1.402, 1.98e-05), (1.8843, 1.215, 1.97e-05),
            (1.8219, 3.907, 1.96e-05), (1.8675, 27.31, 1.95e-05), (None, None, 1.94e-05), (0.0, None, 1.93e-05),
            (0.0, None, 1.92e-05)]
    lines = trainer_dicts(rows, 6000, 1500, 50, 2850)
    body = [trainer_header(96000, 4, 4, 64, 2, 6000, "6,738,415,616")]
    steps = list(range(2850, 2850 + 50 * len(lines), 50))
    for st, ln in zip(steps, lines):
        body.append(tqdm_bar(st - 40, st, 6000, 20, 1.21) + "\r" + " " * 60 + "\r" + ln)
    case("nan-trainer-fp16-llama2", ["nan-loss", "gradient-explosion"], "en", "log",
         "HF Trainer run with fp16=True; grad_norm climbs for two logs, then loss and grad_norm print nan, "
         "then loss 0.0 (Trainer keeps stepping over skipped scaler steps). NaN is the headline; the grad_norm "
         "climb just before makes gradient explosion an acceptable secondary.",
         "python train.py --model_name_or_path meta-llama/Llama-2-7b-hf --fp16 True --learning_rate 2e-5\n"
         + "\n".join(body) + tqdm_bar(3240, 3260, 6000, 20, 1.21))

    case("nan-zh-fp16-step3000", ["nan-loss"], "zh", "one-line",
         "Typical chat message: NaN mid-run with fp16 and a fairly high LR; guide section 2 (FP16 溢出, 学习率过高).",
         "训练到 3000 步 loss 变成 nan 了，用的 fp16，学习率 2e-4，Qwen2.5-7B 全量微调，之前 loss 一直在 1.3 左右很稳定。")

    ds = []
    scale = 65536
    t = 8
    while scale >= 1:
        ds.append(f"[2026-11-30 08:41:{t:02d},{(t * 37) % 1000:03d}] [INFO] [loss_scaler.py:183:update_scale] "
                  f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {max(scale // 2, 1)}")
        scale //= 2
        t += 1
    case("nan-deepspeed-loss-scale-minimum", ["nan-loss", "gradient-explosion"], "en", "traceback",
         "DeepSpeed fp16 dynamic loss scaler halves on every overflow until it cannot go lower; the run dies with "
         "'Current loss scale already at minimum'. Inf/NaN gradients every step: NaN (FP16 overflow) first, "
         "gradient explosion acceptable.",
         "\n".join(ds[:6]) + "\n...\n" + "\n".join(ds[-4:]) + """
Traceback (most recent call last):
  File "/workspace/train_ds.py", line 214, in <module>
    main()
  File "/workspace/train_ds.py", line 188, in main
    model_engine.step()
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 2213, in step
    self._take_model_step(lr_kwargs)
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 2119, in _take_model_step
    self.optimizer.step()
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 1858, in step
    self._update_scale(self.overflow)
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 2102, in _update_scale
    self.loss_scaler.update_scale(has_overflow)
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/fp16/loss_scaler.py", line 175, in update_scale
    raise Exception(
Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.""")

    meg = [megatron_line(11800 + 100 * i, 250000, 1712.4 + 3 * i, "2.874E-04", l, "1.0", g, s, n, 2048)
           for i, (l, g, s, n) in enumerate([("2.061337E+00", "0.287", 0, 0), ("2.058190E+00", "0.301", 0, 0),
                                              ("2.049912E+00", "0.295", 0, 0), ("nan", "nan", 0, 100),
                                              ("nan", "nan", 0, 100), ("nan", "nan", 0, 100)])]
    case("nan-megatron-bf16-iterations", ["nan-loss"], "en", "log",
         "Megatron-LM pretraining (bf16): lm loss and grad norm turn nan abruptly with a healthy grad norm just "
         "before, so no explosion signal. nan iterations counter = 100 per log interval.",
         "\n".join(meg))

    case("nan-anomaly-logsoftmax", ["nan-loss"], "en", "traceback",
         "set_detect_anomaly(True) pinpoints the backward op producing NaN; chained warning + exception as "
         "PyTorch prints them.",
         """/opt/conda/lib/python3.11/site-packages/torch/autograd/graph.py:824: UserWarning: Error detected in LogSoftmaxBackward0. Traceback of forward call that caused the error:
  File "/home/lwang/sft/train.py", line 131, in <module>
    loss = compute_loss(model, batch)
  File "/home/lwang/sft/train.py", line 88, in compute_loss
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
 (Triggered internally at /pytorch/torch/csrc/autograd/python_anomaly_mode.cpp:122.)
  return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
Traceback (most recent call last):
  File "/home/lwang/sft/train.py", line 133, in <module>
    loss.backward()
  File "/opt/conda/lib/python3.11/site-packages/torch/_tensor.py", line 648, in backward
    torch.autograd.backward(
  File "/opt/conda/lib/python3.11/site-packages/torch/autograd/__init__.py", line 353, in backward
    _engine_run_backward(
  File "/opt/conda/lib/python3.11/site-packages/torch/autograd/graph.py", line 824, in _engine_run_backward
    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.""")

    case("nan-zh-first-step-labels", ["nan-loss", "data-format-error"], "zh", "mixed",
         "NaN from step 1 with bf16 and a low LR points at the data: samples whose labels are all -100 after "
         "truncation give 0/0 in the mean loss. Primary nan-loss; a label-masking data problem is acceptable.",
         "SFT 从第一步开始 loss 就是 nan，bf16，lr 1e-5，不像是学习率的问题：\n"
         "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.01}\n"
         "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.02}\n"
         "查了一下，有一部分样本 prompt 特别长，max_length=1024 截断以后 labels 全是 -100，会不会跟这个有关？")

    case("nan-zh-weights-inf-after-load", ["nan-loss", "checkpoint-corruption"], "zh", "mixed",
         "Weights contain inf/NaN (guide section 2 symptom '模型权重变为 inf/NaN'); since they came from a saved "
         "checkpoint, checkpoint corruption (saving without NaN check, section 7) is an acceptable reading.",
         "加载昨天保存的 checkpoint-12000 做推理，输出全是 !!!!!!，logits 全是 nan。用下面的代码检查了一下：\n"
         ">>> for n, p in model.named_parameters():\n"
         "...     if not torch.isfinite(p).all(): print(n)\n"
         "model.layers.27.mlp.down_proj.weight\n"
         "model.layers.27.post_attention_layernorm.weight\n"
         "model.norm.weight\n"
         "训练日志里 12000 步之前 loss 看着还正常，{'loss': 1.2034, 'grad_norm': 0.88, 'learning_rate': 1.2e-05, 'epoch': 1.6}")

    gn = [("2.0417", "1.12"), ("2.0355", "3.87"), ("2.1102", "41.6"), ("2.8731", "512.3"), ("nan", "nan")]
    case("nan-custom-loop-after-gradnorm", ["nan-loss", "gradient-explosion"], "en", "log",
         "Custom loop print-out: grad norm multiplies ~10x per log until loss is nan. Brief's canonical ambiguous "
         "case: NaN caused by a gradient explosion, primary nan-loss.",
         "\n".join(f"2026-11-28 22:{10 + i:02d}:41 | step {7400 + 20 * i:>5d} | loss {l} | grad_norm {g} | lr 3.00e-04 | "
                   f"tok/s 41,822" for i, (l, g) in enumerate(gn)) + "\nWARNING: loss is nan at step 7480, stopping.")

    # ---- loss-spike
    rows = [(1.7814, 0.412, 0.0002976), (1.7701, 0.398, 0.0002975), (1.7653, 0.431, 0.0002974),
            (6.9127, 3.184, 0.0002973), (5.2043, 1.207, 0.0002972), (3.1188, 0.733, 0.0002971),
            (2.0311, 0.512, 0.000297), (1.8126, 0.447, 0.0002969), (1.7689, 0.418, 0.0002968)]
    case("spike-trainer-recovers", ["loss-spike"], "en", "log",
         "Loss jumps ~4x for one log interval then recovers within a few hundred steps; grad_norm bump is small "
         "and recovers. Guide section 3 symptom 'may recover by itself'.",
         "\n".join(trainer_dicts(rows, 40000, 10000, 100, 21200)))

    spike = [(41800, "2.4127"), (41900, "2.4013"), (42000, "5.9318"), (42100, "4.1172"), (42200, "2.6650")]
    case("spike-loguru-coloured", ["loss-spike"], "en", "log",
         "loguru-formatted training log copied from a terminal with colour codes; one interval jumps 2.4 -> 5.9 "
         "and recovers.",
         "\n".join(f"{GRN}2026-11-30 0{i}:12:5{i}.31{i}{RST} | {BOLD}INFO    {RST} | {ESC}[36mtrainer{RST}:{ESC}[36mlog_step{RST}:"
                   f"{ESC}[36m214{RST} - {BOLD}step={st} loss={l} lr=1.80e-04 tokens_seen={st * 1048576 / 1e9:.1f}B{RST}"
                   for i, (st, l) in enumerate(spike)))

    case("spike-zh-after-warmup", ["loss-spike"], "zh", "question",
         "Spike right after a very short warmup: guide section 3 cause 'Warmup 不够'.",
         "warmup 结束之后 loss 突然从 1.6 跳到 4 点多，然后又慢慢降回来，大概过了 800 步才恢复。配置是 warmup_steps=10，"
         "总步数 20000，lr=3e-4，cosine。这正常吗？")

    meg = [megatron_line(it, 300000, ms, "1.502E-04", l, "1.0", g, 0, 0, 1536)
           for it, ms, l, g in [(18300, 980.2, "2.113402E+00", "0.219"), (18350, 979.8, "2.109876E+00", "0.224"),
                                (18400, 981.5, "9.417723E+00", "27.514"), (18450, 980.9, "4.802211E+00", "3.881"),
                                (18500, 980.4, "2.415580E+00", "0.731"), (18550, 979.9, "2.298731E+00", "0.305")]]
    case("spike-megatron-with-gradnorm", ["loss-spike", "gradient-explosion"], "en", "log",
         "Megatron log: one interval with lm loss 2.1 -> 9.4 and grad norm 0.22 -> 27.5, both back within 100 "
         "iterations. A transient spike; the grad-norm jump makes gradient-explosion an acceptable secondary.",
         "\n".join(meg))

    case("spike-zh-new-shard", ["loss-spike", "data-imbalance"], "zh", "mixed",
         "Spikes line up with loading a new data shard: guide section 3 cause '数据分布变化 切换到新的数据分片'. "
         "Shards with different content suggest a mixing/distribution problem too.",
         "每次切换到新的数据分片 loss 就会跳一下，日志如下：\n"
         "[2026-11-27 14:02:11] INFO dataset.py:88 Loading shard /data/pretrain/zh_web/part-00017-of-00064.parquet\n"
         "step 52100 loss 2.214\n"
         "step 52110 loss 3.872\n"
         "step 52120 loss 3.105\n"
         "step 52130 loss 2.498\n"
         "step 52140 loss 2.237\n"
         "shard 17 里面主要是论坛数据，前面 16 个是新闻。")

    case("spike-periodic-question", ["loss-spike"], "en", "question",
         "Recurring transient spikes during pretraining; classic bad-batch / Adam epsilon/beta2 territory.",
         "Pretraining a 1.3B model on 8xH100 (bf16, AdamW beta2=0.999, lr 4e-4, global batch 512). Every ~2000 "
         "steps the loss jumps from ~2.6 to 3.5-4.0 and comes back down over the next few hundred steps. No NaNs. "
         "Is this something I should fix or just ignore?")

    case("spike-zh-grad-accum-multi-gpu", ["loss-spike", "distributed-sync-failure"], "zh", "question",
         "Spikes that appear only with multi-GPU gradient accumulation: guide section 3 cause '梯度累积同步问题 "
         "分布式训练中梯度未正确同步'. Distributed sync is an acceptable secondary.",
         "单卡训练 loss 曲线很平滑，换成 4 卡 DDP + gradient_accumulation_steps=8 之后，曲线每隔几十步就有一个尖刺，"
         "自己写的训练循环，用了 model.no_sync()。是不是梯度累积的时候同步有问题？")

    # ---- gradient-explosion
    rows = [(2.0312, 0.934, 5e-05), (2.0148, 1.417, 5e-05), (2.1173, 12.62, 5e-05), (2.4409, 380.2, 5e-05),
            (5.8116, 15234.7, 5e-05), (11.2804, 208813.5, 5e-05)]
    case("gradexp-trainer-no-clipping", ["gradient-explosion", "loss-spike"], "en", "log",
         "grad_norm grows by orders of magnitude per log with max_grad_norm=0 (clipping disabled); loss diverges "
         "upward but is still finite. Primary gradient explosion.",
         "TrainingArguments(..., max_grad_norm=0.0, learning_rate=5e-05, lr_scheduler_type='constant', bf16=True)\n"
         + "\n".join(trainer_dicts(rows, 12000, 3000, 10, 1480)))

    case("gradexp-zh-no-clip", ["gradient-explosion"], "zh", "one-line",
         "Short description of a rising gradient norm without clipping; loss not yet NaN.",
         "grad_norm 一直在涨，从 1 左右涨到 1e4 了，loss 还没变 nan 但是在慢慢上升，没开梯度裁剪，要怎么处理？")

    meg = [megatron_line(it, 100000, 1402.7, "6.000E-04", l, "1.0", g, 0, 0, 512)
           for it, l, g in [(3100, "3.402118E+00", "1.843"), (3110, "3.415902E+00", "9.207"),
                            (3120, "3.688315E+00", "118.462"), (3130, "4.931208E+00", "2875.119"),
                            (3140, "7.204471E+00", "63518.804")]]
    case("gradexp-megatron-gradnorm", ["gradient-explosion", "nan-loss"], "en", "log",
         "Megatron grad norm 1.8 -> 6e4 in 40 iterations, loss climbing; the run is about to NaN. Explosion first.",
         "\n".join(meg))

    case("gradexp-clip-nonfinite", ["gradient-explosion", "nan-loss"], "en", "traceback",
         "clip_grad_norm_(error_if_nonfinite=True) refuses a non-finite total norm: gradients already inf. "
         "Explosion is the primary reading; NaN acceptable.",
         """Traceback (most recent call last):
  File "/mnt/code/rm_train/train_reward.py", line 276, in <module>
    train(cfg)
  File "/mnt/code/rm_train/train_reward.py", line 241, in train
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, error_if_nonfinite=True)
                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/torch/nn/utils/clip_grad.py", line 36, in _no_grad_wrapper
    return func(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/torch/nn/utils/clip_grad.py", line 222, in clip_grad_norm_
    total_norm = _get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/torch/nn/utils/clip_grad.py", line 36, in _no_grad_wrapper
    return func(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.11/dist-packages/torch/nn/utils/clip_grad.py", line 108, in _get_total_norm
    raise RuntimeError(
RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`""")

    case("gradexp-zh-ppo-value-head", ["gradient-explosion"], "zh", "mixed",
         "RLHF PPO logs: value-head grad norm in the tens of thousands while policy is moderate.",
         "PPO 阶段 value head 好像梯度爆炸了，critic 的 loss 越来越大，wandb 上的数：\n"
         "step 340  policy/grad_norm: 1.84   critic/grad_norm: 12.7    critic/vf_loss: 0.412\n"
         "step 360  policy/grad_norm: 2.11   critic/grad_norm: 1532.7  critic/vf_loss: 3.981\n"
         "step 380  policy/grad_norm: 2.36   critic/grad_norm: 88123.4 critic/vf_loss: 41.27\n"
         "reward 没做 normalize，critic lr 是 1e-5。")

    case("gradexp-deepspeed-gradnorm-warn", ["gradient-explosion"], "en", "log",
         "DeepSpeed engine step logs with the global grad norm printed by the training script; clipping set to "
         "0 in ds_config (gradient_clipping: 0.0).",
         "[2026-11-29 03:12:44,118] [INFO] [config.py:1003:print]   gradient_clipping ............ 0.0\n"
         "[2026-11-29 05:47:02,611] [INFO] [logging.py:107:log_dist] [Rank 0] step=4200, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]\n"
         "rank0: step 4200 loss 1.9721 global_grad_norm 0.8713\n"
         "[2026-11-29 05:52:19,004] [INFO] [logging.py:107:log_dist] [Rank 0] step=4250, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]\n"
         "rank0: step 4250 loss 1.9846 global_grad_norm 46.0215\n"
         "[2026-11-29 05:57:36,877] [INFO] [logging.py:107:log_dist] [Rank 0] step=4300, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]\n"
         "rank0: step 4300 loss 2.3310 global_grad_norm 7342.5527")

# ---------------------------------------------------------------------------------------------------------
# Memory: cuda-oom, cpu-oom, disk-full
# ---------------------------------------------------------------------------------------------------------

OOM_TRAINER_TB = """Traceback (most recent call last):
  File "/home/ubuntu/finetune/sft.py", line 187, in <module>
    trainer.train()
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/transformers/trainer.py", line 2241, in train
    return inner_training_loop(
           ^^^^^^^^^^^^^^^^^^^^
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/transformers/trainer.py", line 2548, in _inner_training_loop
    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/transformers/trainer.py", line 3740, in training_step
    self.accelerator.backward(loss, **kwargs)
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/accelerate/accelerator.py", line 2329, in backward
    loss.backward(**kwargs)
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/torch/_tensor.py", line 626, in backward
    torch.autograd.backward(
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 347, in backward
    _engine_run_backward(
  File "/home/ubuntu/.venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 823, in _engine_run_backward
    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 79.14 GiB of which 2.37 GiB is free. Including non-PyTorch memory, this process has 76.75 GiB memory in use. Of the allocated memory 71.02 GiB is allocated by PyTorch, and 5.08 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"""


def add_memory() -> None:
    case("oom-trainer-backward-a100", ["cuda-oom"], "en", "traceback",
         "Full HF Trainer traceback, torch 2.5+ OutOfMemoryError wording, during backward on an 80 GB card.",
         tqdm_bar(1, 3, 3750, 1, 6.4) + "\n" + OOM_TRAINER_TB)

    case("oom-one-line-2gib", ["cuda-oom"], "en", "one-line",
         "Bare one-liner, the way people paste it in chat.",
         "CUDA out of memory. Tried to allocate 2.00 GiB")

    case("oom-zh-4090-lora", ["cuda-oom"], "zh", "one-line",
         "Consumer GPU, LoRA already at batch size 1: guide section 4 fixes (gradient checkpointing, QLoRA, "
         "shorter max_seq_length).",
         "显存不够，Tried to allocate 2.00 GiB，4090 24G 跑 Llama-3-8B 的 LoRA，batch size 已经是 1 了，max_length 4096")

    ranks = []
    for r in (3, 0, 6, 1, 5, 2, 7, 4):
        free = {0: "1.02", 1: "1.14", 2: "0.98", 3: "1.07", 4: "1.11", 5: "0.99", 6: "1.05", 7: "1.13"}[r]
        ranks.append(f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 15.66 GiB. GPU {r} has a "
                     f"total capacity of 79.11 GiB of which {free} GiB is free. Process 1872{r} has 78.08 GiB memory in use. "
                     f"Of the allocated memory 60.31 GiB is allocated by PyTorch, and 16.99 GiB is reserved by PyTorch but "
                     f"unallocated. If reserved but unallocated memory is large try setting "
                     f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                     f"Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    head = ("[rank3]: Traceback (most recent call last):\n[rank0]: Traceback (most recent call last):\n"
            "[rank3]:   File \"/workspace/llm-train/pretrain.py\", line 402, in <module>\n"
            "[rank0]:   File \"/workspace/llm-train/pretrain.py\", line 402, in <module>\n"
            "[rank3]:     engine.step()\n[rank0]:     engine.step()\n"
            "[rank3]:   File \"/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/zero/stage3.py\", line 2117, in step\n"
            "[rank0]:   File \"/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/zero/stage3.py\", line 2117, in step\n"
            "[rank3]:     self._optimizer_step(sub_group_id)\n[rank0]:     self._optimizer_step(sub_group_id)\n")
    case("oom-8ranks-deepspeed-interleaved", ["cuda-oom"], "en", "traceback",
         "All 8 ranks OOM at the ZeRO-3 optimizer step, their tracebacks interleaved with [rankN]: prefixes as "
         "torchrun prints them; ANSI-coloured torchrun warning.",
         head + "\n".join(ranks) + "\n"
         + f"{YEL}W1202 11:20:31.406000 90112 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 90180 closing signal SIGTERM{RST}\n"
         + f"{RED}E1202 11:20:32.118000 90112 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 90177) of binary: /usr/bin/python{RST}\n"
         + torchrun_child_failed("pretrain.py", "h100-node-03", 0, 90177, 1, "2026-12-02_11:20:31", "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"))

    case("oom-old-format-eval-generate", ["cuda-oom"], "en", "traceback",
         "Older (torch 1.13) message format; OOM happens in evaluation while generating (KV cache growth), "
         "guide section 4 '推理时 OOM'.",
         """Traceback (most recent call last):
  File "run_eval.py", line 95, in <module>
    out = model.generate(**enc, max_new_tokens=2048, num_beams=4)
  File "/opt/conda/lib/python3.9/site-packages/torch/autograd/grad_mode.py", line 27, in decorate_context
    return func(*args, **kwargs)
  File "/opt/conda/lib/python3.9/site-packages/transformers/generation/utils.py", line 1611, in generate
    return self.beam_search(
  File "/opt/conda/lib/python3.9/site-packages/transformers/models/llama/modeling_llama.py", line 346, in forward
    key_states = torch.cat([past_key_value[0], key_states], dim=2)
RuntimeError: CUDA out of memory. Tried to allocate 256.00 MiB (GPU 0; 23.69 GiB total capacity; 21.80 GiB already allocated; 201.94 MiB free; 22.52 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF""")

    case("oom-zh-mid-training-long-sample", ["cuda-oom"], "zh", "mixed",
         "OOM at a specific step after 1200 fine steps: guide section 4 '特定 Step OOM 某些样本特别长'.",
         "训练到 1200 多步突然 OOM，前面都好好的，是不是有特别长的样本？没做截断。\n"
         + tqdm_bar(1236, 1240, 5000, 2, 2.87) + "\n"
         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 11.25 GiB. GPU 0 has a total capacity of "
         "47.54 GiB of which 6.12 GiB is free. Including non-PyTorch memory, this process has 41.41 GiB memory in use.")

    case("oom-cublas-alloc-failed", ["cuda-oom"], "en", "traceback",
         "Hard: no 'out of memory' words. cuBLAS cannot allocate its workspace because the card is full; usually "
         "another process or an oversized batch.",
         """  File "/opt/venv/lib/python3.10/site-packages/torch/nn/modules/linear.py", line 125, in forward
    return F.linear(input, self.weight, self.bias)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`""")

    case("oom-zh-grad-ckpt-question", ["cuda-oom"], "zh", "question",
         "A question, not a paste: full fine-tuning on too little memory; guide section 4 fix list.",
         "全量微调 Qwen2-7B，8 张 A800 80G，zero2，seq_len 8192 一启动就爆显存，除了减 batch size 还有什么办法？")

    # ---- cpu-oom
    case("cpuoom-dmesg-killer", ["cpu-oom"], "en", "log",
         "Kernel OOM killer lines from dmesg after a training process vanished without a traceback.",
         "$ sudo dmesg -T | tail -n 6\n"
         "[Tue Dec  1 02:17:44 2026] python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n"
         "[Tue Dec  1 02:17:44 2026] Mem-Info:\n"
         "[Tue Dec  1 02:17:44 2026] active_anon:119842311 inactive_anon:4112 isolated_anon:0\n"
         "[Tue Dec  1 02:17:44 2026] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/user.slice/user-1001.slice/session-77.scope,task=python,pid=48213,uid=1001\n"
         "[Tue Dec  1 02:17:44 2026] Out of memory: Killed process 48213 (python) total-vm:612870116kB, anon-rss:478223104kB, file-rss:102400kB, shmem-rss:0kB, UID:1001 pgtables:948812kB oom_score_adj:0\n"
         "[Tue Dec  1 02:17:45 2026] oom_reaper: reaped process 48213 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB")

    case("cpuoom-torchrun-sigkill", ["cpu-oom"], "en", "log",
         "Worker killed with SIGKILL (-9) and no Python traceback: almost always the host OOM killer. Note that "
         "other causes of SIGKILL exist, but this is the standard reading.",
         "W1130 18:02:11.552000 3302 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 3371 closing signal SIGTERM\n"
         "W1130 18:02:11.553000 3302 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 3372 closing signal SIGTERM\n"
         "W1130 18:02:11.553000 3302 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 3374 closing signal SIGTERM\n"
         "E1130 18:02:12.901000 3302 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 2 (pid: 3373) of binary: /usr/bin/python3\n"
         + torchrun_child_failed("finetune_qwen.py", "worker-2", 2, 3373, -9, "2026-11-30_18:02:11", "Signal 9 (SIGKILL) received by PID 3373"))

    case("cpuoom-zh-loading-shards-killed", ["cpu-oom"], "zh", "mixed",
         "Process killed while loading checkpoint shards into host RAM (8 ranks each loading the full 70B model).",
         "加载 70B 模型的时候进程直接 Killed 了，没有任何报错，机器内存 512G，8 卡每卡一个进程：\n"
         "Loading checkpoint shards:  34%|███▍      | 10/29 [02:13<04:12, 13.31s/it]"
         "\rLoading checkpoint shards:  38%|███▊      | 11/29 [02:26<03:59, 13.30s/it]Killed")

    case("cpuoom-dataloader-worker-killed", ["cpu-oom"], "en", "traceback",
         "A DataLoader worker killed by the kernel (signal: Killed) - host memory exhaustion in workers.",
         """Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1251, in _try_get_data
    data = self._data_queue.get(timeout=timeout)
  File "/usr/lib/python3.10/queue.py", line 180, in get
    self.not_empty.wait(remaining)
  File "/usr/lib/python3.10/threading.py", line 324, in wait
    gotit = waiter.acquire(True, timeout)
  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/signal_handling.py", line 73, in handler
    _error_if_any_worker_fails()
RuntimeError: DataLoader worker (pid 91234) is killed by signal: Killed. 

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "train_vlm.py", line 310, in <module>
    for step, batch in enumerate(train_loader):
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 708, in __next__
    data = self._next_data()
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1458, in _next_data
    idx, data = self._get_data()
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1420, in _get_data
    success, data = self._try_get_data()
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1264, in _try_get_data
    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e
RuntimeError: DataLoader worker (pid(s) 91234) exited unexpectedly""")

    case("cpuoom-k8s-oomkilled", ["cpu-oom"], "en", "log",
         "Kubernetes pod status: container memory limit hit (exit code 137).",
         "$ kubectl describe pod llm-sft-worker-0 -n training\n"
         "...\n"
         "    State:          Waiting\n"
         "      Reason:       CrashLoopBackOff\n"
         "    Last State:     Terminated\n"
         "      Reason:       OOMKilled\n"
         "      Exit Code:    137\n"
         "      Started:      Mon, 30 Nov 2026 09:12:40 +0000\n"
         "      Finished:     Mon, 30 Nov 2026 09:31:05 +0000\n"
         "    Ready:          False\n"
         "    Restart Count:  3\n"
         "    Limits:\n"
         "      memory:          200Gi\n"
         "      nvidia.com/gpu:  8")

    case("cpuoom-zh-datasets-map", ["cpu-oom"], "zh", "question",
         "datasets.map with many processes holding whole shards in RAM; host memory grows until the kill.",
         "用 datasets 的 map 做 tokenize，num_proc=64，内存一直涨，涨到 900 多 G 以后进程就被 kill 了，数据大概 300G 的 jsonl。")

    case("cpuoom-shm-bus-error", ["cpu-oom", "disk-full"], "en", "traceback",
         "Hard/ambiguous: Docker's default 64 MB /dev/shm is a RAM-backed filesystem that fills up. Host shared "
         "memory exhaustion is the primary reading; 'a filesystem is full' (disk-full) is acceptable.",
         "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
         " (function _signal_handler)\n"
         "Traceback (most recent call last):\n"
         "  File \"/workspace/train.py\", line 201, in <module>\n"
         "    for batch in loader:\n"
         "RuntimeError: DataLoader worker (pid 2231) is killed by signal: Bus error. It is possible that dataloader's "
         "workers are out of shared memory. Please try to raise your shared memory limit.")

    # ---- disk-full
    case("disk-safetensors-storagefull", ["disk-full"], "en", "traceback",
         "Trainer checkpoint save fails inside safetensors with the Rust IoError StorageFull wording.",
         """{'loss': 1.1287, 'grad_norm': 0.634, 'learning_rate': 1.6e-05, 'epoch': 1.33}
Traceback (most recent call last):
  File "/data/jobs/sft/train.py", line 142, in <module>
    trainer.train(resume_from_checkpoint=args.resume)
  File "/data/envs/sft/lib/python3.11/site-packages/transformers/trainer.py", line 2241, in train
    return inner_training_loop(
  File "/data/envs/sft/lib/python3.11/site-packages/transformers/trainer.py", line 2612, in _inner_training_loop
    self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval, start_time)
  File "/data/envs/sft/lib/python3.11/site-packages/transformers/trainer.py", line 3092, in _maybe_log_save_evaluate
    self._save_checkpoint(model, trial)
  File "/data/envs/sft/lib/python3.11/site-packages/transformers/trainer.py", line 3189, in _save_checkpoint
    self.save_model(output_dir, _internal_call=True)
  File "/data/envs/sft/lib/python3.11/site-packages/transformers/modeling_utils.py", line 3034, in save_pretrained
    safe_save_file(shard, os.path.join(save_directory, shard_file), metadata={"format": "pt"})
  File "/data/envs/sft/lib/python3.11/site-packages/safetensors/torch.py", line 286, in save_file
    serialize_file(_flatten(tensors), filename, metadata=metadata)
safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })""")

    case("disk-torch-save-enforce-fail", ["disk-full", "checkpoint-corruption"], "en", "traceback",
         "Hard: torch.save's zip writer fails mid-file ('file write failed') - the usual cause is a full disk; the "
         "half-written .pt is a corrupt checkpoint, so checkpoint-corruption is acceptable.",
         """Traceback (most recent call last):
  File "/home/ray/train_loop.py", line 377, in save_checkpoint
    torch.save(state, os.path.join(ckpt_dir, f"step_{step}.pt"))
  File "/home/ray/anaconda3/lib/python3.10/site-packages/torch/serialization.py", line 652, in save
    with _open_zipfile_writer(f) as opened_zipfile:
  File "/home/ray/anaconda3/lib/python3.10/site-packages/torch/serialization.py", line 499, in __exit__
    self.file_like.write_end_of_file()
RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 17213498240 vs 17213498128

During handling of the above exception, another exception occurred:

RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/1043: file write failed""")

    case("disk-zh-save-ckpt", ["disk-full"], "zh", "one-line",
         "One-liner in Chinese with the errno text.",
         "保存 checkpoint 的时候报 OSError: [Errno 28] No space left on device，盘是 2T 的，怎么会满？")

    case("disk-df-output", ["disk-full"], "en", "mixed",
         "df output pasted with a question; /data at 100% after many checkpoints without save_total_limit.",
         "Run crashed at the step-4000 save. df says:\n"
         "Filesystem      Size  Used Avail Use% Mounted on\n"
         "overlay         200G   41G  160G  21% /\n"
         "tmpfs            64M     0   64M   0% /dev\n"
         "/dev/nvme1n1    3.5T  3.5T     0 100% /data\n"
         "shm              64G   12K   64G   1% /dev/shm\n"
         "$ du -sh /data/outputs/mistral-7b-sft/*\n"
         "63G\t/data/outputs/mistral-7b-sft/checkpoint-500\n"
         "63G\t/data/outputs/mistral-7b-sft/checkpoint-1000\n"
         "...\n"
         "41G\t/data/outputs/mistral-7b-sft/checkpoint-4000")

    case("disk-datasets-cache", ["disk-full"], "en", "traceback",
         "datasets writes Arrow cache files during map(); the cache volume fills.",
         """Map (num_proc=16):  71%|███████   | 2840119/4000000 [41:22<16:54, 1143.27 examples/s]
multiprocess.pool.RemoteTraceback: 
\"\"\"
Traceback (most recent call last):
  File "/root/miniconda3/lib/python3.11/site-packages/datasets/arrow_writer.py", line 610, in write_table
    self.pa_writer.write_table(pa_table, writer_batch_size)
  File "pyarrow/ipc.pxi", line 529, in pyarrow.lib._CRecordBatchWriter.write_table
  File "pyarrow/error.pxi", line 89, in pyarrow.lib.check_status
OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device
\"\"\"""")

    case("disk-zh-optimizer-pt", ["disk-full"], "zh", "mixed",
         "Long run stopped during save; no save_total_limit (guide section 7 best practice keeps the last N).",
         "跑了两天的训练停了，日志最后一行是\n"
         "OSError: [Errno 28] No space left on device: '/mnt/ckpt/qwen-sft/checkpoint-18000/optimizer.pt'\n"
         "save_steps=500 没设 save_total_limit，每个 checkpoint 大概 90G。")

# ---------------------------------------------------------------------------------------------------------
# Data: token-out-of-range, data-format-error, data-imbalance
# ---------------------------------------------------------------------------------------------------------


def add_data() -> None:
    asserts = "\n".join(
        f"../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [{b},0,0], thread: [{t},0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed."
        for b, t in [(312, 64), (312, 65), (312, 66), (312, 67), (87, 0), (87, 1)])
    case("tok-cuda-index-assert", ["token-out-of-range"], "en", "traceback",
         "The embedding gather assert followed by the asynchronous device-side assert message; the input ids "
         "exceed the embedding rows.",
         asserts + """
Traceback (most recent call last):
  File "/workspace/sft/train.py", line 155, in <module>
    trainer.train()
  File "/usr/local/lib/python3.10/dist-packages/transformers/models/qwen2/modeling_qwen2.py", line 560, in forward
    inputs_embeds = self.embed_tokens(input_ids)
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/sparse.py", line 190, in forward
    return F.embedding(
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""")

    case("tok-cpu-index-out-of-range", ["token-out-of-range"], "en", "traceback",
         "The same bug on CPU gives a plain IndexError in F.embedding.",
         """Traceback (most recent call last):
  File "debug_batch.py", line 41, in <module>
    out = model(**batch)
  File "/home/kim/.local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1773, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/home/kim/.local/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py", line 385, in forward
    inputs_embeds = self.embed_tokens(input_ids)
  File "/home/kim/.local/lib/python3.11/site-packages/torch/nn/functional.py", line 2551, in embedding
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
IndexError: index out of range in self""")

    case("tok-zh-added-special-tokens", ["token-out-of-range"], "zh", "question",
         "Added special tokens without resize_token_embeddings: the textbook token-id-out-of-range cause.",
         "给 tokenizer 加了 4 个 special token（<|tool_call|> 之类的）之后训练就报 device-side assert triggered，"
         "去掉这几个 token 就没事，是不是还要 resize_token_embeddings？")

    case("tok-zh-tokenizer-mismatch", ["token-out-of-range"], "zh", "mixed",
         "Tokenizer from a different model family (vocab 151k) on a 32k-vocab model; the guide's check '检查 Token "
         "ID 范围'.",
         "数据是用 Qwen 的 tokenizer 预处理好的（词表 151643），模型用的是 Llama-2-7B（32000），一跑就报错：\n"
         "max input id = 151643, embedding rows = 32000\n"
         "RuntimeError: CUDA error: device-side assert triggered\n"
         "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")

    case("tok-nll-label-assert", ["token-out-of-range", "data-format-error"], "en", "traceback",
         "Label ids outside [0, vocab) (padding with -1 instead of -100, or label ids from another vocab) trigger "
         "the NLL loss assert; an id-range problem in the targets. Label-masking format error is acceptable.",
         "\n".join(f"/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
                   f"thread: [{t},0,0] Assertion `t >= 0 && t < n_classes` failed." for t in range(4))
         + """
Traceback (most recent call last):
  File "train_cls_head.py", line 212, in <module>
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1""")

    case("tok-sequence-longer-than-positions", ["token-out-of-range"], "en", "log",
         "Hard: the tokenizer warns that sequences exceed the model's max positions, then the position-embedding "
         "lookup asserts. Indices out of range, but position ids instead of token ids.",
         "Token indices sequence length is longer than the specified maximum sequence length for this model "
         "(9102 > 2048). Running this sequence through the model will result in indexing errors\n"
         + tqdm_bar(0, 3, 1200, 1, 1.9) + "\n"
         "../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [41,0,0], thread: [96,0,0] "
         "Assertion `srcIndex < srcSelectDimSize` failed.\n"
         "RuntimeError: CUDA error: device-side assert triggered")

    # ---- data-format-error
    case("fmt-jsondecode-extra-data", ["data-format-error"], "en", "traceback",
         "load_dataset('json') on a file that is a pretty-printed JSON array mixed with JSONL; chained "
         "exception ending in DatasetGenerationError.",
         """Generating train split: 0 examples [00:00, ? examples/s]
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/datasets/packaged_modules/json/json.py", line 137, in _generate_tables
    pa_table = paj.read_json(
  File "pyarrow/_json.pyx", line 308, in pyarrow._json.read_json
  File "pyarrow/error.pxi", line 154, in pyarrow.lib.pyarrow_internal_check_status
  File "pyarrow/error.pxi", line 91, in pyarrow.lib.check_status
pyarrow.lib.ArrowInvalid: JSON parse error: Missing a comma or '}' after an object member. in row 211

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/datasets/packaged_modules/json/json.py", line 160, in _generate_tables
    dataset = json.load(f)
  File "/opt/conda/lib/python3.10/json/__init__.py", line 293, in load
    return loads(fp.read(),
  File "/opt/conda/lib/python3.10/json/decoder.py", line 340, in decode
    raise JSONDecodeError("Extra data", s, end)
json.decoder.JSONDecodeError: Extra data: line 2 column 1 (char 1842)

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "prepare.py", line 12, in <module>
    ds = load_dataset("json", data_files="data/sft_v3.jsonl", split="train")
  File "/opt/conda/lib/python3.10/site-packages/datasets/builder.py", line 1625, in _prepare_split_single
    raise DatasetGenerationError("An error occurred while generating the dataset") from e
datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset""")

    case("fmt-arrow-type-changed", ["data-format-error"], "en", "traceback",
         "ArrowInvalid from mixed types in a column across rows (content is a string in some rows, a list of parts "
         "in others).",
         "pyarrow.lib.ArrowInvalid: JSON parse error: Column(/messages/[]/content) changed from string to array in row 3817\n"
         "datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset")

    case("fmt-keyerror-column", ["data-format-error"], "en", "traceback",
         "Preprocessing function expects an 'instruction' column the dataset does not have (it has 'prompt').",
         """Map:   0%|          | 0/52002 [00:00<?, ? examples/s]
Traceback (most recent call last):
  File "/home/dev/alpaca-lora/finetune.py", line 231, in <module>
    train_data = data["train"].shuffle().map(generate_and_tokenize_prompt)
  File "/home/dev/.venv/lib/python3.11/site-packages/datasets/arrow_dataset.py", line 560, in wrapper
    out: Union["Dataset", "DatasetDict"] = func(self, *args, **kwargs)
  File "/home/dev/.venv/lib/python3.11/site-packages/datasets/arrow_dataset.py", line 3509, in _map_single
    for i, example in iter_outputs(shard_iterable):
  File "/home/dev/.venv/lib/python3.11/site-packages/datasets/arrow_dataset.py", line 3459, in apply_function
    processed_inputs = function(*fn_args, *additional_args, **fn_kwargs)
  File "/home/dev/alpaca-lora/finetune.py", line 188, in generate_and_tokenize_prompt
    full_prompt = prompter.generate_prompt(data_point["instruction"], data_point["input"], data_point["output"])
  File "/home/dev/.venv/lib/python3.11/site-packages/datasets/formatting/formatting.py", line 280, in __getitem__
    value = self.data[key]
KeyError: 'instruction'""")

    case("fmt-zh-jsondecode-pandas", ["data-format-error"], "zh", "mixed",
         "Brief's example: JSONDecodeError on load, JSONL exported by pandas with NaN literals.",
         "数据集加载报错 JSONDecodeError，数据是用 pandas to_json 导出的 jsonl：\n"
         "json.decoder.JSONDecodeError: Expecting value: line 1 column 120 (char 119)\n"
         "看了一下第一行里面有 \"output\": NaN 这种东西。")

    case("fmt-zh-unable-to-create-tensor", ["data-format-error"], "zh", "mixed",
         "Collator cannot batch: labels are nested lists / not padded. A format problem of the tokenised data.",
         "自己写的预处理，Trainer 一开始就报这个，padding 已经设了：\n"
         "ValueError: Unable to create tensor, you should probably activate truncation and/or padding with "
         "'padding=True' 'truncation=True' to have batched tensors with the same length. Perhaps your features "
         "(`labels` in this case) have excessive nesting (inputs type `list` where type `int` is expected).")

    case("fmt-chat-template-roles", ["data-format-error"], "en", "traceback",
         "apply_chat_template on conversations with two consecutive user turns; the template raises.",
         """  File "/usr/local/lib/python3.11/site-packages/transformers/utils/chat_template_utils.py", line 468, in render_jinja_template
    rendered_chat = compiled_template.render(
  File "/usr/local/lib/python3.11/site-packages/jinja2/environment.py", line 1295, in render
    self.environment.handle_exception()
  File "<template>", line 1, in top-level template code
  File "/usr/local/lib/python3.11/site-packages/jinja2/sandbox.py", line 401, in call
    return __context.call(__obj, *args, **kwargs)
  File "/usr/local/lib/python3.11/site-packages/transformers/utils/chat_template_utils.py", line 411, in raise_exception
    raise jinja2.exceptions.TemplateError(message)
jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...""")

    case("fmt-none-text-tokenizer", ["data-format-error"], "en", "traceback",
         "Some rows have text = None (null in JSONL); the fast tokenizer's TypeError.",
         """  File "tokenize_corpus.py", line 57, in tok
    return tokenizer(batch["text"], truncation=True, max_length=4096)
  File "/opt/py/lib/python3.10/site-packages/transformers/tokenization_utils_base.py", line 3073, in __call__
    encodings = self._call_one(text=text, text_pair=text_pair, **all_kwargs)
  File "/opt/py/lib/python3.10/site-packages/transformers/tokenization_utils_fast.py", line 539, in _batch_encode_plus
    encodings = self._tokenizer.encode_batch(
TypeError: TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]""")

    case("fmt-cast-error-columns", ["data-format-error"], "en", "traceback",
         "Two data files with different columns loaded together: datasets' CastError.",
         "datasets.table.CastError: Couldn't cast\n"
         "conversations: list<item: struct<from: string, value: string>>\n"
         "  child 0, item: struct<from: string, value: string>\n"
         "      child 0, from: string\n"
         "      child 1, value: string\n"
         "source: string\n"
         "to\n"
         "{'messages': List({'content': Value('string'), 'role': Value('string')})}\n"
         "because column names don't match\n\n"
         "During handling of the above exception, another exception occurred:\n\n"
         "datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset")

    case("fmt-py313-coloured-keyerror-messages", ["data-format-error"], "en", "traceback",
         "Python 3.13 colourised traceback pasted with its ANSI escapes: the formatting function expects a "
         "'messages' column but the data uses ShareGPT 'conversations'.",
         "Traceback (most recent call last):\n"
         f'  File {MAG}"/home/ops/sft/prepare.py"{RST}, line {MAG}48{RST}, in {MAG}<module>{RST}\n'
         f"    ds = ds.map(to_chat, remove_columns=ds.column_names)\n"
         f'  File {MAG}"/home/ops/sft/prepare.py"{RST}, line {MAG}31{RST}, in {MAG}to_chat{RST}\n'
         f"    text = tok.apply_chat_template({RED}example{RST}{ESC}[1;31m[\"messages\"]{RST}, tokenize=False)\n"
         f"                                   {RED}~~~~~~~{RST}{ESC}[1;31m^^^^^^^^^^^^{RST}\n"
         f"{ESC}[1;35mKeyError{RST}: {MAG}'messages'{RST}")

    # ---- data-imbalance
    case("imb-zh-language-mix", ["data-imbalance"], "zh", "question",
         "Language mix skew in SFT data; the guide's '分布不均'.",
         "SFT 数据里 90% 是英文，中文只有 5% 左右，训练完中文回答质量明显变差，经常中英混杂，要怎么调配比？")

    case("imb-label-counts-f1", ["data-imbalance"], "en", "mixed",
         "Classifier fine-tune: label counts and per-class metrics show the majority class swamping training.",
         "Label distribution (train): {'safe': 182340, 'unsafe': 4112}\n"
         "***** eval metrics *****\n"
         "  epoch                   =        3.0\n"
         "  eval_accuracy           =     0.9781\n"
         "  eval_f1_unsafe          =     0.0213\n"
         "  eval_loss               =     0.1027\n"
         "Accuracy looks great but the model basically never predicts 'unsafe'. What's going on?")

    case("imb-per-domain-eval-loss", ["data-imbalance"], "en", "log",
         "Per-domain eval losses diverge: the web subset dominates the mixture and code regresses.",
         "mixture weights: web=0.86 books=0.08 code=0.04 math=0.02\n"
         "{'eval_web_loss': 2.412, 'eval_code_loss': 1.318, 'eval_math_loss': 1.744, 'epoch': 0.2}\n"
         "{'eval_web_loss': 2.287, 'eval_code_loss': 1.392, 'eval_math_loss': 1.801, 'epoch': 0.4}\n"
         "{'eval_web_loss': 2.203, 'eval_code_loss': 1.477, 'eval_math_loss': 1.866, 'epoch': 0.6}\n"
         "{'eval_web_loss': 2.151, 'eval_code_loss': 1.553, 'eval_math_loss': 1.921, 'epoch': 0.8}")

    case("imb-zh-one-source-dominates", ["data-imbalance"], "zh", "mixed",
         "Source counts after dedup: one source is 60% of the data.",
         "数据去重之后统计了一下来源，发现一大半样本都来自同一个来源，模型回答风格全变成客服腔了：\n"
         "source            count     ratio\n"
         "kefu_logs        412,380   61.2%\n"
         "zhihu_qa          98,114   14.6%\n"
         "wiki_rewrite      71,902   10.7%\n"
         "code_instruct     52,006    7.7%\n"
         "math_cot          39,217    5.8%")

    case("imb-short-examples-dominate", ["data-imbalance"], "en", "question",
         "Length distribution skew in SFT data: mostly short single-turn samples.",
         "About 85% of our SFT examples are short single-turn Q&A under 100 tokens, and only a few thousand are "
         "long multi-turn conversations. After fine-tuning the model gives terse answers and loses track in "
         "long chats. Should I upsample the long ones?")

    case("imb-zh-multitask-math", ["data-imbalance"], "zh", "question",
         "Multi-task mixture where one task is 2%; interleave_datasets probabilities.",
         "多任务一起训，数学题只占 2%，训完数学能力几乎没提升，interleave_datasets 的 probabilities 应该怎么设？"
         "还是直接把数学数据重复几遍？")

# ---------------------------------------------------------------------------------------------------------
# Infrastructure: distributed-sync-failure, checkpoint-corruption, network-timeout
# ---------------------------------------------------------------------------------------------------------


def watchdog_lines(rank: int, seq: int, op: str, numel: int, ran_ms: int, ts: str) -> list[str]:
    """The block ProcessGroupNCCL's watchdog prints for one rank (torch 2.4+ wording)."""
    p = f"[rank{rank}]:[E{ts} ProcessGroupNCCL.cpp:"
    return [
        f"{p}632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
        f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)=1800000) ran for {ran_ms} milliseconds before timing out.",
        f"{p}2271] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: {seq} "
        f"PG status: last enqueued work: {seq}, last completed work: {seq - 1}",
        f"{p}684] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
        "kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        f"{p}698] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
    ]


def add_infra() -> None:
    blocks = [watchdog_lines(r, 48213, "ALLREDUCE", 262144000, 1800000 + 61 + r * 7, f"1202 03:44:51.51{r}392855")
              for r in range(8)]
    inter = []
    order = [3, 0, 5, 1, 7, 2, 6, 4]
    for i in range(4):
        for r in order:
            inter.append(blocks[r][i])
    case("dist-nccl-watchdog-8ranks", ["distributed-sync-failure", "network-timeout"], "en", "log",
         "8 ranks' watchdog blocks interleaved as in the torchrun console: ALLREDUCE timed out after 30 min on "
         "all ranks. Guide section 5 (NCCL 超时, Hang). Network timeout is an acceptable secondary since the "
         "fabric may be the cause.",
         "\n".join(inter) + "\n[rank3]:[F1202 03:44:52.118823412 ProcessGroupNCCL.cpp:1556] [PG ID 0 PG GUID 0(default_pg) "
         "Rank 3] Exception (either an error or timeout) detected by watchdog at work: 48213, last enqueued NCCL work: "
         "48213, last completed NCCL work: 48212.\nterminate called after throwing an instance of 'c10::DistBackendError'\n"
         + torchrun_child_failed("train.py", "gpu-node-07", 3, 2293, -6, "2026-12-02_03:44:53",
                                 "Signal 6 (SIGABRT) received by PID 2293"))

    case("dist-unused-parameters", ["distributed-sync-failure"], "en", "traceback",
         "DDP reducer error for parameters that did not receive gradients (e.g. a frozen branch, LoRA). "
         "Guide section 5's find_unused_parameters fix.",
         """[rank1]: Traceback (most recent call last):
[rank1]:   File "/workspace/mm-align/train.py", line 298, in <module>
[rank1]:     outputs = model(**batch)
[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 1637, in forward
[rank1]:     inputs, kwargs = self._pre_forward(*inputs, **kwargs)
[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 1528, in _pre_forward
[rank1]:     if torch.is_grad_enabled() and self.reducer._rebuild_buckets():
[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. You can enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by 
[rank1]: making sure all `forward` function outputs participate in calculating loss. 
[rank1]: If you already have done the above, then the distributed data parallel module wasn't able to locate the output tensors in the return value of your module's `forward` function. Please include the loss function and the structure of the return value of `forward` of your module when reporting this issue (e.g. list, dict, iterable).
[rank1]: Parameter indices which did not receive grad for rank 1: 394 395 396 397
[rank1]:  In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL to print out information about which particular parameters did not receive gradient on this rank as part of this error""")

    case("dist-zh-multinode-hang-nccl-timeout", ["distributed-sync-failure", "network-timeout"], "zh", "one-line",
         "Brief's example: multi-node hang ending in an NCCL timeout; guide section 5.",
         "多机训练卡住不动，过了半小时报 NCCL 超时，单机 8 卡跑是正常的")

    case("dist-zh-loss-differs-per-rank", ["distributed-sync-failure"], "zh", "mixed",
         "Guide section 5 symptom 'Loss 在不同 Rank 上不一致' after a custom sync change.",
         "不同 rank 打印出来的 loss 差很多，感觉梯度没同步，自己改过 all_reduce 的逻辑：\n"
         "[rank0] step 200 loss 1.8213\n[rank1] step 200 loss 2.4710\n[rank2] step 200 loss 1.8197\n"
         "[rank3] step 200 loss 3.0542\n"
         "训练到后面 rank1 和 rank3 的 loss 越来越大。")

    case("dist-collective-mismatch-detail", ["distributed-sync-failure"], "en", "traceback",
         "TORCH_DISTRIBUTED_DEBUG=DETAIL reports ranks running different collectives (rank-dependent control flow).",
         "[rank5]: RuntimeError: Detected mismatch between collectives on ranks. Rank 5 is running collective: "
         "CollectiveFingerprint(SequenceNumber=1204, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, "
         "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
         "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 0 is "
         "running collective: CollectiveFingerprint(SequenceNumber=1204, OpType=ALLREDUCE, TensorShape=[131334144], "
         "TensorDtypes=BFloat16, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided "
         "(default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))).Collectives "
         "differ in the following aspects: \t Sequence number: 1204vs 1204  Op type: BROADCASTvs ALLREDUCE  "
         "Tensor Tensor shapes: 1vs 131334144  Tensor Tensor dtypes: Longvs BFloat16")

    case("dist-eval-only-rank0-hang", ["distributed-sync-failure"], "en", "question",
         "Hang caused by a collective run on only one rank: guide section 5 '确保所有 Rank 执行相同的操作'.",
         "Training on 4 GPUs hangs forever at the first evaluation (step 500). No error, GPUs show 100% util. "
         "I only run evaluate() under `if dist.get_rank() == 0:` to save time. Single GPU works fine.")

    case("dist-zh-zero3-save-hang", ["distributed-sync-failure", "checkpoint-corruption"], "zh", "mixed",
         "ZeRO-3 save called only on rank 0 needs the other ranks to gather parameters, so everything hangs. "
         "The visible symptom is a checkpoint save that never finishes (guide section 7 '保存 Checkpoint 超时').",
         "DeepSpeed ZeRO-3，保存模型的时候卡住不动了，GPU 利用率 100%，日志停在：\n"
         "[2026-11-26 20:14:03,227] [INFO] [logging.py:107:log_dist] [Rank 0] [Torch] Checkpoint global_step3000 is about to be saved!\n"
         "代码是 if local_rank == 0: model.save_pretrained(out_dir)")

    oom = ("[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 5 has a total capacity of "
           "79.11 GiB of which 1.37 GiB is free. Process 77215 has 77.73 GiB memory in use.")
    others = [watchdog_lines(r, 9921, "_ALLGATHER_BASE", 58720256, 600000 + 13 * r, f"1129 16:05:{10 + r:02d}.204817611")[0]
              for r in (0, 1, 2, 3, 4, 6, 7)]
    others = [ln.replace("Timeout(ms)=1800000", "Timeout(ms)=600000") for ln in others]
    case("dist-one-rank-oom-others-timeout", ["cuda-oom", "distributed-sync-failure"], "en", "log",
         "Hard: one rank OOMs, the other seven wait in all-gather until the watchdog fires 10 minutes later. The "
         "root cause is the CUDA OOM on rank 5; the timeouts are a consequence (acceptable secondary).",
         oom + "\n" + "\n".join(others))

    # ---- checkpoint-corruption
    case("ckpt-zip-central-directory", ["checkpoint-corruption"], "en", "traceback",
         "torch.load of a truncated .pt (zip) file.",
         """Traceback (most recent call last):
  File "resume.py", line 64, in <module>
    state = torch.load(args.ckpt, map_location="cpu")
  File "/opt/conda/lib/python3.11/site-packages/torch/serialization.py", line 1470, in load
    with _open_zipfile_reader(opened_file) as opened_zipfile:
  File "/opt/conda/lib/python3.11/site-packages/torch/serialization.py", line 759, in __init__
    super().__init__(torch._C.PyTorchFileReader(name_or_buffer))
                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory""")

    case("ckpt-safetensors-incomplete-header", ["checkpoint-corruption"], "en", "traceback",
         "from_pretrained on a shard that was cut short during copy/upload.",
         """Loading checkpoint shards:  50%|█████     | 2/4 [00:06<00:06,  3.11s/it]
Traceback (most recent call last):
  File "/srv/train/continue_pretrain.py", line 77, in <module>
    model = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=torch.bfloat16)
  File "/srv/venv/lib/python3.11/site-packages/transformers/modeling_utils.py", line 4900, in _load_pretrained_model
    state_dict = load_state_dict(shard_file, is_quantized=is_quantized, map_location="meta")
  File "/srv/venv/lib/python3.11/site-packages/transformers/modeling_utils.py", line 509, in load_state_dict
    with safe_open(checkpoint_file, framework="pt") as f:
         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer""")

    case("ckpt-zh-resume-loss-jump", ["checkpoint-corruption", "loss-spike"], "zh", "mixed",
         "Guide section 7 symptom '恢复训练后 Loss 异常' (e.g. optimizer/scheduler state not restored). A jump in "
         "loss, so loss-spike is an acceptable secondary.",
         "从 checkpoint-5000 恢复训练之后 loss 从 1.4 直接变成 3.8，而且降得很慢：\n"
         "{'loss': 1.4032, 'grad_norm': 0.512, 'learning_rate': 1.8e-05, 'epoch': 0.83}   <- 中断前\n"
         "{'loss': 3.8127, 'grad_norm': 6.871, 'learning_rate': 2e-05, 'epoch': 0.85}     <- 恢复后\n"
         "恢复的时候只 load 了模型权重，没有用 resume_from_checkpoint。")

    case("ckpt-state-dict-size-mismatch", ["checkpoint-corruption"], "en", "traceback",
         "Guide section 7 '加载 Checkpoint 报错': the checkpoint does not fit the model (resized embeddings).",
         """RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:
	size mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32002, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).
	size mismatch for lm_head.weight: copying a param with shape torch.Size([32002, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).""")

    case("ckpt-zh-save-timeout-nfs", ["checkpoint-corruption", "distributed-sync-failure"], "zh", "question",
         "Guide section 7 symptom '保存 Checkpoint 超时'; other ranks waiting at the barrier time out meanwhile.",
         "每次保存 checkpoint 要 40 多分钟（存到 NFS 上），经常保存到一半别的 rank 就 NCCL 超时退出了，"
         "留下的 checkpoint 也是不完整的，怎么办？")

    case("ckpt-deepspeed-missing-optim-shard", ["checkpoint-corruption"], "en", "traceback",
         "DeepSpeed resume with a checkpoint folder missing one rank's ZeRO optimizer shard (incomplete save).",
         """[rank5]: Traceback (most recent call last):
[rank5]:   File "/mnt/code/train.py", line 190, in <module>
[rank5]:     load_path, client_state = engine.load_checkpoint(args.ckpt_dir, tag="global_step12000")
[rank5]:   File "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/engine.py", line 2889, in load_checkpoint
[rank5]:     success = self._load_zero_checkpoint(load_dir, tag, load_optimizer_states=load_optimizer_states)
[rank5]:   File "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/engine.py", line 3100, in _get_all_zero_checkpoint_state_dicts
[rank5]:     _state = self.checkpoint_engine.load(
[rank5]:   File "/usr/local/lib/python3.10/dist-packages/torch/serialization.py", line 1425, in load
[rank5]:     with _open_file_like(f, "rb") as opened_file:
[rank5]: FileNotFoundError: [Errno 2] No such file or directory: '/mnt/ckpt/run17/global_step12000/bf16_zero_pp_rank_5_mp_rank_00_optim_states.pt'""")

    case("ckpt-git-lfs-pointer", ["checkpoint-corruption"], "en", "traceback",
         "Hard: 'invalid load key, v' means torch.load read a Git LFS pointer text file instead of weights.",
         """  File "/home/aj/proj/finetune.py", line 33, in load_base
    sd = torch.load("weights/pytorch_model.bin", map_location="cpu", weights_only=False)
  File "/home/aj/.venv/lib/python3.10/site-packages/torch/serialization.py", line 1495, in load
    return _legacy_load(
  File "/home/aj/.venv/lib/python3.10/site-packages/torch/serialization.py", line 1744, in _legacy_load
    magic_number = pickle_module.load(f, **pickle_load_args)
_pickle.UnpicklingError: invalid load key, 'v'.""")

    case("ckpt-zh-disk-full-earlier", ["checkpoint-corruption", "disk-full"], "zh", "mixed",
         "A corrupt checkpoint whose origin was a full disk during save: corruption now, disk-full history.",
         "上周磁盘满过一次，现在从 checkpoint-9000 恢复就报这个：\n"
         "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory\n"
         "checkpoint-8500 能正常加载。")

    # ---- network-timeout
    case("net-tcpstore-clients-join", ["network-timeout", "distributed-sync-failure"], "en", "traceback",
         "Rendezvous store on the master waits for the second node that never connects (firewall/wrong "
         "MASTER_ADDR). A network reachability timeout at startup.",
         """Traceback (most recent call last):
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 198, in _create_c10d_store
    return TCPStore(
           ^^^^^^^^^
torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.""")

    case("net-hf-hub-read-timeout", ["network-timeout"], "en", "traceback",
         "Training script downloading the base model from the Hub at startup; the read times out. (The assistant "
         "runs offline, but a user's training job may not.)",
         """requests.exceptions.ReadTimeout: (ReadTimeoutError("HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)"), '(Request ID: 3f0c2a1e-8b7d-4c55-9e0f-51c2d1a9b7e4)')

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/workspace/train.py", line 58, in <module>
    model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.3")
  File "/usr/local/lib/python3.10/site-packages/huggingface_hub/file_download.py", line 1533, in _raise_on_head_call_error
    raise LocalEntryNotFoundError(
huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache. Please check your connection and try again or make sure your Internet connection is on.""")

    case("net-zh-rendezvous-timeout", ["network-timeout"], "zh", "mixed",
         "Second node cannot reach the master's rendezvous endpoint.",
         "两台机器，第二台一直连不上 master，报 RendezvousTimeoutError：\n"
         "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
         "master 上 29500 端口是开着的，两台机器能 ping 通。")

    case("net-ib-retry-exceeded", ["network-timeout", "distributed-sync-failure"], "en", "log",
         "NCCL IB completion error status 12 = transport retry counter exceeded (a link-level timeout); NCCL then "
         "aborts the collective.",
         "gpu-a12:88231:88790 [3] NCCL INFO Using network IB\n"
         "gpu-a12:88231:88790 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.20.3.17<41872> "
         "with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.20.3.12 remoteGidsfe80::a288:c2ff:fe31:4e0c hca mlx5_3\n"
         "gpu-a12:88231:88790 [3] NCCL INFO transport/net.cc:1156 -> 6\n"
         "gpu-a12:88231:88790 [3] NCCL INFO proxy.cc:698 -> 6\n"
         "[rank27]:[E1201 07:12:44.301221871 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 27] Process "
         "group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network "
         "error, NCCL version 2.21.5\nncclRemoteError: A call failed possibly due to a network error or a remote process "
         "exiting prematurely.")

    case("net-c10d-client-socket-timeout", ["network-timeout"], "en", "log",
         "Worker's c10d client socket times out connecting to the master's port.",
         "[W1130 22:01:17.337521 socket.cpp:755] [c10d] The client socket has failed to connect to [node-master]:29500 "
         "(errno: 110 - Connection timed out).\n"
         "[E1130 22:11:17.339804 socket.cpp:957] [c10d] The client socket has timed out after 600s while trying to "
         "connect to (10.1.2.3, 29500).\n"
         "torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to connect to "
         "(10.1.2.3, 29500).")

    case("net-zh-wandb-retry", ["network-timeout"], "zh", "mixed",
         "Experiment tracker stuck in a retry loop on a cluster with flaky egress, stalling the training process.",
         "训练跑着跑着停住了，日志最后一直在刷这个，是网络超时吗？\n"
         "wandb: Network error (ReadTimeout), entering retry loop.\n"
         "wandb: Network error (ReadTimeout), entering retry loop.\n"
         "wandb: ERROR Error while calling W&B API: context deadline exceeded (<Response [500]>)")

# ---------------------------------------------------------------------------------------------------------
# Performance: slow-training, low-gpu-utilization, communication-bottleneck
# ---------------------------------------------------------------------------------------------------------

NVSMI_LOW = """{when}
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
{rows}
+-----------------------------------------------------------------------------------------+"""


def nvsmi(when: str, utils: list[int], mem: list[int], power: list[int]) -> str:
    rows = []
    for i, (u, m, p) in enumerate(zip(utils, mem, power)):
        rows.append(f"|   {i}  NVIDIA A100-SXM4-80GB          On  |   00000000:{0x07 + 0x10 * i:02X}:00.0 Off |                    0 |")
        rows.append(f"| N/A   {34 + u // 10}C    P0             {p:>3d}W /  400W |   {m:>5d}MiB /  81920MiB |     {u:>3d}%      Default |")
        rows.append("|                                         |                        |             Disabled |")
        rows.append("+-----------------------------------------+------------------------+----------------------+")
    return NVSMI_LOW.format(when=when, rows="\n".join(rows[:-1]))


def add_perf() -> None:
    case("slow-tqdm-eta-days", ["slow-training"], "en", "log",
         "tqdm redraws showing ~14 s/it and a multi-day ETA for a 7B LoRA run in fp32 without flash attention.",
         "python finetune.py --model Llama-3.1-8B --lora_r 16 --bf16 False --attn_implementation eager\n"
         + trainer_header(120000, 3, 2, 16, 8, 22500, "41,943,040") + "\n"
         + tqdm_bar(1, 41, 22500, 4, 14.3))

    case("slow-zh-7b-lora-30h", ["slow-training"], "zh", "question",
         "Brief's example: 训练速度很慢; guide section 6 optimisation table (flash attention, bf16, packing).",
         "训练速度很慢，7B 模型 LoRA 一个 epoch 要 30 个小时，单卡 A100，没开 flash attention，用的 fp32，"
         "有什么办法能加速吗？")

    thr = [(100, 12412), (200, 12388), (300, 11903), (400, 9842), (500, 8127), (600, 6104), (700, 5011), (800, 3937)]
    case("slow-throughput-degrades", ["slow-training"], "en", "log",
         "tokens/s falls steadily over the run (a growing Python list of logged tensors, fragmentation); the "
         "guide's timing snippet output format.",
         "\n".join(f"Step {s}: {t} tokens/s" for s, t in thr)
         + "\nNothing else changed; GPU memory grows slowly too. Started at 12k tokens/s, now under 4k.")

    meg = [megatron_line(it, 200000, ms, "2.500E-04", l, "1.0", g, 0, 0, 1024)
           for it, ms, l, g in [(20000, 1843.2, "2.311204E+00", "0.201"), (20100, 1851.7, "2.309876E+00", "0.199"),
                                (20200, 3377.0, "2.307113E+00", "0.204"), (20300, 4981.4, "2.304520E+00", "0.198"),
                                (20400, 5120.7, "2.302291E+00", "0.203")]]
    case("slow-megatron-iteration-time", ["slow-training", "communication-bottleneck"], "en", "log",
         "Iteration time nearly triples mid-run while loss is healthy; could be a straggler node or a degraded "
         "link, so communication bottleneck is an acceptable secondary.",
         "\n".join(meg) + "\n [Rank 0] (after 20400 iterations) memory (MB) | allocated: 21433.2 | max allocated: 60122.5 "
         "| reserved: 63002.0 | max reserved: 63002.0\n throughput per GPU (TFLOP/s/GPU): 141.2 -> 52.7")

    case("slow-zh-padding-short-samples", ["slow-training"], "zh", "mixed",
         "Many short samples padded to 4096 without packing; guide section 6 '打包（Packing）'.",
         "SFT 数据大部分都很短（平均 300 token），但是 padding 到 4096，速度很慢：\n"
         "{'train_runtime': 98211.4, 'train_samples_per_second': 2.13, 'train_steps_per_second': 0.033, "
         "'train_loss': 1.0412, 'epoch': 3.0}\n"
         "听说可以 packing，会影响效果吗？")

    case("slow-eval-too-frequent", ["slow-training"], "en", "question",
         "Wall-clock dominated by evaluation: guide section 8 '评估间隔合理（不要过于频繁）'.",
         "My run seems to crawl: 10k steps are taking ~2 days. I noticed I have eval_strategy='steps', "
         "eval_steps=50 with a 20k-example eval set and predict_with_generate=True. Could that be it?")

    case("lowutil-nvidia-smi-table", ["low-gpu-utilization"], "en", "log",
         "nvidia-smi during training: memory full, GPU-Util 12-31% and low power draw on all eight cards.",
         nvsmi("Wed Dec  2 09:14:52 2026", [23, 31, 12, 18, 27, 15, 22, 19], [71234, 71190, 71288, 71202, 71240, 71216, 71198, 71260],
               [118, 131, 96, 102, 124, 99, 112, 108]))

    case("lowutil-zh-jumps-0-100", ["low-gpu-utilization"], "zh", "one-line",
         "Brief's example: GPU 利用率只有 30%; utilisation oscillates - a starved input pipeline.",
         "GPU 利用率只有 30%，nvidia-smi 看一直在 0 和 100 之间来回跳，训练用的是 DataLoader 读图片。")

    dmon = ["# gpu     sm    mem    enc    dec    jpg    ofa", "# Idx      %      %      %      %      %      %"]
    for t, sms in enumerate([[0, 0, 0, 0], [97, 96, 98, 97], [4, 3, 5, 2], [0, 0, 0, 0], [0, 0, 0, 0], [91, 93, 90, 95],
                             [2, 0, 1, 0], [0, 0, 0, 0]]):
        for g, sm in enumerate(sms):
            dmon.append(f"    {g}     {sm:>2d}     {sm // 3:>2d}      0      0      0      0")
    case("lowutil-dmon-bursty", ["low-gpu-utilization"], "en", "log",
         "nvidia-smi dmon -s u (the guide's own command): short bursts of work separated by idle seconds.",
         "$ nvidia-smi dmon -s u -d 1\n" + "\n".join(dmon))

    case("lowutil-profiler-dataloader", ["low-gpu-utilization", "slow-training"], "en", "log",
         "torch.profiler table where the DataLoader __next__ dominates CPU time and CUDA time is small.",
         "-------------------------------------------------------  ------------  ------------  ------------  ------------\n"
         "                                                   Name    Self CPU %      Self CPU     CPU total  Self CUDA   \n"
         "-------------------------------------------------------  ------------  ------------  ------------  ------------\n"
         "enumerate(DataLoader)#_SingleProcessDataLoaderIter._...        71.84%       14.212s        72.10%       0.000us  \n"
         "                                         aten::copy_         3.02%     597.140ms         4.11%     212.883ms  \n"
         "                              ProfilerStep*                   2.47%     488.311ms        98.77%       0.000us  \n"
         "                                          aten::mm         0.61%     120.904ms         0.88%        2.913s  \n"
         "              autograd::engine::evaluate_function: ...     0.44%      87.221ms         9.04%       0.000us  \n"
         "-------------------------------------------------------  ------------  ------------  ------------  ------------\n"
         "Self CPU time total: 19.782s\nSelf CUDA time total: 3.412s")

    case("lowutil-zh-num-workers-zero", ["low-gpu-utilization"], "zh", "mixed",
         "num_workers=0 with on-the-fly tokenisation: one CPU core pegged, GPU idle; guide section 6 "
         "'数据预加载（dataloader workers）'.",
         "dataloader num_workers=0，tokenize 是在 __getitem__ 里现做的，top 看 python 一个核 100%，GPU-Util 只有 15% 左右：\n"
         "  PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND\n"
         "41022 zhang     20   0   61.2g  18.4g   1.1g R 100.3   3.6  212:41.07 python")

    case("lowutil-a100-batch1-question", ["low-gpu-utilization"], "en", "question",
         "Plain question: tiny per-device batch on a large GPU; a compute-starved kernel mix.",
         "Why does my A100 sit at around 40% utilization when fine-tuning a 1B model with per_device_train_batch_size=1 "
         "and max_length 512? Memory usage is only 9 GB out of 80.")

    # ---- communication-bottleneck
    nccl = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0",
            "#",
            "# Using devices",
            "#  Rank  0 Group  0 Pid 212003 on     gpu-n01 device  0 [0x07] NVIDIA H100 80GB HBM3",
            "#  ...",
            "#  Rank 15 Group  0 Pid 188421 on     gpu-n02 device  7 [0xdf] NVIDIA H100 80GB HBM3",
            "#",
            "#                                                              out-of-place                       in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    for size, t in [(134217728, 21140.2), (268435456, 42102.9), (536870912, 83911.4), (1073741824, 167601.0),
                    (2147483648, 334870.3), (4294967296, 669012.8), (8589934592, 1337715.1)]:
        alg = size / t / 1e3
        bus = alg * 2 * 15 / 16
        nccl.append(f"  {size:>10d}  {size // 4:>12d}     float     sum      -1  {t:>8.1f}  {alg:6.2f}  {bus:6.2f}      0"
                    f"  {t * 1.001:>8.1f}  {alg / 1.001:6.2f}  {bus / 1.001:6.2f}      0")
    nccl.append("# Out of bounds values : 0 OK")
    nccl.append("# Avg bus bandwidth    : 11.9102 ")
    case("comm-nccl-tests-low-busbw", ["communication-bottleneck"], "en", "log",
         "nccl-tests all_reduce_perf across 2 H100 nodes gives ~12 GB/s bus bandwidth (expected a few hundred "
         "GB/s with IB/RoCE); guide section 5 'nccl-tests 测试集群通信带宽'.",
         "$ mpirun -np 16 -H gpu-n01:8,gpu-n02:8 ./build/all_reduce_perf -b 128M -e 8G -f 2 -g 1\n" + "\n".join(nccl))

    case("comm-nccl-socket-fallback", ["communication-bottleneck"], "en", "log",
         "NCCL_DEBUG=INFO shows IB not found and fallback to TCP sockets over eth0; multi-node steps 3x slower.",
         "gpu-n01:51234:51234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>\n"
         "gpu-n01:51234:51234 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)\n"
         "gpu-n01:51234:51234 [0] NCCL INFO cudaDriverVersion 12040\n"
         "NCCL version 2.21.5+cuda12.4\n"
         "gpu-n01:51234:51298 [0] NCCL INFO NET/IB : No device found.\n"
         "gpu-n01:51234:51298 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
         "gpu-n01:51234:51298 [0] NCCL INFO Using network Socket\n"
         "gpu-n01:51234:51298 [0] NCCL INFO comm 0x5581e0f7c2a0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 7000 commId 0x9e1c2f0a87d4b3e1 - Init COMPLETE\n"
         "gpu-n01:51234:51298 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/Socket/0\n"
         "step time: 1 node 2.9 s/it, 2 nodes 8.7 s/it")

    case("comm-zh-two-nodes-slower", ["communication-bottleneck", "slow-training"], "zh", "one-line",
         "Brief's example: 多机训练通信很慢; scaling from 1 to 2 nodes makes steps 3x slower.",
         "多机训练通信很慢，单机 8 卡 3.2 s/it，两机 16 卡反而变成 9 s/it，用的 DeepSpeed ZeRO-2")

    case("comm-profiler-allreduce-dominates", ["communication-bottleneck"], "en", "log",
         "Profiler: NCCL all-reduce kernels take most of the CUDA time and are not overlapped with compute.",
         "Top CUDA kernels (rank 0, 20 steps):\n"
         "  ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)   61.4%   48.12s\n"
         "  sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1     18.9%   14.80s\n"
         "  flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>  6.2%  4.86s\n"
         "  void at::native::vectorized_elementwise_kernel<4, ...>                               3.1%    2.43s\n"
         "Compute/communication overlap: 7%")

    case("comm-zh-zero3-allgather-timers", ["communication-bottleneck"], "zh", "mixed",
         "DeepSpeed ZeRO-3 across nodes: backward dominated by parameter all-gather / reduce-scatter traffic.",
         "ZeRO-3 跨机以后 step 时间翻了好几倍，wall_clock_breakdown 打开看是这样的，是不是通信太慢？\n"
         "[2026-11-25 16:40:12,771] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | fwd_microstep: 812.41 | "
         "bwd_microstep: 5140.97 | bwd_inner_microstep: 1702.33 | bwd_allreduce_microstep: 3431.08 | step_microstep: 402.66\n"
         "网卡是 25G 以太网，没有 IB。")

    case("comm-pcie-topology-no-nvlink", ["communication-bottleneck"], "en", "mixed",
         "nvidia-smi topo -m shows GPUs connected only via SYS/PHB (no NVLink, across CPU sockets) and P2P off.",
         "8x RTX 6000 Ada box, DDP all-reduce is really slow. Topology:\n"
         "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\n"
         "GPU0\t X \tPHB\tPHB\tPHB\tSYS\tSYS\tSYS\tSYS\t0-31\t0\n"
         "GPU1\tPHB\t X \tPHB\tPHB\tSYS\tSYS\tSYS\tSYS\t0-31\t0\n"
         "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tPHB\tPHB\tPHB\t32-63\t1\n"
         "NCCL INFO Channel 00 : 3[3] -> 4[4] via SHM/direct/direct\n"
         "NCCL_P2P_DISABLE=1 is set by our container image.")

# ---------------------------------------------------------------------------------------------------------
# Out of scope: the assistant must abstain (labels = [])
# ---------------------------------------------------------------------------------------------------------


def add_abstain() -> None:
    case("oos-flask-keyerror", [], "en", "traceback",
         "Hard negative: a KeyError in a web request handler, no training anywhere.",
         """[2026-12-01 10:22:31,114] ERROR in app: Exception on /api/orders [POST]
Traceback (most recent call last):
  File "/srv/shop/venv/lib/python3.11/site-packages/flask/app.py", line 1511, in wsgi_app
    response = self.full_dispatch_request()
  File "/srv/shop/venv/lib/python3.11/site-packages/flask/app.py", line 919, in full_dispatch_request
    rv = self.dispatch_request()
  File "/srv/shop/app/routes.py", line 47, in create_order
    user = users[session["user_id"]]
KeyError: 'user_id'""")

    case("oos-django-migration", [], "en", "traceback",
         "Django migration ordering problem.",
         "django.db.migrations.exceptions.InconsistentMigrationHistory: Migration admin.0001_initial is applied "
         "before its dependency accounts.0001_initial on database 'default'.")

    case("oos-pandas-settingwithcopy", [], "en", "log",
         "A pandas warning in an analysis notebook.",
         "/home/ana/report.py:31: SettingWithCopyWarning: \n"
         "A value is trying to be set on a copy of a slice from a DataFrame.\n"
         "Try using .loc[row_indexer,col_indexer] = value instead\n\n"
         "See the caveats in the documentation: https://pandas.pydata.org/pandas-docs/stable/user_guide/indexing.html#returning-a-view-versus-a-copy\n"
         "  df_q3['revenue_eur'] = df_q3['revenue'] * rate")

    case("oos-npm-eresolve", [], "en", "log",
         "npm dependency resolution failure.",
         "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\nnpm ERR! \n"
         "npm ERR! While resolving: dashboard@0.4.1\nnpm ERR! Found: react@18.3.1\n"
         "npm ERR! node_modules/react\nnpm ERR!   react@\"^18.2.0\" from the root project\nnpm ERR! \n"
         "npm ERR! Could not resolve dependency:\nnpm ERR! peer react@\"^16.8.0 || ^17.0.0\" from react-beautiful-dnd@13.1.1")

    case("oos-rust-borrow", [], "en", "log",
         "Rust compile error.",
         "error[E0382]: borrow of moved value: `buf`\n  --> src/main.rs:14:20\n   |\n"
         "10 |     let buf = vec![0u8; 1024];\n   |         --- move occurs because `buf` has type `Vec<u8>`, which does not implement the `Copy` trait\n"
         "11 |     send(buf);\n   |          --- value moved here\n...\n"
         "14 |     println!(\"{}\", buf.len());\n   |                    ^^^ value borrowed here after move\n\n"
         "error: could not compile `netcat-rs` (bin \"netcat-rs\") due to 1 previous error")

    case("oos-module-not-found-foo", [], "en", "traceback",
         "A missing module in a small script.",
         "Traceback (most recent call last):\n  File \"/home/u/scripts/cleanup.py\", line 3, in <module>\n"
         "    import foo\nModuleNotFoundError: No module named 'foo'")

    case("oos-ssh-permission-denied", [], "en", "one-line",
         "SSH key problem.",
         "git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.")

    case("oos-git-merge-conflict", [], "en", "log",
         "Git merge conflict.",
         "Auto-merging src/config.py\nCONFLICT (content): Merge conflict in src/config.py\n"
         "Automatic merge failed; fix conflicts and then commit the result.\n"
         "<<<<<<< HEAD\nTIMEOUT = 30\n=======\nTIMEOUT = 60\n>>>>>>> feature/retry")

    rows = [(2.4112, 1.331, 0.0001), (1.9873, 0.912, 9.9e-05), (1.7521, 0.744, 9.7e-05), (1.6208, 0.653, 9.4e-05),
            (1.5394, 0.602, 9e-05), (1.4817, 0.571, 8.5e-05), (1.4402, 0.549, 7.9e-05), (1.4087, 0.533, 7.2e-05)]
    case("oos-healthy-trainer-log", [], "en", "log",
         "Hard negative: a healthy run (loss falling smoothly, grad_norm small and falling, tqdm redraws), "
         "no question. Nothing to diagnose.",
         trainer_header(50000, 2, 8, 64, 1, 1564, "20,971,520") + "\n"
         + "\n".join(trainer_dicts(rows, 1564, 782, 100, 100)) + tqdm_bar(800, 820, 1564, 10, 0.71))

    case("oos-center-div", [], "en", "question", "Unrelated web question.", "how do I center a div")
    case("oos-zh-hongshaorou", [], "zh", "question", "Unrelated cooking question.", "怎么做红烧肉")
    case("oos-noise", [], "en", "one-line", "Empty-ish noise.", "  ...\n\n ;;  \t asdf\n")

    case("oos-zh-healthy-merge-lora", [], "zh", "question",
         "Hard negative: a healthy run and a deployment question (merging LoRA) - no failure mode.",
         "训练一切正常，loss 从 2.1 降到 1.3，eval loss 也在降。想问一下训练完以后怎么把 LoRA 权重合并回基座模型？")

    case("oos-stripe-read-timeout", [], "en", "traceback",
         "Hard negative for network-timeout: an HTTP timeout in a payment view of a web app, not a training job.",
         """Traceback (most recent call last):
  File "/app/billing/views.py", line 88, in checkout
    intent = stripe.PaymentIntent.create(amount=total, currency="eur")
  File "/usr/local/lib/python3.12/site-packages/requests/adapters.py", line 713, in send
    raise ReadTimeout(e, request=request)
requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='api.stripe.com', port=443): Read timed out. (read timeout=20)""")

    case("oos-flash-attn-not-installed", [], "en", "traceback",
         "Hard negative: training-adjacent install problem; no taxonomy mode covers a missing package.",
         "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the "
         "package flash_attn seems to be not installed. Please refer to the documentation of "
         "https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2.")

    case("oos-docker-socket", [], "en", "one-line",
         "Docker daemon permissions.",
         "docker: permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
         "Post \"http://%2Fvar%2Frun%2Fdocker.sock/v1.45/containers/create\": dial unix /var/run/docker.sock: connect: permission denied.")

    case("oos-js-undefined-map", [], "en", "traceback",
         "Front-end JavaScript error.",
         "Uncaught TypeError: Cannot read properties of undefined (reading 'map')\n"
         "    at OrderList (OrderList.jsx:23:18)\n    at renderWithHooks (react-dom.development.js:16305:18)")

    case("oos-zh-weekly-report", [], "zh", "question", "Unrelated writing request.",
         "帮我写一份这周的工作周报，主要是修了两个前端 bug 和开了三次会")

    case("oos-nvidia-smi-healthy", [], "en", "log",
         "Hard negative: nvidia-smi of a busy, healthy training node (97-99% util, high power), no complaint.",
         nvsmi("Sun Nov 29 17:03:08 2026", [98, 97, 99, 98, 97, 99, 98, 98], [76012, 75988, 76040, 75996, 76020, 76008, 75990, 76031],
               [391, 388, 396, 390, 385, 397, 392, 389]))

    case("oos-zh-list-dedup", [], "zh", "question", "General Python question.",
         "Python 里怎么给列表去重并且保持原来的顺序？")

    case("oos-java-npe", [], "en", "traceback", "Java stack trace.",
         "Exception in thread \"main\" java.lang.NullPointerException: Cannot invoke \"String.length()\" because \"name\" is null\n"
         "\tat com.acme.util.Names.normalise(Names.java:17)\n\tat com.acme.App.main(App.java:9)")

    case("oos-k8s-imagepullbackoff", [], "en", "log",
         "Hard-ish negative: Kubernetes, but an image pull problem, not a training failure.",
         "NAME                       READY   STATUS             RESTARTS   AGE\n"
         "api-gateway-7d9c8b6f5-x2kqp 0/1     ImagePullBackOff   0          4m12s\n"
         "  Warning  Failed     3m (x4 over 4m)  kubelet  Failed to pull image \"registry.internal/api-gateway:1.8.3\": "
         "rpc error: code = NotFound desc = manifest unknown")

    case("oos-zh-git-push-rejected", [], "zh", "question", "Git question in Chinese.",
         "git push 报 ! [rejected] main -> main (non-fast-forward) 怎么办？")

    case("oos-mysql-syntax", [], "en", "one-line", "SQL syntax error.",
         "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual that corresponds to your MySQL "
         "server version for the right syntax to use near 'ORDER BY created_at DESC LIMIT 10' at line 3")

    case("oos-scrapy-keyerror-text", [], "en", "traceback",
         "Hard negative for data-format-error: KeyError 'text' in a web-scraping pipeline, no training context.",
         """2026-12-01 14:03:22 [scrapy.core.scraper] ERROR: Error processing {'url': 'https://example.org/news/123', 'title': 'Council meeting'}
Traceback (most recent call last):
  File "/home/s/crawler/venv/lib/python3.11/site-packages/twisted/internet/defer.py", line 1078, in _runCallbacks
    current.result = callback(current.result, *args, **kw)
  File "/home/s/crawler/news/pipelines.py", line 22, in process_item
    item["text"] = clean(item["text"])
KeyError: 'text'""")

    case("oos-zh-weather", [], "zh", "question", "Unrelated.", "明天上海会下雨吗？")

    case("oos-dtype-deprecation-warning", [], "en", "log",
         "Hard negative: a harmless transformers deprecation warning while loading a model, no failure.",
         f"{YEL}`torch_dtype` is deprecated! Use `dtype` instead!{RST}\n"
         "Loading checkpoint shards: 100%|██████████| 4/4 [00:03<00:00,  1.21it/s]")

    case("oos-zh-healthy-curve-question", [], "zh", "mixed",
         "Hard negative: a healthy, smoothly decreasing curve with an 'is this normal?' question.",
         "这个 loss 曲线正常吗？第一次训模型，有点担心：\n"
         + "\n".join(trainer_dicts([(1.9021, 0.811, 0.0002), (1.6413, 0.702, 0.000198), (1.5230, 0.655, 0.000193),
                                    (1.4611, 0.618, 0.000186), (1.4259, 0.597, 0.000176)], 3000, 1000, 200, 200)))

# ---------------------------------------------------------------------------------------------------------
# Retrieval questions (labels: acceptable failure-mode ids or passage ids)
# ---------------------------------------------------------------------------------------------------------


def add_queries() -> None:
    q = query
    # nan-loss
    q("q-nan-en-fp16", ["nan-loss"], "en", "my loss goes to nan a few thousand steps in when I train with fp16, how do I fix it?")
    q("q-nan-zh-cause", ["nan-loss"], "zh", "为什么训练过程中 loss 会突然变成 NaN？")
    q("q-nan-en-find-layer", ["nan-loss"], "en", "how can I find which layer first produces NaN values during training")
    q("q-nan-zh-bf16", ["nan-loss", "pre-launch-checklist"], "zh", "用 bf16 还是 fp16？听说 fp16 容易溢出出 nan")
    # loss-spike
    q("q-spike-en-warmup", ["loss-spike"], "en", "loss suddenly jumps after warmup then slowly comes back down")
    q("q-spike-zh-reproduce", ["loss-spike"], "zh", "loss 曲线上偶尔有尖刺，怎么定位是哪一批数据导致的？")
    q("q-spike-en-shard", ["loss-spike", "data-imbalance"], "en", "why does the loss jump every time training moves to a new data shard?")
    # gradient-explosion
    q("q-gradexp-en-norm", ["gradient-explosion"], "en", "gradient norm keeps growing by orders of magnitude, what should I do")
    q("q-gradexp-zh-clip", ["gradient-explosion", "loss-spike"], "zh", "梯度裁剪 max_norm 一般设多少？梯度爆炸了怎么办")
    q("q-gradexp-en-monitor", ["gradient-explosion", "nan-loss"], "en", "is it worth logging grad norm every step to catch exploding gradients early?")
    # cuda-oom
    q("q-oom-zh-basic", ["cuda-oom"], "zh", "显存不够怎么办")
    q("q-oom-en-options", ["cuda-oom"], "en", "what are my options when fine-tuning runs out of GPU memory even at batch size 1?")
    q("q-oom-zh-midrun", ["cuda-oom"], "zh", "为什么训练到一半才爆显存，前面几百步都没问题？")
    q("q-oom-en-generate", ["cuda-oom"], "en", "GPU memory blows up during evaluation when the model generates long outputs")
    # cpu-oom
    q("q-cpuoom-en-killed", ["cpu-oom"], "en", "my training process just says Killed with no traceback, what happened?")
    q("q-cpuoom-zh-ram", ["cpu-oom"], "zh", "加载大模型的时候机器内存被吃满，进程被系统杀掉了怎么办")
    q("q-cpuoom-en-exit137", ["cpu-oom"], "en", "pod exits with code 137 during data preprocessing")
    # disk-full
    q("q-disk-en-space", ["disk-full", "checkpoint-best-practices"], "en", "checkpoints keep filling up the disk, how do I stop running out of space?")
    q("q-disk-zh-nospace", ["disk-full"], "zh", "训练的时候报磁盘空间不足，都是什么东西占的空间？")
    q("q-disk-en-cache", ["disk-full"], "en", "the huggingface datasets cache ate my whole disk during map")
    # token-out-of-range
    q("q-tok-en-assert", ["token-out-of-range"], "en", "what does 'device-side assert triggered' mean when training a language model?")
    q("q-tok-zh-vocab", ["token-out-of-range", "pre-launch-checklist"], "zh", "怎么检查 token id 有没有超出词表大小？")
    q("q-tok-en-resize", ["token-out-of-range"], "en", "do I need to resize the embedding matrix after adding new special tokens?")
    # data-format-error
    q("q-fmt-zh-jsonl", ["data-format-error"], "zh", "jsonl 数据加载不进去，总是报解析错误，应该怎么排查格式？")
    q("q-fmt-en-column", ["data-format-error"], "en", "dataset map fails because a column is missing, how should the training data be structured?")
    q("q-fmt-en-labels-mask", ["pre-launch-checklist", "data-format-error"], "en", "how should I mask the prompt tokens in the labels for SFT?")
    # data-imbalance
    q("q-imb-en-language", ["data-imbalance"], "en", "dataset has too much of one language, the model is bad at the others")
    q("q-imb-zh-ratio", ["data-imbalance"], "zh", "多个数据源混合训练，配比应该怎么定？某一类数据太少学不会")
    q("q-imb-en-classes", ["data-imbalance"], "en", "my fine-tuned classifier only ever predicts the majority class")
    # distributed-sync-failure
    q("q-dist-zh-hang", ["distributed-sync-failure", "network-timeout"], "zh", "多卡训练卡住不动了，也不报错，怎么排查？")
    q("q-dist-en-loss-ranks", ["distributed-sync-failure"], "en", "each rank prints a different loss value, is gradient sync broken?")
    q("q-dist-en-unused", ["distributed-sync-failure"], "en", "when do I need find_unused_parameters=True in DDP?")
    q("q-dist-zh-timeout-setting", ["distributed-sync-failure", "network-timeout"], "zh", "NCCL 超时时间怎么调大？默认 30 分钟不够")
    # checkpoint-corruption
    q("q-ckpt-en-load-fail", ["checkpoint-corruption"], "en", "my saved checkpoint fails to load after the job was preempted")
    q("q-ckpt-zh-resume", ["checkpoint-corruption", "checkpoint-best-practices"], "zh", "断点续训以后 loss 不对劲，比中断前高很多")
    q("q-ckpt-en-slow-save", ["checkpoint-corruption", "checkpoint-best-practices"], "en", "saving a checkpoint takes forever and sometimes times out")
    # network-timeout
    q("q-net-en-rdzv", ["network-timeout"], "en", "second node can't join the rendezvous and times out")
    q("q-net-zh-connect", ["network-timeout", "distributed-sync-failure"], "zh", "多机训练时 worker 连不上 master 端口，一直超时")
    q("q-net-en-ib", ["network-timeout", "communication-bottleneck"], "en", "NCCL reports a network error on InfiniBand in the middle of a run")
    # slow-training
    q("q-slow-zh-basic", ["slow-training"], "zh", "训练速度很慢怎么办")
    q("q-slow-en-speedup", ["slow-training"], "en", "cheapest ways to speed up LLM fine-tuning without changing hardware")
    q("q-slow-zh-flash", ["slow-training"], "zh", "Flash Attention 和 packing 能提速多少？")
    q("q-slow-en-tokens-per-sec", ["slow-training"], "en", "how do I measure tokens per second in my training loop?")
    # low-gpu-utilization
    q("q-util-en-why", ["low-gpu-utilization"], "en", "why is my GPU utilisation so low")
    q("q-util-zh-dataloader", ["low-gpu-utilization", "slow-training"], "zh", "GPU 利用率上不去，是不是数据加载太慢了？num_workers 设多少")
    q("q-util-en-monitor", ["low-gpu-utilization", "slow-training"], "en", "which command shows GPU utilisation once per second while training?")
    # communication-bottleneck
    q("q-comm-zh-multinode", ["communication-bottleneck"], "zh", "多机训练通信很慢")
    q("q-comm-en-bandwidth", ["communication-bottleneck"], "en", "how do I test the all-reduce bandwidth between my nodes?")
    q("q-comm-en-scaling", ["communication-bottleneck", "slow-training"], "en", "going from 8 to 16 GPUs made each step slower, not faster")
    q("q-comm-zh-ib", ["communication-bottleneck"], "zh", "怎么确认 NCCL 走的是 IB 而不是以太网？")
    # checkpoint-best-practices
    q("q-cbp-en-keep", ["checkpoint-best-practices"], "en", "how many checkpoints should I keep?")
    q("q-cbp-zh-save-steps", ["checkpoint-best-practices"], "zh", "save_steps 和 save_total_limit 一般怎么设置？")
    q("q-cbp-en-validate", ["checkpoint-best-practices", "checkpoint-corruption"], "en", "should I check the weights for NaN before saving a checkpoint?")
    q("q-cbp-zh-resume-how", ["checkpoint-best-practices"], "zh", "Trainer 怎么从某个 checkpoint 继续训练？")
    # pre-launch-checklist
    q("q-plc-zh-lora-lr", ["pre-launch-checklist"], "zh", "LoRA 学习率设多少合适?")
    q("q-plc-en-before-launch", ["pre-launch-checklist"], "en", "what should I check before launching a training run")
    q("q-plc-en-full-ft-lr", ["pre-launch-checklist"], "en", "typical learning rate range for full-parameter fine-tuning?")
    q("q-plc-zh-eval-interval", ["pre-launch-checklist"], "zh", "评估间隔设多少比较合适，会不会太频繁影响训练？")
    # taxonomy-overview
    q("q-tax-en-kinds", ["taxonomy-overview"], "en", "what kinds of failures are common when training large models?")
    q("q-tax-zh-categories", ["taxonomy-overview"], "zh", "大模型训练失败一般分成哪几类？")
    q("q-tax-en-infra", ["taxonomy-overview"], "en", "list the infrastructure-related failure modes")
    # guide-front-matter
    q("q-front-zh-date", ["guide-front-matter"], "zh", "这份排障指南是什么时候写的？")
    q("q-front-en-about", ["guide-front-matter", "taxonomy-overview"], "en", "what is this troubleshooting guide about and when was it published?")
    q("q-front-zh-title", ["guide-front-matter"], "zh", "这个知识库文档的标题是什么，属于哪个分类？")


MODE_ORDER = (
    "nan-loss", "loss-spike", "gradient-explosion", "cuda-oom", "cpu-oom", "disk-full",
    "token-out-of-range", "data-format-error", "data-imbalance", "distributed-sync-failure",
    "checkpoint-corruption", "network-timeout", "slow-training", "low-gpu-utilization", "communication-bottleneck",
)
PASSAGES = ("taxonomy-overview", "checkpoint-best-practices", "pre-launch-checklist", "guide-front-matter")
TABLE_START, TABLE_END = "<!-- counts:start (generated by build_sets.py) -->", "<!-- counts:end -->"


def counts_table(triage: list[dict], queries: list[dict]) -> str:
    """The README's counts table, computed from the rows (so it can never drift from the data)."""
    def n(rows: list[dict], pred) -> int:
        return sum(1 for r in rows if pred(r))

    head = ("| label | triage primary (en / zh) | triage any label | queries any label (en / zh) |\n"
            "|---|---|---|---|")
    lines = [head]
    for lab in MODE_ORDER + PASSAGES:
        prim = [r for r in triage if r["labels"][:1] == [lab]]
        anyl = n(triage, lambda r: lab in r["labels"])
        qs = [r for r in queries if lab in r["labels"]]
        t = f"{len(prim)} ({n(prim, lambda r: r['lang'] == 'en')} / {n(prim, lambda r: r['lang'] == 'zh')})"
        if lab in PASSAGES:
            t = "-"
            anyl_s = "-"
        else:
            anyl_s = str(anyl)
        qv = f"{len(qs)} ({n(qs, lambda r: r['lang'] == 'en')} / {n(qs, lambda r: r['lang'] == 'zh')})"
        lines.append(f"| `{lab}` | {t} | {anyl_s} | {qv} |")
    ab = [r for r in triage if not r["labels"]]
    lines.append(f"| *(abstain: labels = [])* | {len(ab)} ({n(ab, lambda r: r['lang'] == 'en')} / "
                 f"{n(ab, lambda r: r['lang'] == 'zh')}) | - | - |")
    lines.append(f"| **total rows** | {len(triage)} ({n(triage, lambda r: r['lang'] == 'en')} / "
                 f"{n(triage, lambda r: r['lang'] == 'zh')}) | - | {len(queries)} "
                 f"({n(queries, lambda r: r['lang'] == 'en')} / {n(queries, lambda r: r['lang'] == 'zh')}) |")
    multi = n(triage, lambda r: len(r["labels"]) > 1)
    kinds = {}
    for r in triage:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    lines.append("")
    lines.append(f"Triage cases with more than one acceptable label: {multi}. By kind: "
                 + ", ".join(f"{k} {kinds[k]}" for k in sorted(kinds)) + ".")
    return "\n".join(lines)


def build() -> tuple[list[dict], list[dict]]:
    """All cases and queries, freshly built (idempotent)."""
    TRIAGE.clear()
    QUERIES.clear()
    for add in (add_numeric, add_memory, add_data, add_infra, add_perf, add_abstain, add_queries):
        add()
    return list(TRIAGE), list(QUERIES)


def render_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main() -> None:
    triage, queries = build()
    for name, rows in (("triage_cases.jsonl", triage), ("retrieval_queries.jsonl", queries)):
        ids = [r["id"] for r in rows]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise SystemExit(f"duplicate ids in {name}: {dupes}")
        (HERE / name).write_text(render_jsonl(rows), encoding="utf-8")
        print(f"wrote {len(rows)} rows to {name}")
    readme = HERE / "README.md"
    if readme.exists():
        text = readme.read_text(encoding="utf-8")
        a, b = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
        readme.write_text(text[:a] + "\n" + counts_table(triage, queries) + "\n" + text[b:], encoding="utf-8")
        print("updated the counts table in README.md")


if __name__ == "__main__":
    main()
