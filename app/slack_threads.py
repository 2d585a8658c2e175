"""What the Slack bot remembers between messages, in ``<data_dir>/slack.sqlite3``: per thread, the
conversation a follow-up narrows; per posted answer, what a 👍/👎 click stores as feedback.

Everything here is redacted before it is written (the input reaches the Assistant redacted already)
and kept for ``KEEP_SECONDS`` only: a follow-up on an older thread starts over.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from app.feedback import MAX_INPUT_CHARS
from app.slack_events import DB_NAME, connect
from assistant.api import Exchange
from assistant.diagnosis import Diagnosis
from assistant.redact import redact

KEEP_SECONDS = 24 * 3600
MAX_STORED_INPUT = 8 * 1024 * 1024  # as the web chat: a larger log is not kept for narrowing

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS threads (
        channel TEXT NOT NULL, thread_ts TEXT NOT NULL, updated REAL NOT NULL,
        history TEXT NOT NULL,          -- JSON list of Exchange: the origin paste and the last turn, redacted
        PRIMARY KEY (channel, thread_ts))""",
    """CREATE TABLE IF NOT EXISTS answers (
        id TEXT PRIMARY KEY, created REAL NOT NULL,
        diagnosis TEXT NOT NULL, input TEXT NOT NULL, input_kind TEXT NOT NULL,
        feedback_id TEXT)""",
)


@dataclass
class StoredAnswer:
    """A posted answer, for feedback."""

    id: str
    diagnosis: Diagnosis
    input: str
    input_kind: str
    feedback_id: str | None


def _origin_index(history: list[Exchange]) -> int | None:
    for i in range(len(history) - 1, -1, -1):
        ex = history[i]
        if not ex.diagnosis.answers and ex.diagnosis.kind == "diagnosis":
            return i
    return None


class ThreadStore:
    """Thread conversations and posted answers; one short connection per call (thread-safe)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with connect(self.path) as db:
            db.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                db.execute(statement)

    def history(self, channel: str, thread_ts: str) -> list[Exchange]:
        """The thread's conversation (origin paste and last turn), or [] when there is none (or it expired)."""
        with connect(self.path) as db:
            row = db.execute("SELECT history, updated FROM threads WHERE channel = ? AND thread_ts = ?",
                             (channel, thread_ts)).fetchone()
        if row is None or row["updated"] < time.time() - KEEP_SECONDS:
            return []
        return [Exchange.model_validate(x) for x in json.loads(row["history"])]

    def known(self, channel: str, thread_ts: str) -> bool:
        """True when the bot answered in this thread (within KEEP_SECONDS)."""
        with connect(self.path) as db:
            row = db.execute("SELECT updated FROM threads WHERE channel = ? AND thread_ts = ?",
                             (channel, thread_ts)).fetchone()
        return row is not None and row["updated"] >= time.time() - KEEP_SECONDS

    def append(self, channel: str, thread_ts: str, message: str, diagnosis: Diagnosis, *,
               narrowable: bool = True) -> None:
        """Add a turn; only the paste that later answers refer to and the last turn are kept."""
        turn = Exchange(message=redact(message).text, diagnosis=diagnosis)
        history = [*self.history(channel, thread_ts), turn] if narrowable else []
        if len(message) > MAX_STORED_INPUT:
            history = []  # too large to keep: a reply in this thread starts over
        origin = _origin_index(history)
        kept = [history[origin]] if origin is not None and origin != len(history) - 1 else []
        kept += history[-1:]
        now = time.time()
        with connect(self.path) as db:
            db.execute("INSERT OR REPLACE INTO threads (channel, thread_ts, updated, history) VALUES (?, ?, ?, ?)",
                       (channel, thread_ts, now, json.dumps([x.model_dump(mode="json") for x in kept])))
            db.execute("DELETE FROM threads WHERE updated < ?", (now - KEEP_SECONDS,))

    def save_answer(self, diagnosis: Diagnosis, input_text: str, input_kind: str) -> str:
        """Remember a posted answer (the input's tail, redacted, as feedback keeps it) until someone rates it; returns its id."""
        answer_id = uuid.uuid4().hex
        now = time.time()
        with connect(self.path) as db:
            db.execute("INSERT INTO answers (id, created, diagnosis, input, input_kind) VALUES (?, ?, ?, ?, ?)",
                       (answer_id, now, diagnosis.model_dump_json(), redact(input_text[-MAX_INPUT_CHARS:]).text, input_kind))
            db.execute("DELETE FROM answers WHERE created < ?", (now - KEEP_SECONDS,))
        return answer_id

    def answer(self, answer_id: str) -> StoredAnswer | None:
        """A posted answer by id, or None (unknown or expired)."""
        with connect(self.path) as db:
            row = db.execute("SELECT * FROM answers WHERE id = ?", (answer_id,)).fetchone()
        if row is None or row["created"] < time.time() - KEEP_SECONDS:
            return None
        return StoredAnswer(id=row["id"], diagnosis=Diagnosis.model_validate_json(row["diagnosis"]), input=row["input"],
                            input_kind=row["input_kind"], feedback_id=row["feedback_id"])

    def set_feedback_id(self, answer_id: str, feedback_id: str) -> None:
        """Link an answer to its row in the feedback store (a second click re-rates the same row)."""
        with connect(self.path) as db:
            db.execute("UPDATE answers SET feedback_id = ? WHERE id = ?", (feedback_id, answer_id))
