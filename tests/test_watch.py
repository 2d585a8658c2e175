"""trainfix watch: the incremental analysis (assistant.watch), the file follower, the CLI on a log another process
appends to (rotation, truncation, stdin with --tee) and alerts posted to a fake Slack on 127.0.0.1.

No test depends on timing: a live log is written in phases, and each phase waits (polling, with a generous
deadline) for what the previous one must have caused before the next is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.follow import follow_file
from app.watch_alerts import Reporter, SlackTarget
from assistant.config import Settings
from assistant.triage import TAIL_LINES
from assistant.watch import Thresholds, Watcher
from tests.slack_fake import FakeSlack, block_kit_problems, post_blocks, post_text

DEADLINE = 120.0
SECRET = "hf_" + "Zq7" * 12
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
DISK = "OSError: [Errno 28] No space left on device"
CORRUPT = "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"


def hf_line(step: int, loss: float, grad: float = 1.0, **more: float) -> str:
    extra = "".join(f", '{k}': {v}" for k, v in more.items())
    return f"{{'loss': {loss}, 'grad_norm': {grad}, 'learning_rate': 2e-05{extra}, 'epoch': {step / 100:.2f}, 'step': {step}}}"


def healthy(start: int, n: int) -> list[str]:
    return [hf_line(s, round(2.5 - 0.004 * s, 4), 1.0 + 0.01 * (s % 3)) for s in range(start, start + n)]


def feed(w: Watcher, lines: list[str]) -> list:
    out = []
    for line in lines:
        w.feed((line + "\n").encode())
        out += w.check()
    return out


# -- the core: data in, findings out --------------------------------------------------------------


def test_a_failure_is_reported_once_and_a_new_one_again():
    w = Watcher()
    assert feed(w, healthy(1, 40)) == []
    first = feed(w, [hf_line(41, float("nan"))] + [hf_line(s, float("nan")) for s in range(42, 60)])
    assert [f.keys for f in first] == [["failure:nan-loss"]]
    assert first[0].kind == "failure" and first[0].step == 41 and first[0].line == 41
    assert feed(w, [OOM]) and feed(w, [OOM, OOM]) == []
    assert [k for f in w.check() for k in f.keys] == []
    w.reset()  # a new run: the same failure is news again
    again = feed(w, healthy(1, 10) + [OOM])
    assert [f.keys for f in again] == [["failure:cuda-oom"]]


def test_grad_growth_warns_before_the_metric_stage_names_an_explosion():
    w = Watcher(Thresholds.from_settings(Settings()))
    lines = [hf_line(s, 2.4, 1.0) for s in range(1, 21)]
    # grad norm doubling each step from step 21: 5 rises and 3x its level before the rise
    lines += [hf_line(20 + i, 2.4, 1.0 * 2 ** i) for i in range(1, 8)]
    found = feed(w, lines)
    warnings = [f for f in found if f.kind == "warning"]
    assert [f.keys for f in warnings] == [["warning:grad-growth:grad_norm"]]
    assert warnings[0].step == 25 and warnings[0].failure_mode == "gradient-explosion"
    assert "5 consecutive" in warnings[0].en


@pytest.mark.parametrize(("series", "lines", "key"), [
    ("loss_scale", [f"step {s} | loss 2.1 | loss_scale: {65536 / 2 ** max(0, s - 10)}" for s in range(1, 16)],
     "warning:loss-scale:loss_scale"),
    ("step_time", [f"step {s} | loss 2.1 | step_time {1.0 if s <= 12 else 1.6}" for s in range(1, 30)],
     "warning:step-time:step_time"),
    ("gpu_reserved", [f"step {s} | loss 2.1 | mem_reserved {10 + 0.5 * s:.1f}" for s in range(1, 16)],
     "warning:memory:gpu_reserved"),
])
def test_trend_warnings_have_their_own_thresholds(monkeypatch, series, lines, key):
    found = feed(Watcher(Thresholds.from_settings(Settings())), lines)
    assert key in [k for f in found for k in f.keys]
    # raising the threshold in settings silences it
    monkeypatch.setenv("TRAINFIX_WATCH_LOSS_SCALE_HALVINGS", "30")
    monkeypatch.setenv("TRAINFIX_WATCH_STEP_TIME_RATIO", "5")
    monkeypatch.setenv("TRAINFIX_WATCH_MEMORY_RATIO", "9")
    quiet = feed(Watcher(Thresholds.from_settings(Settings())), lines)
    assert key not in [k for f in quiet for k in f.keys]


def test_watcher_state_stays_bounded_over_a_long_stream():
    w = Watcher()
    block = ("\n".join(healthy(1, 1000)) + "\n").encode()
    for _ in range(60):
        w.feed(block)
    w.check()
    s = w.scanner
    assert len(s.tail) <= TAIL_LINES and len(s.head) <= 400
    assert all(len(x.samples) <= 512 for x in s.metrics.series.values())
    assert s.chunker.stats.lines == 60_000


def test_alert_is_a_cited_answer_with_step_evidence_causes_and_first_fix():
    w = Watcher()
    (finding,) = feed(w, healthy(1, 30) + [hf_line(31, float("nan"))])
    shown: list[str] = []
    reporter = Reporter(Settings(), source="train.log", echo=shown.append, warn=shown.append)
    d = reporter.report(finding)
    text = shown[0]
    assert d.candidates[0].failure_mode == "nan-loss"
    assert text.startswith("### trainfix watch — train.log: nan-loss at step 31 (line 31)")
    for part in ("**Evidence**", "line 31", "**Likely causes in this case**", "**What to do first**", "**Sources**"):
        assert part in text
    fixes = text.split("**What to do first**")[1].split("**")[0]
    assert "\n1. " in fixes and "\n2. " not in fixes  # the first fix only
    causes = text.split("**Likely causes in this case**")[1].split("**What to do first**")[0]
    assert "\n3. " in causes and "\n4. " not in causes  # the top causes
    # every cited source line really is in the knowledge base's source text
    for c in d.citations:
        source = (Settings().sources_dir / c.source).read_text(encoding="utf-8").splitlines()
        assert " ".join(c.quote.split())[:40] in " ".join(" ".join(source[c.start_line - 1:c.end_line]).split())


# -- following a file ------------------------------------------------------------------------------


def test_follower_reads_appends_and_survives_rotation_and_truncation(tmp_path):
    log = tmp_path / "train.log"
    stop = threading.Event()
    got: list = []
    seen = threading.Condition()

    def run():
        for ev in follow_file(log, stop, poll=0.02):
            with seen:
                got.append(ev)
                seen.notify_all()

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def wait(pred, what):
        end = time.monotonic() + DEADLINE
        with seen:
            while not pred():
                assert time.monotonic() < end, f"timed out waiting for {what}: {got[-5:]}"
                seen.wait(0.1)

    def data() -> bytes:
        return b"".join(e.data for e in got if e.kind == "data")

    wait(lambda: any(e.kind == "waiting" for e in got), "waiting")
    log.write_bytes(b"one\ntwo\n")
    wait(lambda: data() == b"one\ntwo\n", "first lines")
    with log.open("ab") as fh:
        fh.write(b"three\n")
    wait(lambda: data().endswith(b"three\n"), "an appended line")
    log.rename(tmp_path / "train.log.1")
    log.write_bytes(b"four\n")
    wait(lambda: any(e.kind == "rotated" for e in got) and data().endswith(b"four\n"), "rotation")
    log.write_bytes(b"")
    wait(lambda: any(e.kind == "truncated" for e in got), "truncation")
    with log.open("ab") as fh:
        fh.write(b"five\n")
    wait(lambda: data().endswith(b"five\n"), "a line after truncation")
    assert data() == b"one\ntwo\nthree\nfour\nfive\n"  # nothing read twice, nothing lost
    stop.set()
    t.join(DEADLINE)
    assert not t.is_alive()


class Live:
    """``trainfix watch`` running on a file; stdout and stderr collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "watch", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=Path(__file__).resolve().parent.parent)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, k=sink: [k.append(x.decode()) for x in iter(s.readline, b"")],
                             daemon=True).start()

    def alerts(self) -> list[dict]:
        return [json.loads(x) for x in list(self.out) if x.startswith("{")]

    def wait(self, pred, what: str):
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            if pred():
                return
            assert self.proc.poll() is None, f"watch exited: {''.join(self.err)}"
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; alerts {self.keys()}; stderr {''.join(self.err)}")

    def keys(self) -> list[str]:
        return [k for a in self.alerts() for k in a["finding"]["keys"]]

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(DEADLINE)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFIX_")}
    env.update({"TRAINFIX_WATCH_POLL_SECONDS": "0.05", "TRAINFIX_DATA_DIR": os.environ["TRAINFIX_DATA_DIR"], **extra})
    return env


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def test_watch_cli_alerts_once_per_finding_on_a_log_another_process_appends_to(tmp_path):
    log = tmp_path / "run" / "train.log"
    log.parent.mkdir()
    live = Live([str(log), "--json"], _env())
    try:
        live.wait(lambda: any("does not exist yet" in x for x in live.err), "the waiting notice")
        _append(log, healthy(1, 40))
        _append(log, [hf_line(41, float("nan"))])
        live.wait(lambda: "failure:nan-loss" in live.keys(), "the NaN alert")
        _append(log, [hf_line(s, float("nan")) for s in range(42, 80)] + [OOM])
        live.wait(lambda: "failure:cuda-oom" in live.keys(), "the OOM alert")
        # rotation: the old file moves away, a new one takes its place
        log.rename(log.with_suffix(".log.1"))
        _append(log, [hf_line(s, float("nan")) for s in range(80, 90)] + [OOM, DISK])
        live.wait(lambda: "failure:disk-full" in live.keys(), "the alert after rotation")
        assert any("was rotated" in x for x in live.err)
        # truncation: the file is cut, then written again
        log.write_text("")
        live.wait(lambda: any("was truncated" in x for x in live.err), "the truncation notice")
        _append(log, [OOM, CORRUPT])
        live.wait(lambda: "failure:checkpoint-corruption" in live.keys(), "the alert after truncation")
    finally:
        code = live.stop()
    keys = live.keys()
    assert len(keys) == len(set(keys)), keys  # never the same finding twice
    assert keys[:2] == ["failure:nan-loss", "failure:cuda-oom"]
    first = live.alerts()[0]
    assert first["finding"]["step"] == 41 and first["diagnosis"]["candidates"][0]["cites"]
    assert code == 0 and "alert(s)" in live.err[-1]


def test_watch_stdin_tee_passes_lines_through_unchanged_and_alerts_on_stderr():
    text = ("\n".join(healthy(1, 30) + ["\x1b[31mwarning: colour\x1b[0m", "progress 10%\rprogress 50%", OOM]) + "\n")
    data = text.encode() + "中文日志 ünïcode\n".encode() + b"no newline at the end"
    res = subprocess.run([sys.executable, "-m", "app.cli", "watch", "-", "--tee"], input=data, capture_output=True,
                         env=_env(), cwd=Path(__file__).resolve().parent.parent, timeout=DEADLINE)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stdout == data  # byte for byte
    err = res.stderr.decode()
    assert "trainfix watch — stdin: cuda-oom" in err and err.count("## CUDA out of memory") == 1


def test_watch_refuses_a_directory_and_incomplete_slack_settings(tmp_path):
    for args, env in (([str(tmp_path)], _env()), ([str(tmp_path / "x.log"), "--slack"], _env())):
        res = subprocess.run([sys.executable, "-m", "app.cli", "watch", *args], capture_output=True, env=env,
                             cwd=Path(__file__).resolve().parent.parent, timeout=DEADLINE, stdin=subprocess.DEVNULL)
        assert res.returncode == 2 and "Traceback" not in res.stderr.decode()
        assert res.stderr.decode().startswith("trainfix: ")


# -- Slack -----------------------------------------------------------------------------------------


@pytest.fixture
def slack():
    fake = FakeSlack()
    yield fake
    fake.close()


def test_watch_posts_to_an_incoming_webhook_redacted(slack):
    text = "\n".join(healthy(1, 20) + [f"{OOM} (HF_TOKEN={SECRET})"]) + "\n"
    res = subprocess.run([sys.executable, "-m", "app.cli", "watch", "-", "--slack"], input=text.encode(),
                         capture_output=True, timeout=DEADLINE, cwd=Path(__file__).resolve().parent.parent,
                         env=_env(TRAINFIX_SLACK_WEBHOOK_URL=slack.url + "/hooks/T0/B0/abc"))
    assert res.returncode == 0, res.stderr.decode()
    hooks = slack.wait_for(slack.hooks, "the webhook post")
    assert len(hooks) == 1  # one finding, one alert
    body = post_text(hooks[0])
    assert "cuda-oom" in body and SECRET not in body and "[REDACTED:huggingface-token]" in body
    assert SECRET not in res.stdout.decode()
    assert block_kit_problems(hooks[0].params.get("text"), post_blocks(hooks[0])) == []


def test_reporter_posts_in_the_bots_channel_with_the_plot(slack):
    w = Watcher()
    (finding,) = feed(w, healthy(1, 30) + [hf_line(31, float("nan"))])
    target = SlackTarget(token="xoxb-fake", channel="C0WATCH", api_url=slack.api_url)
    warned: list[str] = []
    Reporter(Settings(), source="train.log", echo=lambda _: None, warn=warned.append, slack=target).report(finding)
    posts = slack.wait_for(slack.posts, "chat.postMessage")
    assert posts[0].params["channel"] == "C0WATCH"
    assert "nan-loss at step 31" in post_text(posts[0]) and "Sources" in post_text(posts[0])
    assert all(block_kit_problems(p.params.get("text"), post_blocks(p)) == [] for p in posts)
    slack.wait_for(lambda: slack.named("files.completeUploadExternal"), "the plot upload")
    assert warned == []


def test_a_refused_slack_post_is_a_warning_and_the_watch_goes_on(slack):
    w = Watcher()
    (finding,) = feed(w, [OOM])
    warned: list[str] = []
    target = SlackTarget(token="xoxb-fake", channel="C0NOTIN", api_url=slack.api_url)  # the bot is not a member
    shown: list[str] = []
    Reporter(Settings(), source="x", echo=shown.append, warn=warned.append, slack=target).report(finding)
    assert shown and warned and "not_in_channel" in warned[0]
