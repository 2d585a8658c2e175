"""Result models of the rule-first triage (``assistant.triage.triage``).

All models forbid unknown fields. Line numbers are 1-based and refer to the input as the user
gave it (before any cleanup), so a front-end can point at the exact line.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assistant.timeline import Timeline

Strength = Literal["strong", "medium", "weak"]


class _Model(BaseModel):
    # A NaN or infinite value (a NaN loss) is written as "NaN"/"Infinity" in JSON, which reads back; the
    # default (null) would not validate as a float when a stored answer is loaded again.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class Evidence(_Model):
    """One input line that supports a candidate."""

    line: int = Field(ge=1, description="1-based line number in the input as given")
    text: str = Field(description="the line after ANSI / carriage-return cleanup (truncated if very long)")
    match: str = Field(description="the matched substring, or the metric value that triggered a finding")
    source: str = Field(description="'rule:<rule id>' or 'metric:<finding kind>'")
    rank: str | None = Field(default=None, description="distributed rank when the line carried a rank prefix")
    strength: Strength


class RankedCause(_Model):
    """A root cause (id from the knowledge base) with a 0–1 score and the reasons for it.

    ``reasons_zh`` holds the same reasons in Chinese, in the same order as ``reasons``.
    """

    cause_id: str
    score: float = Field(ge=0.0, le=1.0)
    reasons: list[str] = []
    reasons_zh: list[str] = Field(default=[], description="the reasons in Chinese, parallel to reasons")


class Candidate(_Model):
    """A failure mode the input points to, with its evidence and ranked causes."""

    failure_mode: str
    confidence: float = Field(ge=0.0, le=1.0)
    evidence: list[Evidence] = []
    causes: list[RankedCause] = []
    route: Literal["rule", "metrics"]
    root_of: list[str] = Field(default=[], description="evidenced modes this one causes (ranked below it)")
    note: str | None = Field(default=None, description="why it is ranked as the root cause")
    note_zh: str | None = None


class OutsideHit(_Model):
    """A line matching an out-of-domain signature (``kb/outside.yaml``): install, access, usage, quality."""

    id: str
    kind: str
    strength: Strength
    line: int = Field(ge=1)
    text: str


class FollowUp(_Model):
    """A question whose answer would re-rank the causes; ``options`` are the accepted answers."""

    id: str
    question_en: str
    question_zh: str
    options: list[str]


class Frame(_Model):
    file: str
    line: int
    function: str


class TracebackInfo(_Model):
    """A Python traceback (the last exception of a chain) or a torchrun failure summary."""

    kind: Literal["python", "torchrun"]
    rank: str | None = None
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    exc_type: str | None = None
    message: str | None = None
    frames: list[Frame] = []
    chained: list[str] = Field(default=[], description="earlier exceptions of the chain, 'Type: message'")
    exitcode: int | None = None
    signal: str | None = None
    error_file: str | None = None
    host: str | None = None
    failed_rank: str | None = None


class SeriesPoint(_Model):
    step: float = Field(description="the logged step, or the entry's index when the log has no step")
    value: float | None = Field(description="None where the value was NaN or infinite")
    line: int = Field(description="input line it was read from")


class SeriesSummary(_Model):
    name: str
    points: int
    first_step: float | None = None
    last_step: float | None = None
    last_value: float | None = None
    median: float | None = None
    samples: list[SeriesPoint] = Field(
        default=[], description="at most 512 points, evenly thinned from the whole series (for trends and plots)")


class MetricFinding(_Model):
    """Something abnormal in a metric series, at a step and an input line."""

    kind: Literal["nan-onset", "loss-spike", "grad-explosion", "throughput-drop", "low-gpu-util"]
    series: str
    step: float | None
    line: int
    value: float
    baseline: float | None = None
    epoch: float | None = Field(default=None, description="training epoch logged on that line, if any")
    detail: str


class Reading(_Model):
    """What numbers on an input line say about this case (an OOM verdict, a token id vs the vocabulary…)."""

    kind: str
    modes: list[str] = Field(description="failure modes this reading is about")
    line: int = Field(description="input line the numbers are on (the first, when several)")
    en: str
    zh: str
    causes: dict[str, str] = Field(default={}, description="mode -> the cause these numbers point at")
    against: dict[str, str] = Field(default={}, description="mode -> a cause these numbers speak against")
    delta: float = Field(default=0.0, description="how much the pointed-at cause moves up (and the other down)")
    text: str = Field(default="", description="the input line the numbers are on, verbatim (shown as evidence)")
    why_en: str = Field(default="", description="the short reason shown next to the cause")
    why_zh: str = ""
    confidence: float = Field(default=0.0, description="> 0: the numbers alone name modes[0] with this confidence")
    act_en: str = Field(default="", description="the fix for the pointed-at cause, with this case's own values")
    act_zh: str = ""


class Trend(_Model):
    """A metric's behaviour over many steps: steady growth or decline, a period, a collapse, a precursor."""

    kind: Literal["growth", "decline", "jump", "periodic", "collapse", "precursor", "surge", "transient", "memory-growth", "data-wait"]
    series: str
    start_step: float | None = None
    end_step: float | None = None
    line: int = Field(description="input line where it starts")
    ratio: float | None = Field(default=None, description="last level / first level")
    period: float | None = Field(default=None, description="steps between recurrences")
    en: str
    zh: str


class MetricsReport(_Model):
    series: list[SeriesSummary] = []
    findings: list[MetricFinding] = []
    formats: list[str] = Field(default=[], description="log formats recognised (hf-dict, key-value, deepspeed, megatron, tqdm)")
    last_step: float | None = None
    total_steps: float | None = Field(default=None, description="planned total when a progress bar showed it")
    trends: list[Trend] = []


class Triage(_Model):
    """Result of the rule-first triage of one input."""

    candidates: list[Candidate] = []
    follow_up: list[FollowUp] = []
    abstained: bool
    metrics: MetricsReport | None = None
    tracebacks: list[TracebackInfo] = []
    facts: dict[str, str] = Field(default={}, description="what the text or the answers settled (e.g. precision=bf16)")
    notices: list[str] = []
    warnings: list[str] = []
    routes: list[str] = []
    language: Literal["zh", "en"] = "en"
    input_lines: int = 0
    outside: list[OutsideHit] = Field(default=[], description="out-of-domain signatures seen, first line first")
    digest: str = Field(default="", description="the lines that matter (all of a short input), for similarity search")
    readings: list[Reading] = Field(default=[], description="what numbers on input lines say about this case")
    causes_by_mode: dict[str, list[RankedCause]] = Field(
        default={}, description="every mode's causes ranked with this input's evidence (for candidates other stages add)")
    timeline: Timeline | None = Field(default=None, description="first failing rank and what followed, for multi-rank output")
