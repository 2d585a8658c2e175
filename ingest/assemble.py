"""Assemble records and passages from the parsed guide, the overlay, the runbooks and their translations.

Guide content a record owns comes first (in the guide's order), then runbook items, then guide units
the overlay says a mode only cites. Every item carries a :class:`Citation` whose ``quote`` is verbatim
source text inside its line range; runbook items are always ``source_kind="runbook"``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

import re2
from pydantic import ValidationError

from assistant.errors import KnowledgeBaseError
from ingest.guide import Block, Guide, Section, Subsection
from ingest.markdown import MdItem, MdSection, Runbook, slugify
from ingest.overlay import Cite, GuideMap, Overlay, TableMap
from ingest.translations import (
    LANG_NAMES,
    Lang,
    Translations,
    has_cjk,
    needs_translation,
    text_language,
    tree_label,
)
from kb import taxonomy
from kb.schema import (
    Cause,
    Citation,
    CodeSnippet,
    DeadEnd,
    Fix,
    LineSpan,
    Passage,
    Record,
    Step,
    Symptom,
    Table,
    TableRow,
    Text,
)

_LIKELIHOOD = {"高": "high", "中": "medium", "低": "low"}
FRONT_MATTER_SECTION = "front-matter"


@dataclass
class _ModeBuilder:
    """Accumulates one mode's items from every source before the record is built."""

    mode: str
    symptoms: list[Symptom] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)
    diagnosis: list[Step] = field(default_factory=list)
    fixes: list[tuple[Text | None, CodeSnippet | None, Citation, list[str]]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    owns: list[LineSpan] = field(default_factory=list)
    intro: list[Text] = field(default_factory=list)
    dead_ends: list[DeadEnd] = field(default_factory=list)

    def cite(self, citation: Citation) -> None:
        if citation not in self.citations:
            self.citations.append(citation)

    def empty(self) -> bool:
        return not (self.symptoms or self.causes or self.diagnosis or self.fixes)


@dataclass
class Assembly:
    """The result: records and passages by id, which source produced which, and warnings."""

    records: dict[str, Record]
    passages: dict[str, Passage]
    by_source: dict[str, tuple[list[str], list[str]]]
    warnings: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)


class _GuideReader:
    """Turns guide blocks into schema objects (citations, bilingual text, snippets, tables)."""

    def __init__(self, guide: Guide, tr: Translations, warnings: list[str]):
        self.guide = guide
        self.tr = tr
        self.warnings = warnings

    def text(self, zh: str) -> Text:
        en = self.tr.en(zh)
        if en is None:
            self.warnings.append(f"{self.guide.name}: no English translation for {zh!r}")
        return Text(zh=zh, en=en)

    def citation(self, section: str, heading: str, start: int, end: int, quote: str | None = None) -> Citation:
        text = self.guide.span_text(start, end)
        quote = text.strip() if quote is None else quote
        if quote not in text:
            raise KnowledgeBaseError(f"{self.guide.name}: quote {quote!r} not in lines {start}-{end}")
        return Citation(source=self.guide.name, source_kind="guide", section=section, heading=heading,
                        start_line=start, end_line=end, quote=quote)

    def section_citation(self, sec: Section, start: int | None = None, end: int | None = None) -> Citation:
        return self.citation(sec.number, sec.heading, start or sec.line, end or sec.end,
                             quote=self.guide.line(sec.line).strip() if (start or sec.line) == sec.line else None)

    def snippet(self, sec: Section, block: Block) -> CodeSnippet:
        return CodeSnippet(language=block.language or "text", code=block.text,
                           citation=self.citation(sec.number, sec.heading, block.start, block.end, block.text))

    def table(self, sec: Section, block: Block) -> Table:
        header_en = [self.tr.en(h) or h for h in block.header]
        rows = []
        for line, cells in block.rows:
            rows.append(TableRow(
                cells=dict(zip(block.header, cells)),
                en=dict(zip(header_en, (self.tr.en(c) or c for c in cells))),
                citation=self.citation(sec.number, sec.heading, line, line, self.guide.line(line)),
            ))
        return Table(header=list(block.header), header_en=header_en, rows=rows,
                     citation=self.citation(sec.number, sec.heading, block.start, block.end, block.text))

    def translate_line(self, line: str) -> str:
        """English rendering of one guide line for a passage's ``text_en`` (code lines stay as they are)."""
        stripped = line.strip()
        if not stripped or not has_cjk(stripped):
            return line
        if "\t" in line:
            return "\t".join(self.tr.en(c.strip()) or c for c in line.split("\t"))
        if any(ch in line for ch in "├└│"):
            label = tree_label(line)
            return line[: len(line) - len(line.lstrip("├└│─ \u00a0"))] + (self.tr.en(label) or label)
        return self.tr.en(stripped) or line


def _row_text(reader: _GuideReader, header: tuple[str, ...], cells: tuple[str, ...], tmap: TableMap) -> Text:
    row = dict(zip(header, cells))
    try:
        zh_main = "：".join(row[h] for h in tmap.text)
        en_main = ": ".join(reader.tr.en(row[h]) or row[h] for h in tmap.text)
        zh_details = "，".join(f"{h} {row[h]}" for h in tmap.details)
        en_details = ", ".join(f"{(reader.tr.en(h) or h).lower()} {reader.tr.en(row[h]) or row[h]}" for h in tmap.details)
    except KeyError as err:
        raise KnowledgeBaseError(f"overlay table map names column {err} the guide table does not have") from err
    if tmap.details:
        return Text(zh=f"{zh_main}（{zh_details}）", en=f"{en_main} ({en_details})")
    return Text(zh=zh_main, en=en_main)


def _table_items(reader: _GuideReader, sec: Section, block: Block, tmap: TableMap, b: _ModeBuilder) -> None:
    b.tables.append(reader.table(sec, block))
    for line, cells in block.rows:
        row = dict(zip(block.header, cells))
        cit = reader.citation(sec.number, sec.heading, line, line, reader.guide.line(line))
        text = _row_text(reader, block.header, cells, tmap)
        if tmap.role == "fixes":
            b.fixes.append((text, None, cit, []))
            continue
        key = row.get(tmap.key or block.header[0], "")
        cause_id = tmap.ids.get(key)
        if cause_id is None:
            raise KnowledgeBaseError(f"overlay: no cause id for {key!r} (guide §{sec.number} line {line})")
        likelihood = _LIKELIHOOD.get(row.get(tmap.likelihood or "", ""))
        detection = reader.text(row[tmap.detection]) if tmap.detection else None
        b.causes.append(Cause(id=cause_id, text=text, likelihood=likelihood, detection=detection, citation=cit))


def _block_item(reader: _GuideReader, sec: Section, block: Block, role: str, b: _ModeBuilder, cell: str | None = None,
                line: int | None = None) -> None:
    """Add one guide unit to the builder in the given role (``line`` picks a table row or tree line)."""
    if block.kind == "code":
        snippet = reader.snippet(sec, block)
        title = block.title()
        text = reader.text(title) if title else None
        cit = snippet.citation
    else:
        no = line or block.start
        raw = reader.guide.line(no)
        if block.kind == "table":
            row = dict(zip(block.header, next(c for n, c in block.rows if n == no)))
            if cell:
                text = reader.text(row[cell])
            else:  # the whole row, cell by cell
                text = Text(zh="：".join(row.values()), en=": ".join(reader.tr.en(c) or c for c in row.values()))
        else:
            text = reader.text(tree_label(raw) if block.kind == "tree" else raw.strip())
        snippet = None
        cit = reader.citation(sec.number, sec.heading, no, no, raw.strip())
    if role == "symptoms":
        if text is None:
            raise KnowledgeBaseError(f"{reader.guide.name} line {block.start}: a code block cannot be a symptom")
        b.symptoms.append(Symptom(text=text, citation=cit))
    elif role == "diagnosis":
        b.diagnosis.append(Step(text=text, code=snippet, citation=cit))
    elif role == "fixes":
        b.fixes.append((text, snippet, cit, []))
    elif role == "causes":
        raise KnowledgeBaseError(
            f"{reader.guide.name} line {block.start}: causes come from tables with cause ids, not {block.kind} lines")
    b.cite(cit)


def _span_minus(start: int, end: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, cur = [], start
    for h_start, h_end in sorted(holes):
        if h_start > cur:
            out.append((cur, h_start - 1))
        cur = max(cur, h_end + 1)
    if cur <= end:
        out.append((cur, end))
    return out


def _guide_passage(reader: _GuideReader, overlay: Overlay, pid: str, sec: Section | None, subs: list[Subsection],
                   start: int, end: int, truncated: bool) -> Passage:
    guide = reader.guide
    meta = overlay.passages[pid]
    while end > start and not guide.line(end).strip():
        end -= 1
    code, tables = [], []
    for sub in subs:
        for block in sub.blocks:
            if block.kind == "code" and sec is not None:
                code.append(reader.snippet(sec, block))
            elif block.kind == "table" and sec is not None:
                tables.append(reader.table(sec, block))
    text = guide.span_text(start, end)
    text_en = "\n".join(reader.translate_line(line) for line in text.split("\n"))
    if sec is None:
        # The guide's title: the first front-matter line that is not a date.
        prose = [b.lines[0].strip() for b in (subs[0].blocks if subs else []) if b.kind == "prose"]
        heading = next((line for line in prose if not any(ch.isdigit() for ch in line)), prose[0] if prose else guide.name)
        citation = reader.citation(FRONT_MATTER_SECTION, heading, start, end, heading)
    else:
        citation = reader.section_citation(sec, start, end)
    return Passage(id=pid, title=Text(zh=meta.title.zh, en=meta.title.en), text=text, text_en=text_en, code=code,
                   tables=tables, failure_modes=list(meta.failure_modes), truncated=truncated, citation=citation,
                   owns=[LineSpan(source=guide.name, start_line=start, end_line=end)])


def _assemble_guide(guide: Guide, gmap: GuideMap, overlay: Overlay, tr: Translations,
                    builders: dict[str, _ModeBuilder], passages: dict[str, Passage], warnings: list[str]) -> tuple[list, list]:
    reader = _GuideReader(guide, tr, warnings)
    rec_ids: list[str] = []
    pas_ids: list[str] = []
    fm = guide.front_matter
    if fm.blocks:
        passages[gmap.front_matter] = _guide_passage(reader, overlay, gmap.front_matter, None, [fm], 1, fm.end, False)
        pas_ids.append(gmap.front_matter)
    for sec in guide.sections:
        smap = gmap.sections.get(sec.number)
        if smap is None:
            raise KnowledgeBaseError(f"{guide.name}: section {sec.number} '{sec.heading}' has no mapping in the overlay")
        if smap.passage:
            passages[smap.passage] = _guide_passage(reader, overlay, smap.passage, sec, sec.subsections, sec.line,
                                                    sec.end, sec.truncated)
            pas_ids.append(smap.passage)
            continue
        b = builders[smap.record]
        holes = []
        for sub in sec.subsections:
            pid = smap.subsections.get(sub.heading or "")
            if pid:
                is_last = sub is sec.subsections[-1]
                passages[pid] = _guide_passage(reader, overlay, pid, sec, [sub], sub.start, sub.end,
                                               sec.truncated and is_last)
                pas_ids.append(pid)
                holes.append((sub.start, sub.end))
        spans = _span_minus(sec.line, sec.end, holes)
        for s, e in spans:
            while e > s and not guide.line(e).strip():
                e -= 1
            b.owns.append(LineSpan(source=guide.name, start_line=s, end_line=e))
        b.cite(reader.section_citation(sec, spans[0][0], spans[0][1]))
        for sub in sec.subsections:
            if smap.subsections.get(sub.heading or ""):
                continue
            role = gmap.roles.get(sub.heading or "")
            if role is None and sub.blocks:
                raise KnowledgeBaseError(
                    f"{guide.name}: sub-heading {sub.heading!r} in §{sec.number} has no role in the overlay")
            for block in sub.blocks:
                if block.kind == "table":
                    tmap = gmap.tables.get(sec.number)
                    if tmap is None:
                        raise KnowledgeBaseError(f"{guide.name}: table in §{sec.number} has no overlay table map")
                    _table_items(reader, sec, block, tmap, b)
                else:
                    _block_item(reader, sec, block, role or "", b)
        if smap.record not in rec_ids:
            rec_ids.append(smap.record)
    return rec_ids, pas_ids


def _find_unit(guide: Guide, cite: Cite) -> tuple[Section, Block, int]:
    """The smallest unit of ``cite.section`` containing ``cite.find``: (section, block, line)."""
    try:
        sec = guide.section(cite.section)
    except KeyError:
        raise KnowledgeBaseError(f"overlay cite {cite.find!r}: {guide.name} has no section {cite.section}") from None
    hits: list[tuple[Block, int]] = []
    for sub in sec.subsections:
        for block in sub.blocks:
            if block.kind == "code":
                if cite.find in block.text:
                    hits.append((block, block.start))
                continue
            for k, line in enumerate(block.lines):
                if cite.find in line:
                    hits.append((block, block.start + k))
    if len(hits) != 1:
        what = "not found" if not hits else f"ambiguous ({len(hits)} matches)"
        raise KnowledgeBaseError(f"overlay cite {cite.find!r} in {guide.name} §{cite.section}: {what}")
    return sec, hits[0][0], hits[0][1]


def _apply_cites(guides: dict[str, Guide], overlay: Overlay, translations: dict[str, Translations],
                 builders: dict[str, _ModeBuilder], warnings: list[str]) -> None:
    for mode, meta in overlay.modes.items():
        for cite in meta.cites:
            name = cite.source or next(iter(overlay.guides))
            guide = guides.get(name)
            if guide is None:
                continue
            reader = _GuideReader(guide, translations[name], warnings)
            try:
                sec, block, line = _find_unit(guide, cite)
                if cite.role == "reference":
                    if block.kind == "code":
                        builders[mode].cite(reader.snippet(sec, block).citation)
                    else:
                        builders[mode].cite(reader.citation(sec.number, sec.heading, line, line,
                                                            guide.line(line).strip()))
                else:
                    _block_item(reader, sec, block, cite.role, builders[mode], cell=cite.cell, line=line)
            except (KnowledgeBaseError, ValidationError) as err:
                # A stale cite loses one citation, not the whole knowledge base; the warning says which.
                warnings.append(f"overlay modes.{mode}.cites: {err}")


class _RunbookText:
    """Bilingual text for runbook units: the runbook's own words plus the team's translation, if it has one."""

    def __init__(self, rb: Runbook, translations: Mapping[str, Translations], warnings: list[str]):
        self.rb = rb
        self.translations = translations
        self.warnings = warnings
        self._warned: set[tuple[str, str]] = set()

    def translate(self, unit: str, target: Lang) -> str | None:
        """``unit`` in ``target``: itself if nothing needs translating, else the translation file's entry."""
        if not needs_translation(unit, target):
            return unit
        tr = self.translations.get(target)
        if tr is None:  # a runbook without a translation file is simply single-language
            return None
        out = tr.get(unit)
        if out is None and (target, unit) not in self._warned:  # a heading is both title and passage text
            self._warned.add((target, unit))
            self.warnings.append(f"{tr.path.name}: no {LANG_NAMES[target]} translation for {unit!r}")
        return out

    def text(self, unit: str) -> Text:
        lang = text_language(unit)
        other: Lang = "en" if lang == "zh" else "zh"
        return Text(**{lang: unit, other: self.translate(unit, other)})

    def passage_text(self, sec: MdSection, items: list[MdItem], target: Lang) -> str | None:
        """The passage re-written in ``target`` unit by unit (code verbatim).

        None if nothing in it needs translating into ``target`` or a unit has no translation.
        """
        if not any(needs_translation(u, target) for u in [sec.heading] + [i.text for i in items if i.text]):
            return None
        heading = self.translate(sec.heading, target)
        if heading is None:
            return None
        blocks = ["#" * sec.level + " " + heading]
        for item in items:
            lines = []
            if item.text:
                text = self.translate(item.text, target)
                if text is None:
                    return None
                lines.append(item.marker + text)
            for c in item.code:  # the fence lines around the content, verbatim
                lines.append(self.rb.span_text(c.start - 1, min(c.end + 1, sec.end)))
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)


def _rb_citation(rb: Runbook, sec: MdSection, start: int, end: int, quote: str) -> Citation:
    if quote not in rb.span_text(start, end):
        raise KnowledgeBaseError(f"{rb.name}: quote {quote!r} not in lines {start}-{end}")
    return Citation(source=rb.name, source_kind="runbook", section=sec.slug, heading=sec.heading,
                    start_line=start, end_line=end, quote=quote)


def _rb_snippets(rb: Runbook, sec: MdSection, item: MdItem) -> list[CodeSnippet]:
    return [CodeSnippet(language=c.language, code=c.code, citation=_rb_citation(rb, sec, c.start, c.end, c.raw))
            for c in item.code]


def _passage_id(rb: Runbook, sec: MdSection) -> str:
    """``<stem>-overview`` for the runbook's title section, ``<stem>-<slug>`` otherwise (the stem never twice)."""
    stem = rb.name.rsplit(".", 1)[0]
    if sec is rb.title():
        return f"{stem}-overview"
    stem_slug = slugify(stem, max_len=len(stem)) or stem
    if sec.slug == stem_slug or sec.slug.startswith(stem_slug + "-"):
        return sec.slug
    return f"{stem}-{sec.slug}"


def _assemble_runbook(rb: Runbook, overlay: Overlay, builders: dict[str, _ModeBuilder],
                      passages: dict[str, Passage], warnings: list[str],
                      translations: Mapping[str, Translations]) -> tuple[list, list]:
    reader = _RunbookText(rb, translations, warnings)
    rec_ids: list[str] = []
    pas_ids: list[str] = []
    for sec in rb.sections:
        if sec.mode:
            b = builders[sec.mode]
            b.cite(_rb_citation(rb, sec, sec.line, sec.end, rb.lines[sec.line - 1].strip()))
            b.owns.append(LineSpan(source=rb.name, start_line=sec.line, end_line=max(sec.line, sec.intro_end)))
            for item in sec.intro:
                b.intro.append(reader.text(item.text))
            for part in sec.parts:
                b.owns.append(LineSpan(source=rb.name, start_line=part.line, end_line=part.end))
                for item in part.items:
                    _runbook_item(rb, reader, sec, part.kind, item, b, warnings)
            if sec.mode not in rec_ids:
                rec_ids.append(sec.mode)
            continue
        items = rb.passage_items(sec)
        if items is None:
            continue
        pid = _passage_id(rb, sec)
        if pid in passages:  # never overwrite another source's passage
            warnings.append(f"{rb.name}:{sec.line}: passage id {pid} already taken; using {pid}-{sec.line}")
            pid = f"{pid}-{sec.line}"
        code = [s for item in items for s in _rb_snippets(rb, sec, item)]
        text_zh, text_en = (reader.passage_text(sec, items, lang) for lang in ("zh", "en"))
        passages[pid] = Passage(
            id=pid, title=reader.text(sec.heading), text=rb.span_text(sec.line, sec.end), code=code,
            text_zh=text_zh, text_en=text_en,
            failure_modes=[sec.parent_mode] if sec.parent_mode else [],
            citation=_rb_citation(rb, sec, sec.line, sec.end, rb.lines[sec.line - 1].strip()),
            owns=[LineSpan(source=rb.name, start_line=sec.line, end_line=sec.end)],
        )
        pas_ids.append(pid)
    return rec_ids, pas_ids


def _runbook_item(rb: Runbook, reader: _RunbookText, sec: MdSection, kind: str, item: MdItem, b: _ModeBuilder,
                  warnings: list[str]) -> None:
    snippets = _rb_snippets(rb, sec, item)
    cit = _rb_citation(rb, sec, item.start, item.end, item.quote)
    text = reader.text(item.text) if item.text and kind != "causes" else None  # a cause's text drops its id
    if kind == "symptoms":
        if text is None:
            warnings.append(f"{rb.name}:{item.start}: symptom without text skipped")
            return
        b.symptoms.append(Symptom(text=text, citation=cit))
    elif kind == "causes":
        parsed = item.record_cause()
        if parsed is None:
            warnings.append(f"{rb.name}:{item.start}: cause item has no `cause-id`; skipped")
            return
        cause_id, likelihood, cause_text, detection = parsed
        if any(c.id == cause_id for c in b.causes):
            warnings.append(f"{rb.name}:{item.start}: cause {cause_id} of {b.mode} already given; kept the first")
            return
        b.causes.append(Cause(id=cause_id, text=reader.text(cause_text), likelihood=likelihood,
                              detection=reader.text(detection) if detection else None, citation=cit))
    elif kind == "diagnosis":
        b.diagnosis.append(Step(text=text, code=snippets[0] if snippets else None, citation=cit))
        b.diagnosis.extend(Step(code=s, citation=s.citation) for s in snippets[1:])
    elif kind == "dead-ends":
        if text is None or not item.why:
            warnings.append(f"{rb.name}:{item.start}: dead end without text or `Why:` line skipped")
            return
        for pattern in item.matches:
            try:
                re2.compile(pattern)
            except re2.error as err:
                warnings.append(f"{rb.name}:{item.start}: dead-end pattern {pattern!r} does not compile: {err}")
                return
        b.dead_ends.append(DeadEnd(text=text, why=reader.text(item.why), matches=item.matches, citation=cit))
    else:
        b.fixes.append((text, snippets[0] if snippets else None, cit, item.addresses))
        b.fixes.extend((None, s, s.citation, item.addresses) for s in snippets[1:])


def _resolve_addresses(b: _ModeBuilder, overlay: Overlay, warnings: list[str]) -> None:
    """Attach the overlay's cause ids to guide fixes, and check every address names a cause of the mode."""
    meta = overlay.modes.get(b.mode)  # type: ignore[call-overload]
    for entry in meta.fix_addresses if meta else []:
        hits = [i for i, (_, _, cit, _) in enumerate(b.fixes) if cit.source_kind == "guide" and entry.find in cit.quote]
        if len(hits) != 1:
            what = "matches no guide fix" if not hits else f"matches {len(hits)} guide fixes"
            warnings.append(f"overlay modes.{b.mode}.fix_addresses {entry.find!r} {what}")
            continue
        text, code, cit, addr = b.fixes[hits[0]]
        b.fixes[hits[0]] = (text, code, cit, addr + [c for c in entry.causes if c not in addr])
    known = {c.id for c in b.causes}
    for _, _, cit, addr in b.fixes:
        for cause_id in addr:
            if cause_id not in known:
                warnings.append(f"{cit.source}:{cit.start_line}: fix of {b.mode} addresses unknown cause {cause_id}")


def _build_record(b: _ModeBuilder, overlay: Overlay) -> Record:
    mode = taxonomy.mode(b.mode)
    meta = overlay.modes.get(b.mode)  # type: ignore[call-overload]
    if meta is not None:
        title = Text(zh=meta.title.zh, en=meta.title.en)
        summary = Text(zh=meta.summary.zh, en=meta.summary.en)
        keywords = Text(zh=" ".join(meta.keywords.get("zh", [])), en=" ".join(meta.keywords.get("en", [])))
    else:
        title = Text(zh=mode.zh, en=mode.en)
        summary = b.intro[0] if b.intro else None
        keywords = Text(zh=mode.zh, en=mode.en)
    fixes = [Fix(priority=i, text=t, code=c, citation=cit, addresses=addr)
             for i, (t, c, cit, addr) in enumerate(b.fixes, start=1)]
    return Record(id=b.mode, failure_mode=mode.id, category=mode.category, title=title, summary=summary,
                  keywords=keywords, symptoms=b.symptoms, causes=b.causes, diagnosis=b.diagnosis, fixes=fixes,
                  dead_ends=b.dead_ends, tables=b.tables, citations=b.citations, owns=b.owns)


def assemble(guides: dict[str, Guide], translations: dict[str, Translations], runbooks: list[Runbook],
             overlay: Overlay, runbook_translations: Mapping[str, Mapping[str, Translations]] | None = None) -> Assembly:
    """Build every record and passage.

    ``translations`` holds each guide's English; ``runbook_translations`` maps a runbook's name to its
    translation files by target language (``{"zh": …}`` for an English runbook). A runbook without one
    keeps its own language only.

    A source whose content cannot be assembled (a guide that no longer fits the overlay, a runbook item
    that fails validation) is left out whole and listed in ``Assembly.skipped``; the others still ingest.
    """
    warnings: list[str] = []
    skipped: list[tuple[str, str]] = []
    builders = {m: _ModeBuilder(m) for m in taxonomy.MODE_IDS}
    passages: dict[str, Passage] = {}
    by_source: dict[str, tuple[list[str], list[str]]] = {}

    def attempt(name: str, build) -> None:
        nonlocal builders, passages
        saved = (copy.deepcopy(builders), dict(passages), len(warnings))
        try:
            by_source[name] = build()
        except (KnowledgeBaseError, ValidationError) as err:
            builders, passages = saved[0], saved[1]
            del warnings[saved[2]:]
            reason = str(err).splitlines()[0] if isinstance(err, KnowledgeBaseError) else f"invalid item: {err}"
            skipped.append((name, reason if reason.startswith(name) else f"{name}: {reason}"))

    for name, guide in guides.items():
        attempt(name, lambda g=guide, n=name: _assemble_guide(g, overlay.guides[n], overlay, translations[n],
                                                              builders, passages, warnings))
    for rb in runbooks:
        warnings.extend(rb.warnings)
        rb_tr = (runbook_translations or {}).get(rb.name, {})
        attempt(rb.name, lambda r=rb, t=rb_tr: _assemble_runbook(r, overlay, builders, passages, warnings, t))
    # Guide units a mode only cites come last: where a runbook fills a mode, its priority order leads.
    live = {n: g for n, g in guides.items() if n in by_source}
    _apply_cites(live, overlay, translations, builders, warnings)
    records: dict[str, Record] = {}
    for mode_id, b in builders.items():
        if b.empty():
            warnings.append(f"no source covers failure mode {mode_id}; no record written")
            continue
        if b.intro and overlay.modes.get(mode_id) is not None:  # type: ignore[call-overload]
            warnings.append(f"{mode_id}: runbook summary text ignored; kb/overlay.yaml gives the summary")
        _resolve_addresses(b, overlay, warnings)
        records[mode_id] = _build_record(b, overlay)
    return Assembly(records, passages, by_source, warnings, skipped)
