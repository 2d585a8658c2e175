"""Durable de-duplication of Slack events: Slack retries an event it thinks was not acknowledged in time
(``X-Slack-Retry-Num``), and Bolt verifies signatures but does not drop those retries.

An event id is claimed once in ``<data_dir>/slack.sqlite3`` (SQLite, WAL) before any work starts, so a
retry — concurrent with the first delivery, or after a restart of the bot — gets no second reply. The
price is at-most-once: a reply lost to a crash after the claim is not retried.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

DB_NAME = "slack.sqlite3"
KEEP_SECONDS = 7 * 24 * 3600  # Slack retries within minutes; a week of ids is plenty and stays small

_SCHEMA = "CREATE TABLE IF NOT EXISTS seen_events (event_id TEXT PRIMARY KEY, seen REAL NOT NULL)"


def connect(path: Path) -> sqlite3.Connection:
    """A short-lived connection to the bot's SQLite file (WAL, waits for a busy writer)."""
    db = sqlite3.connect(path, timeout=30)
    db.row_factory = sqlite3.Row
    return db


class EventLog:
    """Event ids already handled, in ``<data_dir>/slack.sqlite3``; one short connection per call (thread-safe)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with connect(self.path) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)

    def claim(self, event_id: str) -> bool:
        """True the first time ``event_id`` is seen (the caller handles it), False for every retry."""
        now = time.time()
        with connect(self.path) as db:
            claimed = db.execute("INSERT OR IGNORE INTO seen_events (event_id, seen) VALUES (?, ?)",
                                 (event_id, now)).rowcount == 1
            if claimed:
                db.execute("DELETE FROM seen_events WHERE seen < ?", (now - KEEP_SECONDS,))
        return claimed
