"""Out-of-domain signatures (``kb/outside.yaml``): problems that are *not* training failures.

Environment and installation trouble, access and configuration errors, using or serving a trained
model, training quality: an on-call engineer recognises these at a glance and says "not a training
failure — it is an install problem". They are data like the signature rules (RE2 patterns, inline
``match`` / ``no_match`` examples that the tests run) and are scanned in the same pass. Whether the
answer declines is decided with the in-domain evidence (``assistant.ranking``): a strong training
signature on another line still wins.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assistant.errors import KnowledgeBaseError
from assistant.signatures import Entry, Examples, Strength, _check_re2, _compiled
from kb.yamlio import YAMLError, load_yaml, where

OutsideKind = Literal["environment", "access", "configuration", "usage", "quality", "how-to", "other-software"]


class OutsideRule(BaseModel):
    """A signature of an out-of-domain problem."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9-]+$")
    kind: OutsideKind
    description: str
    strength: Strength
    patterns: list[str] = Field(min_length=1)
    unless: list[str] = []
    examples: Examples

    @field_validator("patterns", "unless")
    @classmethod
    def _re2(cls, v: list[str]) -> list[str]:
        return [_check_re2(p, False) for p in v]

    @model_validator(mode="after")
    def _prefix(self) -> OutsideRule:
        if not self.id.startswith(self.kind + "."):
            raise ValueError(f"id {self.id!r} must start with its kind {self.kind!r}.")
        return self

    def line_ok(self, line: str) -> bool:
        return not any(_compiled(p, False).search(line) for p in self.unless)

    def fires_on(self, text: str) -> bool:
        """Whether any line of ``text`` matches (RE2, line by line): what the inline examples check."""
        for line in text.split("\n"):
            if any(_compiled(p, False).search(line) for p in self.patterns) and self.line_ok(line):
                return True
        return False


class Vocabulary(BaseModel):
    """A generous set of words, in English and Chinese, that a kind of text always uses.

    ``domain:`` — the words of any text about training a model: a text with none of them and no training
    signature is not about training (a weekly report, a CSS question). ``trouble:`` — the words of any
    report of something going wrong: a text about training with none of them and no training signature
    reports no failure (which learning rate to pick, how to launch on two nodes). Either way
    :func:`assistant.ranking.rank` declines it, whatever its loosely similar past incidents say.
    """

    model_config = ConfigDict(extra="forbid")
    description: str
    patterns: list[str] = Field(min_length=1)
    examples: Examples

    @field_validator("patterns")
    @classmethod
    def _re2(cls, v: list[str]) -> list[str]:
        return [_check_re2(p, False) for p in v]

    def mentioned_in(self, text: str) -> bool:
        """Whether ``text`` uses any word of the vocabulary (RE2, case-insensitive)."""
        return any(_compiled(p, False).search(text) for p in self.patterns)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[OutsideRule]
    domain: Vocabulary | None = None
    trouble: Vocabulary | None = None


def load_outside(path: Path | None = None) -> tuple[OutsideRule, ...]:
    """Load ``kb/outside.yaml`` (or ``path``); a missing file means no out-of-domain signatures."""
    return tuple(_load(_path(path)).rules)


def load_domain(path: Path | None = None) -> Vocabulary | None:
    """The training vocabulary of ``kb/outside.yaml`` (``domain:``); None when the file has none."""
    return _load(_path(path)).domain


def load_trouble(path: Path | None = None) -> Vocabulary | None:
    """The vocabulary of something going wrong (``kb/outside.yaml`` ``trouble:``); None when the file has none."""
    return _load(_path(path)).trouble


def _path(path: Path | None) -> Path:
    if path is None:
        from assistant.config import KB_DIR

        path = KB_DIR / "outside.yaml"
    return Path(path)


@lru_cache(maxsize=4)
def _load(path: Path) -> _File:
    if not path.is_file():
        return _File(rules=[])
    try:
        data = _File.model_validate(load_yaml(path))
    except (ValidationError, YAMLError) as err:
        raise KnowledgeBaseError(f"invalid out-of-domain rules: {where(path, err)}") from None
    ids = [r.id for r in data.rules]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise KnowledgeBaseError(f"{path.name}: duplicate ids {sorted(dup)}")
    return data


def outside_entries(rules: tuple[OutsideRule, ...]) -> list[Entry]:
    """Scanner entries tagged ``outside:<id>``."""
    return [Entry(f"outside:{r.id}", p) for r in rules for p in r.patterns]
