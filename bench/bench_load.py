"""Loopback load test (issue #14, item 7): the web chat and the Slack bot's HTTP endpoint driven at once with a
mix of short errors and 5 MB logs, while ``trainfix ingest`` runs again and again in another process. Stops by
itself (a fixed number of requests, and a deadline).

Three real processes share one data directory (index, feedback store) and one copy of the knowledge base:
- ``trainfix web`` (Gradio), driven through ``gradio_client`` on its public ``/diagnose`` endpoint;
- ``trainfix slack --mode http --port 0``, driven with signed Slack requests (mentions with a paste, shared
  5 MB log files, 👍 clicks on every answer) against a fake Slack Web API on 127.0.0.1 (tests/slack_fake.py);
- ``trainfix ingest`` (records rewritten, the index checked and rebuilt if needed) in a loop until the load ends.

Reported: errors (an exception, a non-200, a timeout, an answer naming the wrong failure mode), feedback rows
lost (👍 clicks acknowledged vs rows in ``feedback.sqlite3``), p50/p95/max latency per front-end and input kind.
The web chat's own thumbs up/down is a page event with no API endpoint, so feedback is driven through Slack,
which writes the same store.

    python bench/bench_load.py                                     # 40 requests per front-end, 5 MB logs
    python bench/bench_load.py --requests 4 --log-mb 0.2 --json    # the smoke test's size
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.bad_inputs import NAN_LOG, OOM, _log_lines  # noqa: E402
from tests.slack_fake import (  # noqa: E402
    BOT_USER,
    FORM_TYPE,
    JSON_TYPE,
    FakeSlack,
    action_body,
    event_body,
    post_blocks,
    send,
    sign,
)

SECRET = "load-signing-secret"
SHORT = [(OOM.splitlines()[-1], "cuda-oom"), (NAN_LOG, "nan-loss")]
PORT_TRIES = 20
RUN = str(time.time_ns() // 1000)
SLACK_LOG: list[str] = []  # the bot's own log lines (warnings), shown when something failed


def _env(data_dir: Path, kb_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFIX_")}
    env.update(TRAINFIX_DATA_DIR=str(data_dir), TRAINFIX_KB_DIR=str(kb_dir), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False", GRADIO_ANALYTICS_ENABLED="False", **extra)
    return env


def _trainfix(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def start_web(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    import socket

    for _ in range(PORT_TRIES):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = _trainfix(["web", "--port", str(port)], env)
        line = proc.stdout.readline()  # printed once it serves (or the error when the port was taken meanwhile)
        if "trainfix web: open" in line:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
            return proc, f"http://127.0.0.1:{port}/"
        proc.wait(timeout=60)
    raise RuntimeError(f"trainfix web did not start: {line}")


def start_slack(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = _trainfix(["slack", "--mode", "http", "--port", "0"], env)
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise RuntimeError(f"trainfix slack did not start: {line}{proc.stdout.read() if proc.poll() is not None else ''}")
    threading.Thread(target=lambda: SLACK_LOG.extend(proc.stdout), daemon=True).start()
    return proc, line.split("listening on ", 1)[1].split()[0]


class Ingest(threading.Thread):
    """``trainfix ingest`` in a loop until ``stop`` is set; every run's exit code and duration."""

    def __init__(self, env: dict[str, str], kb_dir: Path) -> None:
        super().__init__(daemon=True)
        self.env, self.kb_dir = env, kb_dir
        self.stop = threading.Event()
        self.runs: list[dict] = []

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "app.cli", "ingest", "--sources", str(self.kb_dir / "sources"),
                                   "--out", str(self.kb_dir / "records")], env=self.env, cwd=ROOT,
                                  capture_output=True, text=True)
            self.runs.append({"exit": proc.returncode, "seconds": round(time.monotonic() - start, 1),
                              "tail": (proc.stderr or proc.stdout).strip().splitlines()[-1:]})


def _thumbs_up(data_dir: Path) -> int:
    path = data_dir / "feedback.sqlite3"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM feedback WHERE rating = 1").fetchone()[0]


def _mode(d: dict) -> str | None:
    return d["candidates"][0]["failure_mode"] if d.get("candidates") else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=40, help="requests per front-end")
    parser.add_argument("--log-mb", type=float, default=5.0, help="size of the large logs (every 4th request)")
    parser.add_argument("--workers", type=int, default=4, help="concurrent clients per front-end")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds; the run stops (and fails) after it")
    parser.add_argument("--data-dir", help="data directory (default: a fresh one; its index is built under load)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    kb_dir = tmp / "kb"
    shutil.copytree(ROOT / "kb", kb_dir)  # ingest rewrites records: a copy, never the checkout's
    data_dir = Path(args.data_dir) if args.data_dir else tmp / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    rows_before = _thumbs_up(data_dir)
    fake = FakeSlack()
    env = _env(data_dir, kb_dir)
    slack_env = _env(data_dir, kb_dir, TRAINFIX_SLACK_BOT_TOKEN="xoxb-fake", TRAINFIX_SLACK_SIGNING_SECRET=SECRET,
                     TRAINFIX_SLACK_API_URL=fake.api_url)
    big = _log_lines(int(args.log_mb * 1_000_000), 5) + OOM.encode()
    procs: list[subprocess.Popen] = []
    ingest = Ingest(env, kb_dir)
    results: list[dict] = []
    lock = threading.Lock()
    clicks = {"sent": 0, "thanked": 0}
    deadline = time.monotonic() + args.deadline
    try:
        web, web_url = start_web(env)
        procs.append(web)
        slack, slack_url = start_slack(slack_env)
        procs.append(slack)
        from gradio_client import Client

        local = threading.local()

        def web_request(i: int) -> None:
            text, want = (big.decode(), "cuda-oom") if i % 4 == 3 else SHORT[i % 2]
            kind = "5MB log" if i % 4 == 3 else "short"
            start = time.monotonic()
            try:
                if not hasattr(local, "client"):
                    local.client = Client(web_url, verbose=False)
                job = local.client.submit(text, "auto", api_name="/diagnose")
                out = job.result(timeout=max(1.0, deadline - time.monotonic()))
                got = _mode(out["diagnosis"])
                error = None if got == want else f"answered {got}, expected {want}"
            except Exception as err:  # noqa: BLE001 - every failure is counted, the load goes on
                error = f"{type(err).__name__}: {str(err)[:200]}"
            with lock:
                results.append({"front": "web", "kind": kind, "seconds": time.monotonic() - start, "error": error})
            if error:
                print(f"web request {i}: {error}", file=sys.stderr, flush=True)

        def slack_request(i: int) -> None:
            ts = f"{RUN}.{i:06d}"  # new ids every run: a reused data dir must not read them as Slack's retries
            event = {"type": "app_mention", "user": "U0USER", "ts": ts, "channel": "C0LOAD", "event_ts": ts}
            if i % 4 == 3:
                kind, want = "5MB log", "cuda-oom"
                fake.files[f"FL{i}"] = ("train.log", big)
                event.update(text=f"<@{BOT_USER}> this one", files=[{"id": f"FL{i}"}])
            else:
                kind = "short"
                text, want = SHORT[i % 2]
                event["text"] = f"<@{BOT_USER}> " + text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            start = time.monotonic()
            error = None
            try:
                body = event_body(event, f"Ev-load-{RUN}-{i}")
                status, _ = send(slack_url, body, sign(SECRET, body), JSON_TYPE)
                if status != 200:
                    raise RuntimeError(f"HTTP {status}")

                def answer():
                    posts = [c for c in fake.posts() if c.params.get("thread_ts") == ts]
                    return posts if any("tf_feedback_up" in json.dumps(post_blocks(p)) or ":warning:" in
                                        json.dumps(post_blocks(p)) for p in posts) else None

                posts = fake.wait_for(answer, f"the answer in {ts}", deadline=max(1.0, deadline - time.monotonic()))
                seconds = time.monotonic() - start
                header = next((b["text"]["text"] for p in posts for b in post_blocks(p) if b.get("type") == "header"), "")
                if f"({want})" not in header:
                    error = f"answered {header!r}, expected {want}"
                up = next((el for p in posts for b in post_blocks(p) if b.get("type") == "actions"
                           for el in b["elements"] if el.get("action_id") == "tf_feedback_up"), None)
                if up is not None:
                    with lock:
                        clicks["sent"] += 1
                    body = action_body({"action_id": "tf_feedback_up", "block_id": "tf_feedback", "value": up["value"]},
                                       "C0LOAD", posts[-1].reply["ts"], ts)
                    status, _ = send(slack_url, body, sign(SECRET, body), FORM_TYPE)
                    if status != 200:
                        raise RuntimeError(f"feedback click: HTTP {status}")
            except Exception as err:  # noqa: BLE001
                seconds = time.monotonic() - start
                error = f"{type(err).__name__}: {str(err)[:200]}"
            with lock:
                results.append({"front": "slack", "kind": kind, "seconds": seconds, "error": error})
            if error:
                print(f"slack request {i}: {error}", file=sys.stderr, flush=True)

        ingest.start()
        load_start = time.monotonic()
        with ThreadPoolExecutor(args.workers) as web_pool, ThreadPoolExecutor(args.workers) as slack_pool:
            futures = []
            for i in range(args.requests):
                futures.append(web_pool.submit(web_request, i))
                futures.append(slack_pool.submit(slack_request, i))
            for f in futures:
                f.result(timeout=max(1.0, deadline - time.monotonic()))
        # every 👍 acknowledged: the bot thanks each click privately once the row is written
        try:
            fake.wait_for(lambda: len(fake.named("chat.postEphemeral")) >= clicks["sent"] or None, "the feedback thanks",
                          deadline=max(1.0, min(120.0, deadline - time.monotonic())))
        except AssertionError:
            pass  # counted below as lost feedback
        load_seconds = time.monotonic() - load_start
    finally:
        ingest.stop.set()
        ingest.join(timeout=600)
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        fake.close()
    clicks["thanked"] = len(fake.named("chat.postEphemeral"))
    rows = _thumbs_up(data_dir) - rows_before

    def pct(xs: list[float], q: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")

    latency = {}
    for front in ("web", "slack"):
        for kind in ("short", "5MB log"):
            xs = [r["seconds"] for r in results if r["front"] == front and r["kind"] == kind and not r["error"]]
            latency[f"{front} {kind}"] = {"n": len(xs), "p50": round(pct(xs, 0.5), 2), "p95": round(pct(xs, 0.95), 2),
                                          "max": round(max(xs), 2) if xs else None,
                                          "mean": round(statistics.fmean(xs), 2) if xs else None}
    errors = [r for r in results if r["error"]]
    report = {"requests": len(results), "errors": len(errors), "error_samples": [e["error"] for e in errors[:5]],
              "feedback_clicks": clicks["sent"], "feedback_rows": rows, "feedback_lost": clicks["sent"] - rows,
              "ingest_runs": len(ingest.runs), "ingest_failures": sum(r["exit"] != 0 for r in ingest.runs),
              "ingest_samples": ingest.runs[:3], "load_seconds": round(load_seconds, 1), "latency_s": latency,
              "log_mb": args.log_mb, "workers_per_front": args.workers}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['requests']} requests in {report['load_seconds']} s, {report['errors']} errors; "
              f"feedback {rows}/{clicks['sent']} rows ({report['feedback_lost']} lost); "
              f"trainfix ingest ran {len(ingest.runs)}x ({report['ingest_failures']} failed) meanwhile")
        for name, row in latency.items():
            print(f"  {name:15} n={row['n']:3}  p50 {row['p50']:6.2f} s  p95 {row['p95']:6.2f} s  max {row['max']} s")
        for e in report["error_samples"]:
            print("  error:", e)
    if errors or report["feedback_lost"]:
        print("".join(SLACK_LOG[-40:]), file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    ok = not errors and report["feedback_lost"] == 0 and not report["ingest_failures"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
