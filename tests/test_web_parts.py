"""The web chat's parts without a browser: safe rendering, citations, source view, plot, uploads, feedback, login."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.feedback import OUT_OF_SCOPE, FeedbackStore, export_cases
from app.plot import metrics_png
from app.web_render import answer_markdown, source_html, user_markdown
from app.web_session import Conversation
from app.web_upload import prepared
from assistant import Assistant, InputError, Settings

WEB = Path(__file__).parent / "fixtures" / "web"
OOM = (WEB / "oom_traceback.txt").read_text(encoding="utf-8")
TRAINER_LOG = WEB / "trainer_nan.log"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def rules() -> Assistant:
    return Assistant(retrieval="never")


def test_answer_markdown_escapes_html_and_links_every_marker(rules):
    d = rules.diagnose(OOM + "\n<script>window.x=1</script> <img src=x onerror=alert(1)>")
    md, cites = answer_markdown(d, "7")
    assert "<script" not in md.replace("`<script", "")  # only inside code spans / blocks, where it is text
    assert "<img" not in md.replace("`", "").split("line ")[0]
    assert cites and set(cites) == set(range(1, len(cites) + 1))
    for n in cites:
        assert f"(#tfcite-7-{n})" in md
    assert "[\\[1\\]](#tfcite-7-1)" in md


def test_user_paste_is_shown_as_code_whatever_it_holds():
    shown = user_markdown("```\n<script>alert(1)</script>\n```")
    assert shown.startswith("````text\n") and shown.endswith("\n````")


def test_source_view_highlights_exactly_the_cited_lines(rules):
    d = rules.diagnose(OOM)
    _, cites = answer_markdown(d, "0")
    c = cites[2]
    page = source_html(c, Settings().sources_dir)
    assert page.count('class="tf-row tf-hl"') == c.end_line - c.start_line + 1
    assert f'data-lines="{c.start_line}-{c.end_line}"' in page
    assert "<script" not in page


def test_plot_is_drawn_for_metric_series_only(rules):
    d = rules.diagnose_file(TRAINER_LOG)
    png = metrics_png(d.metrics)
    assert png and png.startswith(PNG)
    assert metrics_png(rules.diagnose(OOM).metrics) is None


def test_uploads_are_checked_and_always_deleted(tmp_path):
    def upload(name: str, data: bytes) -> Path:
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        path = folder / name
        path.write_bytes(data)
        return path

    big = upload("big.log", b"x" * 2048)
    with pytest.raises(InputError, match="over the upload limit"), prepared(big, "big.log", 1024):
        pass
    assert not big.exists() and not big.parent.exists()
    blob = upload("blob.log", bytes(range(256)) * 8)
    with pytest.raises(InputError, match="binary"), prepared(blob, "blob.log", 1 << 20):
        pass
    exe = upload("model.bin", b"abc")
    with pytest.raises(InputError, match="not a log file"), prepared(exe, "model.bin", 1 << 20):
        pass
    gz = upload("train.log.gz", gzip.compress(TRAINER_LOG.read_bytes()))
    with prepared(gz, "train.log.gz", 1 << 20) as up:
        assert up.path.read_bytes() == TRAINER_LOG.read_bytes()
        copy = up.path
    assert not gz.exists() and not copy.exists()
    bomb = upload("bomb.log.gz", gzip.compress(b"a" * (5 << 20)))
    with pytest.raises(InputError, match="expands to more than"), prepared(bomb, "bomb.log.gz", 1 << 20):
        pass


def test_conversation_narrows_resets_and_switches_language(rules):
    conv = Conversation(rules)
    with pytest.raises(InputError, match="empty"):
        conv.send("   \n")
    first = conv.send(OOM)
    fu = first.diagnosis.follow_up[0]
    assert fu.id == "oom-when"
    narrowed = conv.follow_up(fu.id, "mid")  # a button click
    assert narrowed.diagnosis.answers == {"oom-when": "mid"}
    assert narrowed.diagnosis.candidates[0].causes[0].id != first.diagnosis.candidates[0].causes[0].id
    conv.reset()
    conv.send(OOM)
    typed = conv.send("mid")  # a typed reply: Assistant.ask reads it as the answer to the follow-up
    assert typed.diagnosis.answers == {"oom-when": "mid"}
    conv.reset()
    with pytest.raises(InputError, match="no diagnosis to narrow"):
        conv.follow_up("oom-when", "start")
    zh = conv.send(OOM, "zh")
    assert zh.diagnosis.language == "zh" and "证据" in zh.markdown


def test_feedback_is_stored_redacted_in_wal_mode_and_exported_as_cases(tmp_path, rules):
    store = FeedbackStore(tmp_path)
    secret = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7"
    text = OOM + f"\nHF_TOKEN={secret}"
    d = rules.diagnose(text)
    up = store.record(d, text)
    store.rate(up, 1)
    down = store.record(d, text)
    store.rate(down, -1)
    store.correct(down, OUT_OF_SCOPE, f"my token {secret} was wrong")
    unsure = store.record(d, text)
    store.rate(unsure, -1)
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        dump = "\n".join(str(r) for r in db.execute("SELECT * FROM feedback"))
    assert secret not in dump and "[REDACTED:" in dump
    cases, skipped = export_cases(store)
    assert skipped == 1
    assert [c["labels"] for c in cases] == [["cuda-oom"], []]
    assert [c["kind"] for c in cases] == ["error", "out-of-scope"]
    for case in cases:
        assert set(case) == {"id", "text", "labels", "kind", "lang", "source", "note", "fix"}
        assert secret not in json.dumps(case)


def test_feedback_export_command(tmp_path, monkeypatch, rules):
    monkeypatch.setenv("TRAINFIX_DATA_DIR", str(tmp_path))
    store = FeedbackStore(tmp_path)
    store.rate(store.record(rules.diagnose(OOM), OOM), 1)
    out = tmp_path / "cases.jsonl"
    run = subprocess.run([sys.executable, "-m", "app.cli", "feedback", "export", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "1 case(s) exported" in run.stderr
    assert json.loads(out.read_text().splitlines()[0])["labels"] == ["cuda-oom"]


def test_web_refuses_to_bind_beyond_loopback_without_a_login(monkeypatch):
    from app.web import auth_for

    assert auth_for(Settings(), "127.0.0.1") is None
    with pytest.raises(Exception, match="TRAINFIX_WEB_USER"):
        auth_for(Settings(), "0.0.0.0")
    monkeypatch.setenv("TRAINFIX_WEB_USER", "team")
    monkeypatch.setenv("TRAINFIX_WEB_PASSWORD", "s3cret")
    settings = Settings()
    assert "s3cret" not in repr(settings)  # a SecretStr
    assert auth_for(settings, "0.0.0.0") == ("team", "s3cret")


def test_cli_help_does_not_import_gradio():
    code = ("import sys; from app import cli; "
            "print([m for m in ('gradio', 'matplotlib', 'torch', 'chromadb') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_triage_progress_reports_how_far_the_file_was_read(tmp_path):
    import threading

    from app.web_upload import Progress, run_with_progress

    log = tmp_path / "train.log"
    log.write_bytes(b"x" * 10_000)
    halfway, release = threading.Event(), threading.Event()

    def triage() -> str:
        with log.open("rb", buffering=0) as fh:  # unbuffered: the file position is exactly what was read
            fh.read(4_000)
            halfway.set()
            release.wait(300)  # held until the test has seen the progress: no timing involved
            return f"read {len(fh.read()) + 4_000}"

    steps = run_with_progress(triage, log, 10_000)
    assert isinstance(next(steps), Progress)  # the triage thread has started and is still running
    assert halfway.wait(300)
    later = next(steps)
    assert isinstance(later, Progress) and later.total == 10_000 and later.read == 4_000
    release.set()
    assert [s for s in steps if not isinstance(s, Progress)] == ["read 10000"]


def test_the_diagnose_api_refuses_text_over_the_upload_limit_and_keeps_serving(tmp_path, rules):
    import gradio as gr

    from app.web import WebApp

    web = WebApp(Settings(data_dir=tmp_path, web_max_upload_mb=0.01), assistant=rules)  # 10,485 characters
    with pytest.raises(gr.Error, match=r"at most 10,485 .*trainfix diagnose FILE"):
        web.api_diagnose(OOM + "\n" + "step 1 loss 2.0\n" * 1000)
    out = web.api_diagnose(OOM)
    assert out["diagnosis"]["candidates"][0]["failure_mode"] == "cuda-oom" and "CUDA" in out["markdown"]
