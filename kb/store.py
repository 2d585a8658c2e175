"""Read and write the ingested knowledge base (``kb/records/``): one JSON file per record or passage.

Layout: ``records/modes/<failure-mode>.json`` and ``records/passages/<id>.json``. Files are written
deterministically (sorted keys, 2-space indent, UTF-8, trailing newline) so reviews see clean diffs.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from kb.errors import KnowledgeBaseError
from kb.schema import Passage, Record

MODES_DIR = "modes"
PASSAGES_DIR = "passages"


def dump(model: Record | Passage) -> str:
    """Deterministic JSON text for a record or passage."""
    data = model.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _load_dir(directory: Path, cls: type[Record] | type[Passage], skipped: list[str] | None = None) -> list:
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.json")):
        try:
            out.append(cls.model_validate_json(path.read_text(encoding="utf-8")))
        except (ValidationError, ValueError, OSError) as err:
            message = f"{path}: not a valid {cls.__name__.lower()} ({_short(err)}); run `trainfix ingest`"
            if skipped is None:
                raise KnowledgeBaseError(message) from err
            skipped.append(message)  # a serving process leaves the file out and says so in every answer
    return out


def _short(err: Exception) -> str:
    if isinstance(err, ValidationError) and err.errors():
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
        return f"{where}: {first.get('msg', '')}" + (f" and {err.error_count() - 1} more" if err.error_count() > 1 else "")
    return f"{type(err).__name__}: {str(err)[:200]}"


def load_records(records_dir: Path, skipped: list[str] | None = None) -> list[Record]:
    """All failure-mode records, in file-name order. Raises :class:`KnowledgeBaseError` if none exist, or on an
    invalid file — unless ``skipped`` is given: then an invalid file is left out and described there."""
    records = _load_dir(Path(records_dir) / MODES_DIR, Record, skipped)
    if not records:
        raise KnowledgeBaseError(f"no records in {records_dir}/{MODES_DIR}; run `trainfix ingest` first")
    return records


def load_passages(records_dir: Path, skipped: list[str] | None = None) -> list[Passage]:
    """All cited passages, in file-name order (``skipped``: as for :func:`load_records`)."""
    return _load_dir(Path(records_dir) / PASSAGES_DIR, Passage, skipped)
