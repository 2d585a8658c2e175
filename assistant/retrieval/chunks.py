"""Split records and passages into retrieval chunks, one per field (overview, symptom group, cause, ...).

Each chunk's text starts with its record's title and carries both languages; each carries the
citation of the source lines it came from. Chunk ids are stable (``<doc id>#<field>``) so an
incremental index build can compare content hashes per id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from assistant.retrieval.models import Chunk, HitCitation
from kb.schema import Citation, CodeSnippet, Passage, Record, Table, Text

# Long passages are split on blank lines into pieces of about this many characters: the embedding
# model reads at most 256 word pieces, so one huge chunk would be embedded by its first lines only.
PASSAGE_PIECE_CHARS = 900


def _cite(c: Citation) -> HitCitation:
    return HitCitation(
        source=c.source, source_kind=c.source_kind, section=c.section, heading=c.heading,
        start_line=c.start_line, end_line=c.end_line,
    )


def _span(citations: Sequence[Citation]) -> HitCitation:
    """One citation covering several from the same source section (min start .. max end line)."""
    first = citations[0]
    return HitCitation(
        source=first.source, source_kind=first.source_kind, section=first.section, heading=first.heading,
        start_line=min(c.start_line for c in citations), end_line=max(c.end_line for c in citations),
    )


def _both(text: Text | None) -> list[str]:
    """zh then en (once if they are the same, e.g. an error message kept verbatim)."""
    if text is None:
        return []
    return list(dict.fromkeys(t for t in (text.zh, text.en) if t))


def _lang(texts: Iterable[Text | None], extra_zh: bool = False, extra_en: bool = False) -> str:
    zh, en = extra_zh, extra_en
    for t in texts:
        if t is not None:
            zh = zh or bool(t.zh)
            en = en or bool(t.en)
    return "zh+en" if zh and en else ("en" if en else "zh")


def _code(code: CodeSnippet | None) -> list[str]:
    return [code.code] if code is not None else []


def _table_text(table: Table) -> list[str]:
    lines = [" | ".join(table.header)]
    if table.header_en:
        lines.append(" | ".join(table.header_en))
    for row in table.rows:
        lines.append(" | ".join(row.cells.values()))
        if row.en:
            lines.append(" | ".join(row.en.values()))
    return lines


def _group_by_section(items: Sequence, key=lambda item: item.citation) -> list[list]:
    """Items grouped by (source, section), in first-appearance order."""
    groups: dict[tuple[str, str], list] = {}
    for item in items:
        c = key(item)
        groups.setdefault((c.source, c.section), []).append(item)
    return list(groups.values())


def record_chunks(record: Record) -> list[Chunk]:
    """The chunks of one failure-mode record."""
    from kb.taxonomy import mode

    title_lines = _both(record.title)
    try:
        m = mode(record.failure_mode)
        names = [m.zh, m.en]
    except KeyError:
        names = []
    head = " / ".join(dict.fromkeys(title_lines + names))
    base = {"doc_id": record.id, "kind": "record", "failure_mode": record.failure_mode}
    out: list[Chunk] = []

    def add(field: str, body: list[str], lang_texts: list[Text | None], citation: HitCitation, code: bool = False) -> None:
        text = "\n".join([head, *body]).strip()
        out.append(Chunk(id=f"{record.id}#{field}", field=field, text=text, citation=citation,
                         lang=_lang(lang_texts if any(t is not None for t in lang_texts) else [record.title]),
                         **base))

    overview_cite = record.citations[0] if record.citations else None
    if overview_cite is not None:
        add("overview", [*_both(record.summary), *_both(record.keywords), record.failure_mode, record.category],
            [record.title, record.summary, record.keywords], _cite(overview_cite))
    for n, group in enumerate(_group_by_section(record.symptoms), start=1):
        body = [t for s in group for t in _both(s.text)]
        add(f"symptoms:{n}", body, [s.text for s in group], _span([s.citation for s in group]))
    for cause in record.causes:
        body = [*_both(cause.text)]
        if cause.likelihood:
            body.append(f"likelihood: {cause.likelihood}")
        body += _both(cause.detection)
        add(f"cause:{cause.id}", body, [cause.text, cause.detection], _cite(cause.citation))
    for n, group in enumerate(_group_by_section(record.diagnosis), start=1):
        body = [t for step in group for t in [*_both(step.text), *_code(step.code)]]
        add(f"diagnosis:{n}", body, [s.text for s in group], _span([s.citation for s in group]))
    for n, fix in enumerate(record.fixes, start=1):
        add(f"fix:{n}", [*_both(fix.text), *_code(fix.code)], [fix.text], _cite(fix.citation))
    for n, table in enumerate(record.tables, start=1):
        add(f"table:{n}", _table_text(table), [], _cite(table.citation))
    return out


def _pieces(text: str, limit: int = PASSAGE_PIECE_CHARS) -> list[str]:
    """``text`` split on blank lines into pieces of at most ~``limit`` characters (never mid-paragraph)."""
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for p in paragraphs:
        if current and size + len(p) > limit:
            pieces.append("\n\n".join(current))
            current, size = [], 0
        current.append(p)
        size += len(p)
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def passage_chunks(passage: Passage) -> list[Chunk]:
    """The chunks of one passage: its text (zh and en, in pieces when long), each code block, each table."""
    head = " / ".join(_both(passage.title))
    base = {"doc_id": passage.id, "kind": "passage", "failure_mode": "",
            "failure_modes": tuple(passage.failure_modes)}
    cite = _cite(passage.citation)
    out: list[Chunk] = []

    def add(field: str, body: list[str], lang: str, citation: HitCitation = cite) -> None:
        text = "\n".join([head, *body]).strip()
        out.append(Chunk(id=f"{passage.id}#{field}", field=field, text=text, citation=citation, lang=lang, **base))

    # The source text plus whichever translation exists (guide passages have English, runbook ones Chinese).
    zh_pieces = _pieces(passage.text) + (_pieces(passage.text_zh) if passage.text_zh else [])
    en_pieces = _pieces(passage.text_en) if passage.text_en else []
    if len(zh_pieces) <= 1 and len(en_pieces) <= 1:
        add("text", [*zh_pieces, *en_pieces], _lang([passage.title], extra_en=bool(en_pieces)))
    else:
        for n, piece in enumerate(zh_pieces, start=1):
            add(f"text:{n}", [piece], _lang([passage.title]))
        for n, piece in enumerate(en_pieces, start=1):
            add(f"text_en:{n}", [piece], "zh+en" if passage.title.zh else "en")
    for n, code in enumerate(passage.code, start=1):
        add(f"code:{n}", [code.code], _lang([passage.title]), _cite(code.citation))
    for n, table in enumerate(passage.tables, start=1):
        add(f"table:{n}", _table_text(table), _lang([passage.title]), _cite(table.citation))
    return out


CASE_CHARS = 1200  # a case is embedded by its opening (the model reads 256 word pieces anyway)


def case_chunks(cases: Sequence) -> list[Chunk]:
    """One chunk per past incident (``assistant.cases.CaseRecord``): its text as posted, cited by file and line."""
    out = []
    for case in cases:
        first = next((ln.strip() for ln in case.text.splitlines() if ln.strip()), case.id)
        out.append(Chunk(
            id=f"case:{case.id}#text", doc_id=case.id, kind="case",
            failure_mode=case.labels[0] if case.labels else "", failure_modes=tuple(case.labels), field="text",
            lang="zh" if case.lang == "zh" else "en", text=case.text[:CASE_CHARS],
            citation=HitCitation(source=f"cases/{case.file or 'cases.jsonl'}", source_kind="case", section=case.id,
                                 heading=first[:120], start_line=max(case.line, 1), end_line=max(case.line, 1)),
        ))
    return out


def build_chunks(records: Sequence[Record], passages: Sequence[Passage] = (), cases: Sequence = ()) -> list[Chunk]:
    """All chunks of a knowledge base, records first, then passages and past incidents.

    Raises ``ValueError`` on duplicate chunk ids."""
    chunks = ([c for r in records for c in record_chunks(r)] + [c for p in passages for c in passage_chunks(p)]
              + case_chunks(cases))
    seen: set[str] = set()
    for c in chunks:
        if c.id in seen:
            raise ValueError(f"duplicate chunk id {c.id!r}: two records/passages share an id")
        seen.add(c.id)
    return chunks


def chunk_hash(chunk: Chunk, model_fingerprint: str) -> str:
    """sha256 of the chunk's text, metadata and the embedding model: equal hash = same vector."""
    payload = json.dumps(
        {"text": chunk.text, "meta": chunk.metadata(), "model": model_fingerprint},
        ensure_ascii=False, sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
