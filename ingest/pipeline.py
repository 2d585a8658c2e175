"""Ingest: read ``kb/sources/``, assemble records and passages, write ``kb/records/`` deterministically.

:func:`run_ingest` returns an :class:`IngestReport` (what was read, skipped, added, changed, removed);
front-ends only render it. A bad source file is skipped with a reason and never stops the others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import re2
from pydantic import BaseModel, ConfigDict, Field

from assistant import snapshot
from assistant.config import Settings
from assistant.errors import InputError
from ingest.assemble import assemble
from ingest.guide import Guide, parse_guide
from ingest.markdown import Runbook, parse_runbook
from ingest.overlay import load_overlay
from ingest.sources import list_sources, read_text, source_kind
from ingest.translations import LANGS, Translations, translations_path
from kb.store import MODES_DIR, PASSAGES_DIR, dump

MANIFEST = "manifest.json"
OVERLAY_FILE = "overlay.yaml"
Status = Literal["added", "changed", "removed", "unchanged"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceResult(_Model):
    """One source file that was ingested and what it contributed."""

    file: str
    kind: Literal["guide", "runbook"]
    title: str = Field(default="", description="the document's own title (its first heading or title line)")
    sha256: str
    lines: int
    records: list[str]
    passages: list[str]
    statuses: dict[str, Status] = Field(default={}, description="output file -> what this run did to it")

    def counts(self) -> dict[str, int]:
        """Number of this source's output files per status."""
        out = {s: 0 for s in ("added", "changed", "removed", "unchanged")}
        for status in self.statuses.values():
            out[status] += 1
        return out


class SkippedSource(_Model):
    """A source file that could not be used, and why."""

    file: str
    reason: str


class OutputChange(_Model):
    """What ingest did (or, with ``check``, would do) to one output file."""

    path: str
    kind: Literal["record", "passage", "manifest"]
    status: Status


class IngestReport(_Model):
    """Everything an ingest run did; ``written`` is False for ``--check`` runs."""

    sources_dir: str
    out_dir: str
    check: bool
    written: bool
    sources: list[SourceResult]
    skipped: list[SkippedSource]
    changes: list[OutputChange]
    warnings: list[str]

    def counts(self, kind: str | None = None) -> dict[str, int]:
        """Number of output files per status, optionally for one kind ('record' / 'passage')."""
        out = {s: 0 for s in ("added", "changed", "removed", "unchanged")}
        for change in self.changes:
            if kind is None or change.kind == kind:
                out[change.status] += 1
        return out

    @property
    def up_to_date(self) -> bool:
        """True if the output directory already matched a fresh ingest."""
        return all(c.status == "unchanged" for c in self.changes)


_DATE_LINE = re2.compile(r"^\s*(?:\d{4}\s*年\s*\d{1,2}\s*月\s*\d{1,2}\s*日|\d{4}-\d{2}-\d{2})\s*$")


def document_title(text: str) -> str:
    """A source's title as a person knows it: its first Markdown heading, else its first line that is not a date."""
    for line in text.splitlines()[:40]:
        stripped = line.strip()
        if not stripped or _DATE_LINE.match(stripped):
            continue
        return stripped.lstrip("#").strip()[:120]
    return ""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(sources: list[SourceResult], skipped: list[SkippedSource], overlay_bytes: bytes,
              translation_files: dict[str, bytes], records: int, passages: int, warnings: list[str]) -> str:
    data = {
        "sources": [s.model_dump(exclude={"statuses"}) for s in sources],
        "skipped": [s.model_dump() for s in skipped],
        "overlay": {"file": OVERLAY_FILE, "sha256": _sha256(overlay_bytes)},
        "translations": [{"file": name, "sha256": _sha256(b)} for name, b in sorted(translation_files.items())],
        "counts": {"records": records, "passages": passages},
        "warnings": warnings,
    }
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def _existing_outputs(out_dir: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for sub in (MODES_DIR, PASSAGES_DIR):
        directory = out_dir / sub
        if directory.is_dir():
            for path in sorted(directory.glob("*.json")):
                found[f"{sub}/{path.name}"] = path.read_text(encoding="utf-8")
    manifest = out_dir / MANIFEST
    if manifest.is_file():
        found[MANIFEST] = manifest.read_text(encoding="utf-8")
    return found


def _kind_of(path: str) -> Literal["record", "passage", "manifest"]:
    if path.startswith(MODES_DIR + "/"):
        return "record"
    if path.startswith(PASSAGES_DIR + "/"):
        return "passage"
    return "manifest"


Outputs = tuple[dict[str, str], list[SourceResult], list[SkippedSource], list[str]]


def _input_files(settings: Settings, sources_dir: Path) -> list[Path]:
    """Every file a fresh ingest of ``sources_dir`` can read, and the ingest code itself."""
    translations = settings.kb_dir / "translations"
    return [*sorted(Path(__file__).resolve().parent.glob("*.py")), settings.kb_dir / OVERLAY_FILE,
            *(sorted(p for p in translations.iterdir() if p.is_file()) if translations.is_dir() else []),
            *list_sources(sources_dir)]


def build_outputs(settings: Settings, sources_dir: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> Outputs:
    """Fresh ingest in memory: output path (relative to the records dir) -> file text, plus what was read.

    A pure function of the files it reads and of the code, so its result is kept as a snapshot named by their
    sha256 (:mod:`assistant.snapshot`): an ingest with no source, translation, overlay or code changed only
    hashes them, and any change parses everything again."""
    sources_dir = Path(sources_dir or settings.sources_dir)
    try:
        files = _input_files(settings, sources_dir)
    except (InputError, OSError):
        return _build_outputs(settings, sources_dir, progress)  # raises or reports it, as uncached
    return snapshot.cached("ingest", files, lambda: _build_outputs(settings, sources_dir, progress))


def _build_outputs(settings: Settings, sources_dir: Path, progress: Callable[[str], None] | None) -> Outputs:
    note = progress or (lambda _msg: None)
    overlay_path = settings.kb_dir / OVERLAY_FILE
    overlay = load_overlay(overlay_path)
    guides: dict[str, Guide] = {}
    translations: dict[str, Translations] = {}
    runbook_translations: dict[str, dict[str, Translations]] = {}
    translation_bytes: dict[str, bytes] = {}
    runbooks: list[Runbook] = []
    skipped: list[SkippedSource] = []
    read: dict[str, tuple[str, bytes, int]] = {}
    warnings: list[str] = []
    for path in list_sources(sources_dir):
        note(f"reading {path.name}")
        try:
            kind = source_kind(path)
            text, data = read_text(path)
            if kind == "guide":
                if path.name not in overlay.guides:
                    raise InputError(f"{path.name}: plain-text guide with no mapping in kb/overlay.yaml; "
                                     "add one or write it as a .md runbook")
                guide = parse_guide(path.name, text)
                if not guide.sections:
                    raise InputError(f"{path.name}: no numbered sections ('1. Heading') found")
                tpath = translations_path(settings.kb_dir, path.name)
                translations[path.name] = Translations.load(tpath)
                if tpath.is_file():
                    translation_bytes[tpath.name] = tpath.read_bytes()
                stale = translations[path.name].stale(guide)
                if stale:
                    warnings.append(f"{tpath.name}: {len(stale)} key(s) not in the guide: {stale[:3]}")
                guides[path.name] = guide
            else:
                runbook = parse_runbook(path.name, text)
                runbook_translations[path.name] = {}
                for lang in LANGS:  # a runbook may have a translation file into either language, or none
                    tpath = translations_path(settings.kb_dir, path.name, lang)
                    if not tpath.is_file():
                        continue
                    tr = runbook_translations[path.name][lang] = Translations.load(tpath)
                    translation_bytes[tpath.name] = tpath.read_bytes()
                    stale = tr.stale(runbook)
                    if stale:
                        warnings.append(f"{tpath.name}: {len(stale)} key(s) not in the runbook: {stale[:3]}")
                runbooks.append(runbook)
            read[path.name] = (kind, data, len(text.splitlines()), document_title(text))
        except InputError as err:
            skipped.append(SkippedSource(file=path.name, reason=str(err)))
        except OSError as err:
            skipped.append(SkippedSource(file=path.name, reason=f"{path.name}: cannot read ({err.strerror})"))
    note("assembling records")
    result = assemble(guides, translations, runbooks, overlay, runbook_translations)
    warnings.extend(result.warnings)
    for name, reason in result.skipped:
        skipped.append(SkippedSource(file=name, reason=reason))
        read.pop(name, None)
    skipped.sort(key=lambda s: s.file)
    sources = []
    for name, (kind, data, n, title) in sorted(read.items()):
        rec_ids, pas_ids = result.by_source.get(name, ([], []))
        sources.append(SourceResult(
            file=name, kind=kind, title=title, sha256=_sha256(data), lines=n,  # type: ignore[arg-type]
            records=[r for r in rec_ids if r in result.records], passages=[p for p in pas_ids if p in result.passages],
        ))
    outputs = {f"{MODES_DIR}/{rid}.json": dump(rec) for rid, rec in sorted(result.records.items())}
    outputs.update({f"{PASSAGES_DIR}/{pid}.json": dump(p) for pid, p in sorted(result.passages.items())})
    outputs[MANIFEST] = _manifest(sources, skipped, overlay_path.read_bytes(), translation_bytes,
                                  len(result.records), len(result.passages), warnings)
    return outputs, sources, skipped, warnings


def run_ingest(settings: Settings, sources_dir: Path | None = None, out_dir: Path | None = None, check: bool = False,
               progress: Callable[[str], None] | None = None) -> IngestReport:
    """Ingest ``sources_dir`` (default ``kb/sources``) into ``out_dir`` (default ``kb/records``).

    With ``check`` nothing is written; the report says what would change (``up_to_date`` False if anything).
    Raises :class:`~assistant.errors.KnowledgeBaseError` if the overlay does not fit the guide.
    """
    out = Path(out_dir or settings.records_dir)
    src = Path(sources_dir or settings.sources_dir)
    outputs, sources, skipped, warnings = build_outputs(settings, src, progress)
    existing = _existing_outputs(out)
    changes: list[OutputChange] = []
    for path in sorted(set(outputs) | set(existing)):
        if path not in existing:
            status: Status = "added"
        elif path not in outputs:
            status = "removed"
        else:
            status = "unchanged" if existing[path] == outputs[path] else "changed"
        changes.append(OutputChange(path=path, kind=_kind_of(path), status=status))
    by_path = {c.path: c.status for c in changes}
    sources = [
        s.model_copy(update={"statuses": {
            path: by_path[path]
            for path in [f"{MODES_DIR}/{r}.json" for r in s.records] + [f"{PASSAGES_DIR}/{p}.json" for p in s.passages]
        }})
        for s in sources
    ]
    if not check:
        if progress:
            progress(f"writing {out}")
        for change in changes:
            target = out / change.path
            if change.status in ("added", "changed"):
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(".json.tmp")
                tmp.write_text(outputs[change.path], encoding="utf-8")
                tmp.replace(target)
            elif change.status == "removed":
                target.unlink()
    return IngestReport(sources_dir=str(src), out_dir=str(out), check=check, written=not check, sources=sources,
                        skipped=skipped, changes=changes, warnings=warnings)
