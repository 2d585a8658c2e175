"""Generate a realistic, deterministic multi-rank training log (default 100 MB) for the scan benchmark.

HF Trainer dict lines, DeepSpeed ``[Rank N]`` and throughput-timer lines, torchrun ``[rankN]:`` prefixes,
NCCL INFO lines with ``host:pid:tid`` prefixes, ANSI colours, tqdm ``\\r`` redraws and, near the end, a CUDA
OOM on one rank followed by NCCL watchdog timeouts on the others and torchrun's ChildFailedError summary.

    python bench/make_log.py [--size-mb 100] [--seed 0] [--out /tmp/trainfix_bench_100mb.log]
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

GREEN, RESET = "\x1b[32m", "\x1b[0m"

TAIL = """[rank5]: Traceback (most recent call last):
[rank5]:   File "/workspace/train.py", line 212, in <module>
[rank5]:     main()
[rank5]:   File "/workspace/train.py", line 205, in main
[rank5]:     trainer.train()
[rank5]:   File "/opt/conda/lib/python3.11/site-packages/transformers/trainer.py", line 2241, in train
[rank5]:     return inner_training_loop(
[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 5 has a total capacity of 79.15 GiB of which 2.02 GiB is free. Including non-PyTorch memory, this process has 77.12 GiB memory in use.
[rank2]:[E ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=918273, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600312 milliseconds before timing out.
[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=918273, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600298 milliseconds before timing out.
W0501 14:02:11.123000 140 torch/distributed/elastic/multiprocessing/api.py:891] Sending process 1234 closing signal SIGTERM
E0501 14:02:41.456000 140 torch/distributed/elastic/multiprocessing/api.py:863] failed (exitcode: 1) local_rank: 5 (pid: 1239) of binary: /opt/conda/bin/python
Traceback (most recent call last):
  File "/opt/conda/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_14:02:41
  host      : node-1
  rank      : 5 (local_rank: 5)
  exitcode  : 1 (pid: 1239)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def lines(rng: random.Random, ranks: int = 8):
    """Yield log lines (with their newlines) forever."""
    step = 0
    total = 200000
    ts = 0
    while True:
        step += 1
        ts += 1
        loss = 0.9 + 1.7 * math.exp(-step / 40000) + rng.gauss(0, 0.02)
        hh, mm, ss = (ts // 3600) % 24, (ts // 60) % 60, ts % 60
        stamp = f"2024-05-01 {hh:02d}:{mm:02d}:{ss:02d},{rng.randrange(1000):03d}"
        pct = step * 100 // total
        bar = "█" * (pct // 10) + " " * (10 - pct // 10)
        redraws = "".join(
            f"\r{pct:3d}%|{bar}| {step}/{total} [{ts // 60:02d}:{ts % 60:02d}<{(total - step) // 60:02d}:00, "
            f"{rng.uniform(1.4, 1.6):.2f}it/s]" for _ in range(3)
        )
        yield redraws + "\n"
        if step % 10 == 0:
            yield (f"{{'loss': {loss:.4f}, 'grad_norm': {abs(rng.gauss(1.0, 0.2)):.4f}, "
                   f"'learning_rate': {2e-5 * (1 - step / total):.4e}, 'epoch': {step / 20000:.4f}}}\n")
        for r in range(ranks):
            yield (f"{GREEN}[{stamp}] [INFO] [logging.py:96:log_dist]{RESET} [Rank {r}] step={step}, skipped=0, "
                   f"lr=[{2e-5 * (1 - step / total):.6e}], mom=[(0.9, 0.999)]\n")
        yield (f"[{stamp}] [INFO] [timer.py:260:stop] epoch=0/micro_step={step * 4}/global_step={step}, "
               f"RunningAvgSamplesPerSec={rng.uniform(95, 105):.4f}, CurrSamplesPerSec={rng.uniform(90, 110):.4f}, "
               f"MemAllocated=41.2GB, MaxMemAllocated=63.9GB\n")
        if step % 7 == 0:
            r = rng.randrange(ranks)
            yield (f"[rank{r}]:[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified in DDP "
                   "constructor, but did not find any unused parameters in the forward pass. This flag results "
                   "in an extra traversal of the autograd graph every iteration\n")
        if step % 50 == 0:
            node = rng.randrange(2) + 1
            yield (f"node-{node}:{1200 + rng.randrange(8)}:{1290 + rng.randrange(8)} [{rng.randrange(8)}] NCCL INFO "
                   f"Channel {rng.randrange(24):02d}/24 :    0   1   2   3   4   5   6   7\n")


def make_log(out: Path, size_mb: float = 100.0, seed: int = 0) -> Path:
    """Write the log (same bytes for the same arguments) and return its path."""
    rng = random.Random(seed)
    target = int(size_mb * 1024 * 1024) - len(TAIL.encode())
    written = 0
    buf: list[str] = []
    pending = 0
    with out.open("wb") as f:
        for line in lines(rng):
            data = line
            buf.append(data)
            pending += len(data)
            if pending > 1 << 20:
                chunk = "".join(buf).encode()
                f.write(chunk)
                written += len(chunk)
                buf, pending = [], 0
                if written >= target:
                    break
        f.write("".join(buf).encode())
        f.write(TAIL.encode())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/trainfix_bench_100mb.log"))
    args = ap.parse_args()
    path = make_log(args.out, args.size_mb, args.seed)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
