"""The hand-written overlay (``kb/overlay.yaml``): how guide sections map onto records and passages.

The guide has no ids; the overlay says which numbered section (and sub-heading) becomes which record or
passage, which record field each sub-heading feeds, which cause id each table row is, and which guide
lines a mode cites without owning them. It also carries each mode's titles, summary and search keywords.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from assistant.errors import KnowledgeBaseError
from kb.taxonomy import FailureMode

Role = Literal["symptoms", "causes", "diagnosis", "fixes"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bilingual(_Model):
    zh: str
    en: str


class SectionMap(_Model):
    """A numbered guide section: the record or passage it becomes, and sub-headings split off as passages."""

    record: FailureMode | None = None
    passage: str | None = None
    subsections: dict[str, str] = Field(default={}, description="sub-heading -> passage id")

    @model_validator(mode="after")
    def _one_target(self) -> SectionMap:
        if (self.record is None) == (self.passage is None):
            raise ValueError("give exactly one of record / passage")
        return self


class TableMap(_Model):
    """How a section's table feeds its record: rows become causes or fixes."""

    role: Literal["causes", "fixes"]
    text: list[str] = Field(description="header cells joined (with '：') into the item text")
    details: list[str] = Field(default=[], description="header cells appended in brackets, labelled")
    key: str | None = Field(default=None, description="header cell whose value looks up the cause id")
    likelihood: str | None = None
    detection: str | None = None
    ids: dict[str, str] = Field(default={}, description="key cell -> cause id")


class GuideMap(_Model):
    front_matter: str = Field(description="passage id for the lines before section 1")
    sections: dict[str, SectionMap]
    roles: dict[str, Role] = Field(description="sub-heading -> record field it feeds")
    tables: dict[str, TableMap] = {}


class Cite(_Model):
    """A guide unit a mode cites without owning it: the smallest block (line, table row, code block) containing ``find``."""

    source: str | None = Field(default=None, description="guide file; default: the only guide in the overlay")
    section: str
    find: str
    role: Literal["reference", "symptoms", "diagnosis", "fixes"] = "reference"
    cell: str | None = Field(default=None, description="for a table row: the header cell used as the item text")


class FixAddress(_Model):
    """The guide fix whose quoted source text contains ``find`` acts on these cause ids."""

    find: str
    causes: list[str]


class ModeOverlay(_Model):
    title: Bilingual
    summary: Bilingual
    keywords: dict[Literal["zh", "en"], list[str]]
    cites: list[Cite] = []
    fix_addresses: list[FixAddress] = Field(default=[], description="cause ids for the guide's fixes")


class PassageOverlay(_Model):
    title: Bilingual
    failure_modes: list[FailureMode] = []


class Overlay(_Model):
    guides: dict[str, GuideMap]
    passages: dict[str, PassageOverlay]
    modes: dict[FailureMode, ModeOverlay]

    @model_validator(mode="after")
    def _passages_declared(self) -> Overlay:
        for name, guide in self.guides.items():
            ids = [guide.front_matter] + [s.passage for s in guide.sections.values() if s.passage]
            ids += [p for s in guide.sections.values() for p in s.subsections.values()]
            missing = [p for p in ids if p not in self.passages]
            if missing:
                raise ValueError(f"guides.{name}: passages without an entry under passages: {missing}")
        return self


def load_overlay(path: Path) -> Overlay:
    """Load and validate the overlay; errors name the file and field."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        return Overlay.model_validate(data)
    except FileNotFoundError as err:
        raise KnowledgeBaseError(f"{path}: overlay file missing") from err
    except (yaml.YAMLError, ValidationError) as err:
        raise KnowledgeBaseError(f"{path}: invalid overlay: {err}") from err
