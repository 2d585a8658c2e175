"""The team's translations of a source, kept as data in ``kb/translations/<source-stem>.<lang>.yaml``.

One file per source and target language: the Chinese guide has ``<stem>.en.yaml``, the English team
runbook ``team-runbook.zh.yaml``. A file maps each exact text unit of the source, as ingest extracts it
(guide: heading, sub-heading, prose line, table cell, tree label, code-block title comment; runbook:
passage heading and paragraph, symptom, cause, ``Check:`` detection, diagnosis step and fix text), to the
target language. Ingest joins them into :class:`~kb.schema.Text`; a translation is never a citation quote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml

from assistant.errors import KnowledgeBaseError
from ingest.guide import Guide
from ingest.markdown import Runbook

Lang = Literal["zh", "en"]
LANGS: tuple[Lang, Lang] = ("zh", "en")
_TREE_PREFIX = "├└│─ \u00a0"
LANG_NAMES = {"zh": "Chinese", "en": "English"}


def has_cjk(text: str) -> bool:
    """True if ``text`` contains CJK ideographs or full-width punctuation (i.e. needs translating)."""
    return any("\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef" for ch in text)


def _prose(text: str) -> str:
    """``text`` without its inline ``code`` spans (identifiers and error strings are never translated)."""
    return " ".join(text.split("`")[::2])


def text_language(text: str) -> Lang:
    """'zh' if CJK ideographs outside code spans are at least as many as Latin words, else 'en'.

    A Chinese sentence keeps English terms ("保留了所有 checkpoint") and an English paragraph may name
    Chinese headings (症状, 根因), so neither "has any CJK" nor "has any Latin" decides it.
    """
    prose = _prose(text)
    ideographs = sum(1 for ch in prose if "\u3400" <= ch <= "\u9fff")
    words, word = 0, ""
    for ch in prose + " ":
        if ch.isascii() and (ch.isalnum() or ch in "_-."):
            word += ch
            continue
        words += any(c.isalpha() for c in word)  # "save_total_limit", "FP16" are one word; "2026" is none
        word = ""
    return "zh" if ideographs and ideographs >= words else "en"


def needs_translation(text: str, target: Lang) -> bool:
    """True if ``text`` has prose (outside code spans) that is not already in ``target``."""
    if target == "en":
        return text_language(text) == "zh"
    return text_language(text) == "en" and any(ch.isascii() and ch.isalpha() for ch in _prose(text))


def tree_label(line: str) -> str:
    """A tree line's label without the box-drawing prefix."""
    return line.lstrip(_TREE_PREFIX).strip()


def guide_units(guide: Guide) -> list[tuple[str, int]]:
    """Every Chinese text unit of the guide with the first line it occurs on, in source order, deduplicated."""
    units: list[tuple[str, int]] = []
    seen: set[str] = set()

    def add(text: str, line: int) -> None:
        text = text.strip()
        if text and has_cjk(text) and text not in seen:
            seen.add(text)
            units.append((text, line))

    def blocks(block_list) -> None:
        for block in block_list:
            if block.kind == "prose":
                add(block.lines[0], block.start)
            elif block.kind == "tree":
                for k, line in enumerate(block.lines):
                    add(tree_label(line), block.start + k)
            elif block.kind == "table":
                for cell in block.header:
                    add(cell, block.start)
                for row_line, cells in block.rows:
                    for cell in cells:
                        add(cell, row_line)
            elif block.kind == "code" and block.title():
                add(block.title() or "", block.start)

    blocks(guide.front_matter.blocks)
    for sec in guide.sections:
        add(sec.heading, sec.line)
        for sub in sec.subsections:
            if sub.heading and sub.line:
                add(sub.heading, sub.line)
            blocks(sub.blocks)
    return units


def runbook_units(rb: Runbook) -> list[tuple[str, int]]:
    """Every text unit of a runbook that ingest puts into a record or passage, with its line, in source order.

    Passages: the heading and each paragraph / list item. Failure-mode sections: summary paragraphs, then
    per part each symptom, cause (text and ``Check:`` detection), diagnosis step and fix. Deduplicated.
    """
    units: list[tuple[str, int]] = []
    seen: set[str] = set()

    def add(text: str | None, line: int) -> None:
        text = (text or "").strip()
        if text and text not in seen:
            seen.add(text)
            units.append((text, line))

    for sec in rb.sections:
        if not sec.mode:
            items = rb.passage_items(sec)
            if items is not None:
                add(sec.heading, sec.line)
                for item in items:
                    add(item.text, item.start)
            continue
        for item in sec.intro:
            add(item.text, item.start)
        for part in sec.parts:
            for item in part.items:
                if part.kind == "dead-ends":
                    add(item.text, item.start)
                    add(item.why, item.start)
                    continue
                if part.kind != "causes":
                    add(item.text, item.start)
                    continue
                cause = item.record_cause()
                if cause is not None:
                    add(cause[2], item.start)
                    add(cause[3], item.start)
    return units


def translatable_units(source: Guide | Runbook, target: Lang = "en") -> list[tuple[str, int]]:
    """The units of ``source`` that need a translation into ``target``: (text, first line), in source order."""
    if isinstance(source, Guide):
        return guide_units(source) if target == "en" else []
    return [(u, line) for u, line in runbook_units(source) if needs_translation(u, target)]


class Translations:
    """Source text unit -> ``target``-language text, loaded from one YAML file."""

    def __init__(self, path: Path, mapping: dict[str, str], target: Lang = "en"):
        self.path = path
        self.mapping = mapping
        self.target = target

    @classmethod
    def load(cls, path: Path) -> Translations:
        """Load ``path`` (``<stem>.<lang>.yaml``); a missing file gives an empty mapping, a malformed one raises."""
        path = Path(path)
        target = path.name.rsplit(".", 2)[-2] if path.name.count(".") >= 2 else ""
        if target not in LANGS:
            raise KnowledgeBaseError(f"{path.name}: a translation file is named <source-stem>.zh.yaml or .en.yaml")
        if not path.is_file():
            return cls(path, {}, target)  # type: ignore[arg-type]
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise KnowledgeBaseError(f"{path.name}: cannot read translations ({err})") from err
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise KnowledgeBaseError(f"{path.name}: translations must map source text to {LANG_NAMES[target]} text")
        return cls(path, data, target)  # type: ignore[arg-type]

    def get(self, text: str) -> str | None:
        """The translation of a unit; text that needs none is its own translation; None if untranslated."""
        text = text.strip()
        if not needs_translation(text, self.target):
            return text
        return self.mapping.get(text)

    def en(self, zh: str) -> str | None:
        """English for a Chinese guide unit (text without Chinese is its own translation)."""
        zh = zh.strip()
        if not has_cjk(zh):
            return zh
        return self.mapping.get(zh)

    def missing(self, source: Guide | Runbook) -> list[tuple[str, int]]:
        """Units of ``source`` this file does not translate, with their lines."""
        return [(u, line) for u, line in translatable_units(source, self.target) if u not in self.mapping]

    def stale(self, source: Guide | Runbook) -> list[str]:
        """Keys that are no unit of ``source`` (the source changed under the translation)."""
        units = {u for u, _ in translatable_units(source, self.target)}
        return sorted(k for k in self.mapping if k not in units)


def translations_path(kb_dir: Path, source_name: str, target: Lang = "en") -> Path:
    """Where the ``target``-language translation of ``source_name`` lives."""
    return Path(kb_dir) / "translations" / f"{Path(source_name).stem}.{target}.yaml"
