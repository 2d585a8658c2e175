"""Web chat: resident memory of `trainfix web` with everything loaded (rules, case memory, model, Chroma,
BM25, Gradio) and the latency of 20 concurrent `gradio_client` users calling `/diagnose`.

    python -m bench.web [--users 20] [--requests 5] [--smoke]

The server runs in a child process on a free loopback port; a question and a log are answered first so
that every part is loaded, then RSS is read from /proc. Each user sends its requests one after another
(errors, logs and questions in turn); p50/p95 over all requests. The reference is one request alone.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from bench.common import Row, Summary, child_env, percentile, report

TEXTS = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "\n".join("{'loss': %.3f, 'learning_rate': 4e-05, 'epoch': %.2f}" % (2.1 - i / 100, i / 100) for i in range(40))
    + "\n{'loss': nan, 'learning_rate': 4e-05, 'epoch': 0.40}",
    "how many checkpoints should I keep?",
    "NCCL watchdog timeout on rank 3 after 600000 ms",
]
COMMAND = "python -m bench.web"


def _serve() -> None:
    """Child: serve the web app on a free loopback port and print its URL."""
    from app.web import launch
    from assistant.config import Settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launch(Settings(web_user=None, web_password=None), host="127.0.0.1", port=port, block=False)
    print(f"http://127.0.0.1:{port}/", flush=True)
    while True:
        time.sleep(3600)


def _rss_mib(pid: int) -> tuple[float, float]:
    fields = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def run(users: int = 20, requests: int = 5, smoke: bool = False) -> list[Row]:
    """Measure and return the table rows."""
    from gradio_client import Client

    proc = subprocess.Popen([sys.executable, "-m", "bench.web", "--serve"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=child_env(), text=True)
    try:
        url = proc.stdout.readline().strip() if proc.stdout else ""
        if not url:
            raise RuntimeError("the web app did not start")
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        texts = TEXTS[:1] if smoke else TEXTS
        warm = Client(url, verbose=False)
        for t in texts:  # loads the case memory, the model, Chroma and BM25
            warm.predict(t, "auto", api_name="/diagnose")
        rss, hwm = _rss_mib(proc.pid)
        alone = []
        for _ in range(1 if smoke else 3):
            for t in texts:
                start = time.perf_counter()
                warm.predict(t, "auto", api_name="/diagnose")
                alone.append((time.perf_counter() - start) * 1000)
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        def user(i: int) -> None:
            try:
                client = Client(url, verbose=False)
                for j in range(requests):
                    t = texts[(i + j) % len(texts)]
                    start = time.perf_counter()
                    client.predict(t, "auto", api_name="/diagnose")
                    with lock:
                        latencies.append((time.perf_counter() - start) * 1000)
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(f"{type(err).__name__}: {err}")

        threads = [threading.Thread(target=user, args=(i,)) for i in range(users)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=600)
        if errors:
            raise RuntimeError(f"{len(errors)} user(s) failed: {errors[0]}")
        rss_after, hwm_after = _rss_mib(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    a = Summary.of(alone)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    peak = max(hwm, hwm_after)
    return [
        Row("web chat RSS, everything loaded (rules, cases, model, Chroma, BM25, Gradio)",
            f"{rss:.0f} MiB after warm-up; peak {peak:.0f} MiB under load", "—", "—", "≤ 700 MiB", peak <= 700, COMMAND,
            {"rss_mib": rss, "rss_after_load_mib": rss_after, "peak_mib": peak}),
        Row(f"web chat, {users} concurrent `gradio_client` users × {requests} requests",
            f"p50 {p50:.0f} ms, p95 {p95:.0f} ms", f"one user alone: {a.text('ms', 0)}",
            f"p50 {p50 / a.median:.1f}× alone", "—", None, COMMAND,
            {"p50_ms": p50, "p95_ms": p95, "n": len(latencies), "alone_ms": a.__dict__}),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="2 users, 1 request each, one text")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        _serve()
        return
    rows = run(2, 1, smoke=True) if args.smoke else run(args.users, args.requests)
    report("web", rows, keep=not args.smoke)


if __name__ == "__main__":
    main()
