"""Read and write the ingested knowledge base (``kb/records/``): one JSON file per record or passage.

Layout: ``records/modes/<failure-mode>.json`` and ``records/passages/<id>.json``. Files are written
deterministically (sorted keys, 2-space indent, UTF-8, trailing newline) so reviews see clean diffs.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from assistant.errors import KnowledgeBaseError
from kb.schema import Passage, Record

MODES_DIR = "modes"
PASSAGES_DIR = "passages"


def dump(model: Record | Passage) -> str:
    """Deterministic JSON text for a record or passage."""
    data = model.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _load_dir(directory: Path, cls: type[Record] | type[Passage]) -> list:
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.json")):
        try:
            out.append(cls.model_validate_json(path.read_text(encoding="utf-8")))
        except (ValidationError, ValueError, OSError) as err:
            raise KnowledgeBaseError(f"{path}: not a valid {cls.__name__.lower()} ({err}); run `trainfix ingest`") from err
    return out


def load_records(records_dir: Path) -> list[Record]:
    """All failure-mode records, in file-name order. Raises :class:`KnowledgeBaseError` if none exist."""
    records = _load_dir(Path(records_dir) / MODES_DIR, Record)
    if not records:
        raise KnowledgeBaseError(f"no records in {records_dir}/{MODES_DIR}; run `trainfix ingest` first")
    return records


def load_passages(records_dir: Path) -> list[Passage]:
    """All cited passages, in file-name order."""
    return _load_dir(Path(records_dir) / PASSAGES_DIR, Passage)
