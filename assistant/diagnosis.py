"""The answer every front-end renders: :class:`Diagnosis`, built in one place (``assistant.compose``).

Text fields are already in the answer's language (``Diagnosis.language``). Citation markers are
1-based indexes into ``Diagnosis.citations`` (``cite=2`` renders as ``[2]``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assistant.models import Evidence, FollowUp, MetricsReport
from assistant.timeline import Timeline
from kb.schema import Citation

Lang = Literal["zh", "en"]
Route = Literal["rule", "metrics", "cases", "retrieval"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")  # NaN/inf read back from JSON


class CauseView(_Model):
    """A likely cause in this case, best first."""

    id: str
    text: str
    likelihood: Literal["high", "medium", "low"] | None = Field(default=None, description="as the source rates it")
    detection: str | None = Field(default=None, description="how to check for this cause")
    score: float = Field(ge=0.0, le=1.0, description="how strongly this case points at the cause")
    reasons: list[str] = Field(default=[], description="base score first, then what in the input raised or lowered it")
    cite: int = Field(ge=1)


class CodeView(_Model):
    """A code snippet to paste, verbatim from the cited source."""

    language: str
    code: str


class FixView(_Model):
    """A fix to try, in order; ``code`` is copied verbatim from the cited source."""

    priority: int = Field(ge=1)
    text: str | None = None
    code: CodeView | None = None
    cite: int = Field(ge=1)
    here: str | None = Field(default=None, description="what this fix means in this case, from the input's numbers")


class DontView(_Model):
    """Advice that only hides the problem, shown as "don't" with why (never as a fix)."""

    text: str
    why: str
    cite: int = Field(ge=1, description="the dead end's own citation")
    fixes: list[int] = Field(default=[], description="citations of the fixes it covers, moved out of the fix list")


class LeftOutView(_Model):
    """A cause or fix of the record that a fact of this case rules out."""

    kind: Literal["cause", "fix", "code"]
    text: str
    reason: str
    cite: int = Field(ge=1)


class CandidateView(_Model):
    """One failure mode the input points to, with everything needed to act on it."""

    failure_mode: str = Field(description="one of the 15 taxonomy ids")
    category: str
    title: str
    confidence: float = Field(ge=0.0, le=1.0, description="calibrated: the chance this candidate is right")
    score: float = Field(default=0.0, ge=0.0, le=1.0, description="combined score before calibration")
    route: Route = Field(description="what recognised it: signature rules, metric analysis, similar cases or retrieval")
    evidence: list[Evidence] = Field(default=[], description="input lines that prove it (line numbers into the input)")
    symptoms: list[str] = []
    causes: list[CauseView] = []
    fixes: list[FixView] = []
    diagnosis_steps: list[FixView] = Field(default=[], description="checks to run, in the source's order")
    dont: list[DontView] = Field(default=[], description="dead ends: advice that only hides this problem, with why")
    left_out: list[LeftOutView] = Field(default=[], description="causes and fixes a fact of this case rules out")
    readings: list[str] = Field(default=[], description="what the input's numbers and metric trends say about this case")
    cites: list[int] = Field(default=[], description="citations of the record's sections")
    note: str | None = Field(default=None, description="why this is the root cause of other evidenced modes")


class IncidentView(_Model):
    """A similar past incident from the case memory (``kb/cases``), with the fix that worked."""

    id: str
    title: str = Field(description="the first line of the report as posted")
    labels: list[str] = Field(description="its failure modes ([] = it was not a training failure)")
    fix: str | None = None
    link: str
    similarity: float


class PassageView(_Model):
    """A supporting (or, when abstaining, nearest) knowledge-base section."""

    id: str
    kind: Literal["record", "passage"]
    failure_mode: str | None = None
    title: str
    excerpt: str
    score: float
    cite: int = Field(ge=1)


class Diagnosis(_Model):
    """The assistant's answer to one paste or question.

    ``abstained`` is true when nothing in the knowledge base confidently matches; ``passages`` then
    holds the nearest sections, to be shown as "not a confident match", never as a diagnosis.
    """

    language: Lang
    kind: Literal["diagnosis", "answer"] = Field(
        default="diagnosis", description="'diagnosis' for a paste, 'answer' for a plain question"
    )
    candidates: list[CandidateView] = []
    abstained: bool
    follow_up: list[FollowUp] = []
    passages: list[PassageView] = []
    citations: list[Citation] = []
    healthy: bool = Field(default=False, description="a training log with metrics and no sign of any failure")
    source_titles: dict[str, str] = Field(default={}, description="cited source file -> the document's title")
    routes: list[str] = Field(default=[], description="stages that contributed, in order")
    facts: dict[str, str] = Field(default={}, description="what the input or the user's answers settled")
    answers: dict[str, str] = Field(default={}, description="follow-up answers applied to this diagnosis")
    metrics: MetricsReport | None = None
    similar: list[IncidentView] = Field(default=[], description="similar past incidents, most similar first")
    timeline: Timeline | None = Field(default=None, description="multi-rank output: first failing rank, consequences")
    out_of_domain: str | None = Field(
        default=None, description="when declining: the kind of problem it is instead (environment, access, usage…)"
    )
    out_of_domain_evidence: list[Evidence] = Field(default=[], description="input lines that show it")
    notices: list[str] = Field(default=[], description="input handling the user should know (capped, redacted…)")
    warnings: list[str] = Field(default=[], description="stages that failed; the answer is built from the rest")
    explanation: str | None = Field(
        default=None,
        description="optional LLM retelling (settings.llm_model); cites the same [n] sources as the rendered answer",
    )

    @property
    def top(self) -> CandidateView | None:
        """The best candidate, if any."""
        return self.candidates[0] if self.candidates else None
