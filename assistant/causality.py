"""Root cause before symptom (``kb/causality.yaml``): order causally linked candidates.

Among evidenced failure modes, a link says which one causes the other. The cause is ranked first
(its confidence raised to the effect's) and the effect is kept as an alternative with its
confidence scaled down. ``order: earlier`` needs the cause's first evidence on an earlier line.
Also names the first failing rank when the root cause was seen on one rank before the others.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from assistant.errors import KnowledgeBaseError
from assistant.models import Candidate
from kb.taxonomy import MODE_IDS
from kb.yamlio import YAMLError, load_yaml, where


class Link(BaseModel):
    """``causes`` explain ``effects`` when both are evidenced."""

    model_config = ConfigDict(extra="forbid")
    id: str
    causes: list[str] = Field(min_length=1)
    effects: list[str] = Field(min_length=1)
    order: Literal["earlier", "any"]
    factor: float = Field(gt=0, le=1)
    why: str
    why_zh: str
    effect_cause: str | None = Field(default=None, description="cause id of the effect's mode to raise (e.g. rank-crashed)")
    cause_evidence: list[str] = Field(
        default=[], description="only the cause's evidence from these sources counts (prefixes: 'metric:', 'rule:<id>')"
    )

    @field_validator("causes", "effects")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        for m in v:
            if m not in MODE_IDS:
                raise ValueError(f"unknown failure mode {m!r}")
        return v


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    expect: list[str] = Field(min_length=1)


class Causality(BaseModel):
    """The whole ``kb/causality.yaml``."""

    model_config = ConfigDict(extra="forbid")
    links: list[Link]
    examples: list[Example] = []


def load_causality(path: Path | None = None) -> Causality:
    """Load ``kb/causality.yaml`` (or ``path``); :class:`KnowledgeBaseError` names what is wrong."""
    if path is None:
        from assistant.config import KB_DIR

        path = KB_DIR / "causality.yaml"
    return _load(Path(path))


@lru_cache(maxsize=4)
def _load(path: Path) -> Causality:
    if not path.is_file():
        return Causality(links=[])  # a knowledge base without causal links ranks by evidence alone
    try:
        return Causality.model_validate(load_yaml(path))
    except (ValidationError, YAMLError) as err:
        raise KnowledgeBaseError(f"invalid causality file: {where(path, err)}") from None


# Rules that match a person describing the failure in words, not the failure itself.
_DESCRIBED = (".description", ".plain-words")


def _first_line(c: Candidate, sources: list[str] | None = None) -> int:
    return min((e.line for e in c.evidence if not sources or e.source.startswith(tuple(sources))), default=10**12)


def apply_links(causality: Causality, candidates: list[Candidate]) -> list[tuple[Link, Candidate, Candidate]]:
    """Re-weight ``candidates`` in place by the links; returns the (link, cause, effect) triples applied."""
    by_mode = {c.failure_mode: c for c in candidates}
    applied: list[tuple[Link, Candidate, Candidate]] = []
    linked: set[frozenset[str]] = set()  # a pair is ordered by the first link that applies to it
    for link in causality.links:
        for cause_id in link.causes:
            cause = by_mode.get(cause_id)
            if cause is None:
                continue
            first = _first_line(cause, link.cause_evidence)
            if first == 10**12:
                continue  # none of the evidence this link needs
            for effect_id in link.effects:
                effect = by_mode.get(effect_id)
                if effect is None or effect is cause or frozenset((cause_id, effect_id)) in linked:
                    continue
                # when the effect is measured (a NaN in the metrics), order by that, not by a sentence above
                # the log that names it ("loss turned nan at step 1100, grad_norm kept rising before")
                measured = min((e.line for e in effect.evidence if not e.source.endswith(_DESCRIBED)), default=10**12)
                effect_first = measured if measured != 10**12 else _first_line(effect)
                if link.order == "earlier" and not first < effect_first:
                    continue
                linked.add(frozenset((cause_id, effect_id)))
                top = max(cause.confidence, effect.confidence)
                cause.confidence = round(min(0.99, top + 0.01), 3)
                effect.confidence = round(min(effect.confidence, top) * link.factor, 3)
                applied.append((link, cause, effect))
    return applied


def first_failing_rank(candidate: Candidate) -> str | None:
    """The rank whose evidence comes first, when the evidence spans several ranks."""
    ranked = [e for e in candidate.evidence if e.rank is not None]
    if not ranked:
        return None
    return min(ranked, key=lambda e: e.line).rank
