"""Data models of the retrieval layer: chunks, hits, index build reports, evaluation results."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DocKind = Literal["record", "passage", "case"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HitCitation(_Model):
    """Where a chunk's text comes from (a 1-based inclusive line range of a file under ``kb/sources/``)."""

    source: str
    source_kind: Literal["guide", "runbook", "case"]
    section: str
    heading: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)

    def label(self) -> str:
        """Human-readable ``source §section heading, lines a–b``."""
        if self.start_line == self.end_line:
            lines = f"line {self.start_line}"
        else:
            lines = f"lines {self.start_line}–{self.end_line}"
        return f"{self.source} §{self.section} {self.heading}, {lines}"


class Chunk(_Model):
    """One indexed piece of a record or passage.

    ``text`` holds both languages (zh and en) so the English-only embedding model can find
    Chinese records through their translation, and BM25 sees the Chinese words.
    """

    id: str = Field(description="stable chunk id: '<doc id>#<field>'")
    doc_id: str = Field(description="record or passage id")
    kind: DocKind
    failure_mode: str = Field(description="the record's failure mode; '' for passages")
    failure_modes: tuple[str, ...] = Field(default=(), description="modes a passage is relevant to")
    field: str = Field(description="which part of the record: overview, symptoms:<n>, cause:<id>, fix:<n>, ...")
    lang: Literal["zh", "en", "zh+en"]
    text: str
    citation: HitCitation

    def metadata(self) -> dict[str, str | int]:
        """Flat metadata stored beside the vector (Chroma accepts only scalars)."""
        c = self.citation
        return {
            "doc_id": self.doc_id,
            "kind": self.kind,
            "failure_mode": self.failure_mode,
            "failure_modes": ",".join(self.failure_modes),
            "field": self.field,
            "lang": self.lang,
            "source": c.source,
            "source_kind": c.source_kind,
            "section": c.section,
            "heading": c.heading,
            "start_line": c.start_line,
            "end_line": c.end_line,
        }


class Hit(_Model):
    """One retrieved record or passage, ranked by reciprocal-rank fusion of vector and BM25 search.

    ``vector_rank`` / ``bm25_rank`` are the 1-based ranks of this document in each list (``None`` when
    that list did not return it); ``text``/``field``/``citation`` describe the best-matching chunk.
    """

    id: str
    kind: DocKind
    failure_mode: str | None = Field(description="the record's mode; for a passage its first relevant mode, if any")
    score: float
    vector_rank: int | None
    bm25_rank: int | None
    text: str
    field: str
    citation: HitCitation


class IndexReport(_Model):
    """What one ``build_index`` run did."""

    chunks: int = Field(description="chunks in the index after the build")
    embedded: int = Field(description="chunks (re-)embedded in this run")
    reused: int = Field(description="chunks kept because their content hash was unchanged")
    deleted: int = Field(description="chunks removed because their record/passage part is gone")
    rebuilt: bool = Field(description="the index was rebuilt from scratch (new, damaged, or model changed)")
    reason: str = Field(description="why it was (re)built, or 'up to date'")
    seconds: float
    mode: Literal["embedded", "server"]
    location: str = Field(description="index directory or Chroma server URL")
    collection: str
    model: str = Field(description="embedding model directory")
    onnx: str | None = Field(default=None, description="the model's ONNX export used for queries (None: sentence-transformers)")
    onnx_exported: bool = Field(default=False, description="the ONNX export was (re)made in this run")


class QueryCase(_Model):
    """One labelled retrieval query (a line of ``tests/data/retrieval_queries.jsonl``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str | None = None
    text: str
    labels: list[str] = Field(min_length=1, description="acceptable record/passage ids (or failure-mode ids)")
    lang: str | None = None


class QueryResult(_Model):
    id: str | None
    text: str
    lang: str | None
    labels: list[str]
    ranked: list[str] = Field(description="ids of the returned hits, best first")
    rank: int | None = Field(description="1-based rank of the first acceptable hit; None = missed")


class EvalReport(_Model):
    """Recall@1, recall@3 and mean reciprocal rank over a labelled query set."""

    queries: int
    k: int
    recall_at_1: float
    recall_at_3: float
    mrr: float
    by_lang: dict[str, dict[str, float]]
    misses: list[QueryResult] = Field(description="queries whose first acceptable hit was not ranked 1")
