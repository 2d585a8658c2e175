"""Answer feedback from the web chat: a SQLite store (WAL) under the data dir, and its export as labelled cases.

Everything stored is redacted first (``assistant.redact``): the input, the user's note on the real
cause. The export writes the labelled-case format of ``tests/data/README.md`` (see also
``LABELS.md``) so that reviewed, confirmed answers can become case records.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from assistant.diagnosis import Diagnosis
from assistant.errors import TrainfixError
from assistant.normalise import text_language
from assistant.redact import redact

DB_NAME = "feedback.sqlite3"
MAX_INPUT_CHARS = 64 * 1024  # a long log keeps its last lines (a contiguous run, where failures show)
MAX_NOTE_CHARS = 2000
OUT_OF_SCOPE = "not-a-training-failure"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id          TEXT PRIMARY KEY,
    created     TEXT NOT NULL,
    updated     TEXT NOT NULL,
    rating      INTEGER,            -- 1 thumbs up, -1 thumbs down, NULL not rated
    real_mode   TEXT,               -- failure-mode id the user says it was ('not-a-training-failure' = out of scope)
    real_cause  TEXT,               -- free text, redacted
    input       TEXT NOT NULL,      -- redacted, at most MAX_INPUT_CHARS
    input_kind  TEXT NOT NULL,      -- 'paste' or 'file'
    answer_kind TEXT NOT NULL,      -- Diagnosis.kind
    lang        TEXT NOT NULL,
    predicted   TEXT NOT NULL,      -- JSON list of candidate failure modes, best first
    confidence  REAL,
    abstained   INTEGER NOT NULL,
    out_of_domain TEXT
)
"""


class FeedbackRow(BaseModel):
    """One rated (or corrected) answer, as stored."""

    model_config = ConfigDict(extra="forbid")
    id: str
    created: str
    updated: str
    rating: int | None
    real_mode: str | None
    real_cause: str | None
    input: str
    input_kind: str
    answer_kind: str
    lang: str
    predicted: list[str]
    confidence: float | None
    abstained: bool
    out_of_domain: str | None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _clip(text: str) -> str:
    """The redacted text, or its last lines when it is longer than MAX_INPUT_CHARS."""
    text = redact(text).text
    if len(text) <= MAX_INPUT_CHARS:
        return text
    tail = text[-MAX_INPUT_CHARS:]
    return tail.split("\n", 1)[1] if "\n" in tail else tail


class FeedbackError(TrainfixError):
    """The feedback store cannot be written (locked, read-only, disk full): the answer stands, the rating is not kept."""


def _explain(path: Path, err: sqlite3.Error) -> str:
    text = str(err).lower()
    if "locked" in text or "busy" in text:
        why = "is locked by another process"
    elif "readonly" in text or "read-only" in text:
        why = "is read-only"
    elif "full" in text:
        why = "cannot grow: the disk is full"
    elif "unable to open" in text:
        why = "cannot be opened (is the data directory writable?)"
    else:
        why = f"failed ({type(err).__name__}: {str(err)[:120]})"
    return f"Feedback was not saved: the feedback store {path} {why}. The answer itself is unaffected."


class FeedbackStore:
    """Feedback rows in ``<data_dir>/feedback.sqlite3``; one short connection per call (thread-safe).

    WAL journal, a busy timeout and a few retries with backoff: concurrent writers (web chat, Slack bot,
    export) never lose a row. A store that cannot be written (locked beyond the retries, read-only, disk
    full) raises :class:`FeedbackError`, a one-line message for the front-end; a service starts anyway.
    """

    RETRIES = 6

    def __init__(self, data_dir: Path, *, timeout: float = 10.0) -> None:
        self.path = Path(data_dir) / DB_NAME
        self.timeout = timeout
        self._ready = False
        with contextlib.suppress(FeedbackError, OSError):
            self._init()  # a store that cannot be opened now is retried on the first write (and reported there)

    def _init(self) -> None:
        if self._ready:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._run(lambda db: (db.execute("PRAGMA journal_mode=WAL"),  # readers (export) never block writes
                              db.execute(_SCHEMA)), init=True)
        self._ready = True

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout)
        db.row_factory = sqlite3.Row
        return db

    def _run(self, work, *, init: bool = False):
        """``work(connection)`` in one transaction; retried with backoff while the database is locked."""
        if not init:
            try:
                self._init()
            except OSError as err:
                raise FeedbackError(f"Feedback was not saved: {err}. The answer itself is unaffected.") from err
        delay = 0.05
        for attempt in range(self.RETRIES):
            try:
                with contextlib.closing(self._connect()) as db, db:
                    return work(db)
            except sqlite3.OperationalError as err:
                transient = "locked" in str(err) or "busy" in str(err)
                if transient and attempt < self.RETRIES - 1:
                    time.sleep(delay)
                    delay *= 2
                    continue
                raise FeedbackError(_explain(self.path, err)) from err
            except sqlite3.DatabaseError as err:
                raise FeedbackError(_explain(self.path, err)) from err
        raise AssertionError("unreachable")

    def record(self, diagnosis: Diagnosis, input_text: str, *, input_kind: str = "paste") -> str:
        """Store an answer (not yet rated) with its redacted input; returns the row id."""
        row_id = uuid.uuid4().hex
        top = diagnosis.top
        clipped = _clip(input_text)
        self._run(lambda db: db.execute(
                "INSERT INTO feedback (id, created, updated, rating, real_mode, real_cause, input, input_kind, "
                "answer_kind, lang, predicted, confidence, abstained, out_of_domain) "
                "VALUES (?, ?, ?, NULL, NULL, NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row_id, _now(), _now(), clipped, input_kind, diagnosis.kind,
                 text_language(input_text[:4000]), json.dumps([c.failure_mode for c in diagnosis.candidates]),
                 top.confidence if top else None, int(diagnosis.abstained), diagnosis.out_of_domain),
            ))
        return row_id

    def rate(self, row_id: str, rating: int | None) -> None:
        """Thumbs up (1), down (-1) or withdrawn (None)."""
        self._run(lambda db: db.execute("UPDATE feedback SET rating = ?, updated = ? WHERE id = ?",
                                        (rating, _now(), row_id)))

    def correct(self, row_id: str, real_mode: str | None, real_cause: str | None) -> None:
        """What the real cause was (a failure-mode id and/or words); the words are redacted."""
        note = redact(real_cause.strip()[:MAX_NOTE_CHARS]).text if real_cause and real_cause.strip() else None
        self._run(lambda db: db.execute("UPDATE feedback SET real_mode = ?, real_cause = ?, updated = ? WHERE id = ?",
                                        (real_mode or None, note, _now(), row_id)))

    def get(self, row_id: str) -> FeedbackRow | None:
        """One row, or None."""
        row = self._run(lambda db: db.execute("SELECT * FROM feedback WHERE id = ?", (row_id,)).fetchone())
        return _row(row) if row else None

    def rows(self) -> Iterator[FeedbackRow]:
        """Every row, oldest first."""
        rows = self._run(lambda db: db.execute("SELECT * FROM feedback ORDER BY rowid").fetchall())
        for row in rows:
            yield _row(row)


def _row(row: sqlite3.Row) -> FeedbackRow:
    data = dict(row)
    data["predicted"] = json.loads(data["predicted"])
    data["abstained"] = bool(data["abstained"])
    return FeedbackRow(**data)


def as_case(row: FeedbackRow) -> dict | None:
    """The row as a labelled case (``id, text, labels, kind, lang, source, note, fix``), or None when
    the feedback does not settle a label (a thumbs-down without the real cause, no rating at all)."""
    if row.real_mode:
        labels = [] if row.real_mode == OUT_OF_SCOPE else [row.real_mode]
        how = "corrected by the user"
    elif row.rating == 1:
        labels = row.predicted[:1]  # a confirmed decline stays [] (out of scope)
        how = "confirmed by the user (thumbs up)"
    else:
        return None
    if not labels:
        kind = "out-of-scope"
    elif row.answer_kind == "answer":
        kind = "question"
    else:
        kind = "log" if row.input_kind == "file" or row.input.count("\n") >= 20 else "error"
    said = f"; predicted {', '.join(row.predicted[:3]) or 'nothing (declined)'}"
    note = f"web feedback, {how}{said}" + (f"; real cause: {row.real_cause}" if row.real_cause else "")
    return {"id": f"feedback-{row.id[:12]}", "text": row.input, "labels": labels, "kind": kind, "lang": row.lang,
            "source": f"trainfix-web-feedback:{row.id}", "note": note, "fix": ""}


def export_cases(store: FeedbackStore) -> tuple[list[dict], int]:
    """``(cases, skipped)``: the rows that settle a label, as labelled cases; how many did not."""
    cases: list[dict] = []
    skipped = 0
    for row in store.rows():
        case = as_case(row)
        if case is None:
            skipped += 1
        else:
            cases.append(case)
    return cases, skipped
