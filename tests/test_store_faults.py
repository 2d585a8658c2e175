"""Store faults: the feedback SQLite file locked, read-only or full, and concurrent writers; an invalid file
in kb/records; an index that another process is rebuilding or that cannot be opened. Each is a clear
message, the rule path keeps answering, and no feedback row is lost."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from app.feedback import FeedbackError, FeedbackStore
from assistant import Assistant
from assistant.config import Settings

ROOT = Path(__file__).resolve().parent.parent
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.fixture(scope="module")
def diagnosis():
    return Assistant(retrieval="never").diagnose(OOM)


def _count(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM feedback").fetchone()[0]


def _writer(data_dir: str, n: int, diagnosis_json: str) -> None:
    from assistant.diagnosis import Diagnosis

    store, d = FeedbackStore(Path(data_dir)), Diagnosis.model_validate_json(diagnosis_json)
    for i in range(n):
        store.rate(store.record(d, f"{OOM}\nwriter row {i}"), 1)


def test_concurrent_writers_lose_no_row(tmp_path, diagnosis):
    """4 processes x 2 threads x 25 rows, each recorded then rated, into one WAL database."""
    ctx = multiprocessing.get_context("spawn")
    payload = diagnosis.model_dump_json()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 25, payload)) for _ in range(4)]
    threads = [threading.Thread(target=_writer, args=(str(tmp_path), 25, payload)) for _ in range(2)]
    for w in [*procs, *threads]:
        w.start()
    for t in threads:
        t.join(120)
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    path = tmp_path / "feedback.sqlite3"
    assert _count(path) == 6 * 25
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM feedback WHERE rating = 1").fetchone()[0] == 150
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_locked_store_is_retried_then_reported(tmp_path, diagnosis, monkeypatch):
    store = FeedbackStore(tmp_path, timeout=0.05)
    holder = sqlite3.connect(tmp_path / "feedback.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(FeedbackError, match="is locked by another process.*answer itself is unaffected"):
            store.record(diagnosis, OOM)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # a lock released while the store retries costs nothing: released during the first back-off (no timing)
    import app.feedback as feedback_module

    holder = sqlite3.connect(tmp_path / "feedback.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    sleeps: list[float] = []

    def release(seconds):
        sleeps.append(seconds)
        if holder.in_transaction:
            holder.execute("ROLLBACK")

    monkeypatch.setattr(feedback_module.time, "sleep", release)
    row = store.record(diagnosis, OOM)
    holder.close()
    assert store.get(row) is not None and len(sleeps) == 1


def test_read_only_store_is_a_clear_message(tmp_path, diagnosis, monkeypatch):
    store = FeedbackStore(tmp_path)
    store.record(diagnosis, OOM)
    # As root, file modes do not stop writes; open it the way a read-only filesystem would.
    uri = f"file:{tmp_path / 'feedback.sqlite3'}?mode=ro"
    monkeypatch.setattr(store, "_connect", lambda: sqlite3.connect(uri, uri=True, timeout=0.1))
    with pytest.raises(FeedbackError, match="is read-only"):
        store.record(diagnosis, OOM)


def test_full_disk_is_a_clear_message_and_keeps_earlier_rows(tmp_path, diagnosis, monkeypatch):
    store = FeedbackStore(tmp_path)
    first = store.record(diagnosis, OOM)
    real = store._connect

    def full():
        db = real()
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL, as on a full disk
        return db

    monkeypatch.setattr(store, "_connect", full)
    with pytest.raises(FeedbackError, match="disk is full"):
        store.record(diagnosis, OOM + "\n" + "x" * 200_000)
    monkeypatch.setattr(store, "_connect", real)
    assert store.get(first) is not None and _count(tmp_path / "feedback.sqlite3") == 1


def test_unwritable_data_dir_does_not_stop_a_service(tmp_path, diagnosis):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = FeedbackStore(blocker / "data")  # the web chat and the Slack bot start anyway
    with pytest.raises(FeedbackError, match="Feedback was not saved"):
        store.record(diagnosis, OOM)


def test_web_chat_says_feedback_was_not_saved(tmp_path, diagnosis, monkeypatch):
    from app.web import WebApp

    web = WebApp.__new__(WebApp)
    web.store = FeedbackStore(tmp_path)

    def refuse(*_a, **_k):
        raise FeedbackError("Feedback was not saved: the feedback store x is read-only. The answer itself is unaffected.")

    monkeypatch.setattr(web.store, "record", refuse)

    class Answer:
        feedback_id = None
        input_text, input_kind = OOM, "paste"

    Answer.diagnosis = diagnosis

    class Conv:
        last = Answer()

    assert "not saved" in web.correct(Conv(), "cuda-oom", "")


def test_invalid_record_file_is_left_out_and_named(tmp_path):
    kb = tmp_path / "kb"
    shutil.copytree(ROOT / "kb", kb, ignore=shutil.ignore_patterns("sources", "translations"))
    broken = kb / "records" / "modes" / "disk-full.json"
    broken.write_text('{"failure_mode": "disk-full", "title": ', encoding="utf-8")
    assistant = Assistant(Settings(kb_dir=kb, data_dir=tmp_path / "data"), retrieval="never")
    d = assistant.diagnose(OOM)
    assert d.candidates[0].failure_mode == "cuda-oom" and d.candidates[0].fixes
    assert any("disk-full.json" in n and "not a valid record" in n for n in d.notices), d.notices


def test_index_that_cannot_be_opened_leaves_the_rule_path_answering(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data directory should be")
    assistant = Assistant(Settings(data_dir=blocker), retrieval="always")
    d = assistant.diagnose(OOM)
    assert d.candidates[0].failure_mode == "cuda-oom"
    assert any(n.startswith("Retrieval is unavailable") for n in d.notices), d.notices
    # the next message does not re-try at once (a rebuild attempt per message would stall a service)
    again = assistant.diagnose(OOM)
    assert any(n.startswith("Retrieval is unavailable") for n in again.notices)


def test_chroma_server_down_leaves_the_rule_path_answering(tmp_path):
    import socket

    with socket.socket() as s:  # a port that refuses connections: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        assistant = Assistant(Settings(data_dir=tmp_path / "d", chroma_url=url), retrieval="always")
        d = assistant.diagnose(OOM)
    assert d.candidates[0].failure_mode == "cuda-oom"
    assert any("cannot reach the Chroma server" in n for n in d.notices), d.notices
