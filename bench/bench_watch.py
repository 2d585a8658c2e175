"""Watch benchmark: ``trainfix watch -`` on a generated stream (default 1 GiB), memory sampled as it runs.

    python bench/bench_watch.py [--size-mb 1024]

The stream is generated on the fly (nothing written to disk) and piped into a real ``trainfix watch -`` process:
HF Trainer metric lines, DeepSpeed/NCCL info lines, tqdm redraws and warnings from 8 ranks, a NaN loss at 40 % of
the stream and a CUDA OOM at 90 %. The child's resident memory (VmRSS from /proc) is read when 5 % of the stream has
been consumed ("start") and at the end ("end"); its peak (VmHWM) too. Prints lines/s, MiB/s, the RSS figures and
the alerts (there must be exactly the two failures), and writes ``bench/results/watch.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MiB = 1024 * 1024


def _status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024  # MiB
    return out


def _block(first_step: int, n_steps: int, nan: bool = False) -> bytes:
    """The log of ``n_steps`` optimizer steps: per step 8 ranks' info lines, a tqdm redraw, every 10th a metric line."""
    lines: list[str] = []
    for step in range(first_step, first_step + n_steps):
        for rank in range(8):
            lines.append(f"[rank{rank}]:[2026-12-01 10:{step // 60 % 60:02d}:{step % 60:02d}] INFO data.py:212 "
                         f"fetched shard {step % 97} batch {step} tokens 524288 in 0.{(step * 7 + rank) % 90 + 10:02d}s")
        lines.append(f"\r{step % 1000}/1000 [12:{step % 60:02d}<40:00, 1.{step % 9}5it/s]\r{step % 1000}/1000 [12:{step % 60:02d}<40:00, 1.{step % 9}6it/s]")
        if step % 10 == 0:
            loss = "nan" if nan else f"{2.4 - (step % 5000) * 1e-5:.4f}"
            lines.append(f"{{'loss': {loss}, 'grad_norm': {0.9 + (step % 7) * 0.02:.3f}, "
                         f"'learning_rate': 2e-05, 'epoch': {step / 5000:.3f}, 'step': {step}}}")
        if step % 997 == 0:
            lines.append("[rank3]: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed "
                         "explicitly")
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    args = ap.parse_args()
    total = args.size_mb * MiB
    env = {**os.environ, "TRAINFIX_WATCH_POLL_SECONDS": "0.5"}
    exe = [sys.executable, "-m", "app.cli", "watch", "-", "--json"]
    child = subprocess.Popen(exe, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                             env=env)
    alerts: list[dict] = []
    threading.Thread(target=lambda: [alerts.append(json.loads(x)) for x in child.stdout if x.startswith(b"{")],
                     daemon=True).start()
    err: list[bytes] = []
    threading.Thread(target=lambda: err.extend(child.stderr), daemon=True).start()

    sent = lines = 0
    step = 1
    start_rss: dict[str, int] | None = None
    samples: list[tuple[int, int]] = []
    nan_at, oom_at = int(total * 0.4), int(total * 0.9)
    nan_done = oom_done = False
    t0 = time.perf_counter()
    while sent < total:
        nan = not nan_done and sent >= nan_at
        data = _block(step, 200, nan=nan)
        nan_done = nan_done or nan
        if not oom_done and sent >= oom_at:
            data += b"[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.\n"
            oom_done = True
        step += 200
        child.stdin.write(data)
        sent += len(data)
        lines += data.count(b"\n")
        if start_rss is None and sent >= total * 0.05:
            start_rss = _status(child.pid)
        if len(samples) < sent * 20 // total:
            samples.append((sent // MiB, _status(child.pid)["VmRSS"]))
    child.stdin.close()
    # the child has read everything once stdin is closed and its last write is consumed: wait for it to finish
    end_rss = _status(child.pid)
    child.wait()
    elapsed = time.perf_counter() - t0
    keys = [k for a in alerts for k in a["finding"]["keys"]]
    result = {
        "bytes": sent, "lines": lines, "seconds": round(elapsed, 1),
        "lines_per_s": round(lines / elapsed), "mib_per_s": round(sent / MiB / elapsed, 1),
        "rss_start_mib": start_rss["VmRSS"], "rss_end_mib": end_rss["VmRSS"], "rss_peak_mib": end_rss["VmHWM"],
        "rss_samples_mib": samples, "alerts": keys, "exit_code": child.returncode,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    print(f"stream {sent / MiB:,.0f} MiB, {lines:,} lines in {elapsed:.1f} s: {result['lines_per_s']:,} lines/s, "
          f"{result['mib_per_s']} MiB/s")
    print(f"RSS at 5 %: {result['rss_start_mib']} MiB; at the end: {result['rss_end_mib']} MiB; "
          f"peak: {result['rss_peak_mib']} MiB")
    print(f"RSS every 5 % (MiB read, MiB RSS): {samples}")
    print(f"alerts: {keys}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "watch.json").write_text(json.dumps(result, indent=2) + "\n")
    if keys != ["failure:nan-loss", "failure:cuda-oom"] or child.returncode != 0:
        sys.exit(f"unexpected alerts or exit code: {keys}, {child.returncode}; stderr: {b''.join(err)[-2000:]!r}")


if __name__ == "__main__":
    main()
