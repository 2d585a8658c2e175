"""The loaded knowledge base: records by failure mode and passages by id, read once per :class:`Assistant`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kb.schema import Passage, Record
from kb.store import load_passages, load_records

# A passage relevant to more modes than this is an overview, not a related section.
GENERIC = 5


@dataclass(frozen=True)
class Knowledge:
    records: dict[str, Record]
    passages: dict[str, Passage]

    @classmethod
    def load(cls, records_dir: Path) -> Knowledge:
        """Read ``kb/records``; raises :class:`~assistant.errors.KnowledgeBaseError` when it is missing."""
        records = {r.failure_mode: r for r in load_records(records_dir)}
        passages = {p.id: p for p in load_passages(records_dir)}
        return cls(records=records, passages=passages)

    def passages_for(self, mode: str) -> list[Passage]:
        """Passages specifically relevant to ``mode`` (not overviews that list every mode), in id order."""
        return [p for p in self.passages.values() if mode in p.failure_modes and len(p.failure_modes) <= GENERIC]
