"""The team's English translations of a Chinese source, kept as data in ``kb/translations/<source>.en.yaml``.

The file maps each exact Chinese text unit of the source (heading, sub-heading, prose line, table cell,
tree label, code-block title comment) to English. Ingest joins them into ``Text.en``; English is never
used as a citation quote.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from assistant.errors import KnowledgeBaseError
from ingest.guide import Guide

_TREE_PREFIX = "├└│─ \u00a0"


def has_cjk(text: str) -> bool:
    """True if ``text`` contains CJK ideographs or full-width punctuation (i.e. needs translating)."""
    return any("\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef" for ch in text)


def tree_label(line: str) -> str:
    """A tree line's label without the box-drawing prefix."""
    return line.lstrip(_TREE_PREFIX).strip()


def translatable_units(guide: Guide) -> list[tuple[str, int]]:
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


class Translations:
    """Chinese unit -> English, loaded from one YAML file."""

    def __init__(self, path: Path, mapping: dict[str, str]):
        self.path = path
        self.mapping = mapping

    @classmethod
    def load(cls, path: Path) -> "Translations":
        """Load ``path``; a missing file gives an empty mapping, a malformed one raises KnowledgeBaseError."""
        if not path.is_file():
            return cls(path, {})
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise KnowledgeBaseError(f"{path.name}: cannot read translations ({err})") from err
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise KnowledgeBaseError(f"{path.name}: translations must map Chinese text to English text")
        return cls(path, data)

    def en(self, zh: str) -> str | None:
        """English for a unit; text without Chinese is its own translation; None if untranslated."""
        zh = zh.strip()
        if not has_cjk(zh):
            return zh
        return self.mapping.get(zh)

    def missing(self, guide: Guide) -> list[tuple[str, int]]:
        return [(u, line) for u, line in translatable_units(guide) if u not in self.mapping]

    def stale(self, guide: Guide) -> list[str]:
        units = {u for u, _ in translatable_units(guide)}
        return sorted(k for k in self.mapping if k not in units)


def translations_path(kb_dir: Path, source_name: str) -> Path:
    """Where the English for ``source_name`` lives."""
    return Path(kb_dir) / "translations" / f"{Path(source_name).stem}.en.yaml"
