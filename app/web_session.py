"""One web-chat conversation: pastes, uploads and follow-up answers → rendered answers (no Gradio here).

A reply narrows the previous diagnosis through :meth:`assistant.api.Assistant.ask` with the
conversation's :class:`~assistant.api.Exchange` history; "new incident" clears it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from app.plot import metrics_png
from app.web_render import answer_markdown
from app.web_upload import Progress, Upload, run_with_progress
from assistant.api import Assistant, Exchange
from assistant.diagnosis import Diagnosis
from assistant.errors import InputError
from kb.schema import Citation

LangChoice = Literal["auto", "en", "zh"]
NARROW_BYTES = 8 * 1024 * 1024  # an upload up to this size is kept (in memory) so follow-ups can narrow it
FEEDBACK_TAIL = 64 * 1024  # of a larger upload, only the tail is kept for feedback
MAX_PASTE = 4 * 1024 * 1024


@dataclass
class Answer:
    """One rendered answer and what the page needs to act on it."""

    key: str  # unique in the session: used in citation anchors
    diagnosis: Diagnosis
    markdown: str
    citations: dict[int, Citation]
    plot: bytes | None
    input_text: str  # raw, in memory only; redacted before it is ever stored (feedback)
    input_kind: Literal["paste", "file"]
    narrowable: bool = True
    feedback_id: str | None = None


@dataclass
class Conversation:
    """The history of one browser session."""

    assistant: Assistant
    # The Assistant is shared by every session and builds its index lazily on first use: one call at a time.
    lock: threading.Lock = field(default_factory=threading.Lock)
    history: list[Exchange] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    message_answers: dict[int, str] = field(default_factory=dict)  # chat message index -> answer key (feedback)
    _keys: Iterator[int] = field(default_factory=itertools.count)

    def reset(self) -> None:
        """Start a new incident: later messages are not read as replies to earlier answers."""
        self.history.clear()
        self.message_answers.clear()

    @property
    def last(self) -> Answer | None:
        """The latest answer, if any."""
        return next(reversed(self.answers.values()), None)

    # -- turns --------------------------------------------------------------------------------

    def send(self, message: str, lang: LangChoice = "auto") -> Answer:
        """A paste, a question, or a reply to the last answer's follow-up question."""
        if not message or not message.strip():
            raise InputError("The message is empty: paste a traceback or log lines, drop a log file, or ask a question.")
        if len(message) > MAX_PASTE:
            raise InputError(f"The paste is {len(message):,} characters; paste at most {MAX_PASTE:,} "
                             "or upload the log as a file.")
        with self.lock:
            d = self.assistant.ask(message, self.history)
            forced = None if lang == "auto" else lang
            if forced and d.language != forced:  # ask() answers in the asker's language; the switch overrides it
                origin = _origin(self.history) if d.answers else None
                d = (self.assistant.diagnose(origin, answers=d.answers, lang=forced) if origin is not None
                     else self.assistant.diagnose(message, lang=forced))
        self.history.append(Exchange(message=message, diagnosis=d))
        return self._answer(d, message, "paste")

    def follow_up(self, follow_up_id: str, value: str, lang: LangChoice = "auto") -> Answer:
        """A one-click answer to a follow-up question of the last answer: the same narrowing as a typed reply."""
        origin = _origin(self.history)
        if not self.history or origin is None:
            raise InputError("There is no diagnosis to narrow down: paste the error or log first.")
        last = self.history[-1].diagnosis
        answers = {**last.answers, follow_up_id: value}
        forced = None if lang == "auto" else lang
        with self.lock:
            d = self.assistant.diagnose(origin, answers=answers, lang=forced or last.language)
        self.history.append(Exchange(message=value, diagnosis=d))
        return self._answer(d, value, "paste")

    def upload(self, upload: Upload, lang: LangChoice = "auto") -> Iterator[Progress | Answer]:
        """Triage an uploaded log, streamed; yields :class:`Progress` while it runs, then the :class:`Answer`."""
        forced = None if lang == "auto" else lang

        def run() -> Diagnosis:
            with self.lock:
                return self.assistant.diagnose_file(upload.path, lang=forced)

        d: Diagnosis | None = None
        for item in run_with_progress(run, upload.path, upload.size):
            if isinstance(item, Progress):
                yield item
            else:
                d = item  # type: ignore[assignment]
        assert d is not None
        narrowable = upload.size <= NARROW_BYTES
        text = _read_text(upload.path, None if narrowable else FEEDBACK_TAIL)
        # A small log is kept as the turn's message so that a reply re-diagnoses it; a large one starts over.
        self.history[:] = [Exchange(message=text, diagnosis=d)] if narrowable else []
        yield self._answer(d, text, "file", narrowable=narrowable)

    def _answer(self, d: Diagnosis, text: str, kind: Literal["paste", "file"], *, narrowable: bool = True) -> Answer:
        key = str(next(self._keys))
        md, cites = answer_markdown(d, key)
        plot = None
        try:
            plot = metrics_png(d.metrics)
        except Exception as err:  # noqa: BLE001 - a failed plot must not lose the answer
            md += f"\n\n*(the metric plot could not be drawn: {type(err).__name__})*"
        answer = Answer(key=key, diagnosis=d, markdown=md, citations=cites, plot=plot, input_text=text,
                        input_kind=kind, narrowable=narrowable)
        self.answers[key] = answer
        return answer


def _origin(history: list[Exchange]) -> str | None:
    """The paste a chain of follow-up answers refers to (as :meth:`Assistant.ask` finds it)."""
    for ex in reversed(history):
        if not ex.diagnosis.answers and ex.diagnosis.kind == "diagnosis":
            return ex.message
    return None


def _read_text(path: Path, tail: int | None) -> str:
    with path.open("rb") as fh:
        if tail is not None:
            fh.seek(max(0, path.stat().st_size - tail))
        return fh.read().decode("utf-8", errors="replace")
