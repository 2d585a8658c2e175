"""The loaded knowledge base: records by failure mode and passages by id, read once per :class:`Assistant`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kb.schema import Passage, Record
from kb.store import load_passages, load_records

# A passage relevant to more modes than this is an overview, not a related section.
GENERIC = 5


@dataclass(frozen=True)
class Knowledge:
    records: dict[str, Record]
    passages: dict[str, Passage]
    titles: dict[str, str] = field(default_factory=dict)  # source file -> the document's title
    skipped: tuple[str, ...] = ()  # invalid record/passage files left out (lenient load only)

    @classmethod
    def load(cls, records_dir: Path, *, lenient: bool = False) -> Knowledge:
        """Read ``kb/records``; raises :class:`~assistant.errors.KnowledgeBaseError` when it is missing.

        ``lenient`` (a serving process): an invalid file is left out and named in ``skipped`` instead of
        stopping everything; the rule path keeps answering and each answer says what is missing."""
        skipped: list[str] | None = [] if lenient else None
        records = {r.failure_mode: r for r in load_records(records_dir, skipped)}
        passages = {p.id: p for p in load_passages(records_dir, skipped)}
        return cls(records=records, passages=passages, titles=_titles(records_dir / "manifest.json"),
                   skipped=tuple(skipped or ()))

    @classmethod
    def cached(cls, records_dir: Path, *, lenient: bool = False) -> Knowledge:
        """:meth:`load`, from a snapshot keyed by the records' content when one exists."""
        from assistant.snapshot import cached, files_under

        records_dir = Path(records_dir)
        return cached("knowledge-lenient" if lenient else "knowledge", files_under(records_dir, ("**/*.json",)),
                      lambda: cls.load(records_dir, lenient=lenient))

    def passages_for(self, mode: str) -> list[Passage]:
        """Passages specifically relevant to ``mode`` (not overviews that list every mode), in id order."""
        return [p for p in self.passages.values() if mode in p.failure_modes and len(p.failure_modes) <= GENERIC]


def _titles(manifest: Path) -> dict[str, str]:
    """Source titles from the ingest manifest; an old or missing manifest only costs the titles."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        return {s["file"]: s["title"] for s in data.get("sources", []) if s.get("title")}
    except (OSError, ValueError, TypeError, KeyError):
        return {}
