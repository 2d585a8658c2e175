"""LangChain adapter: :class:`TrainfixRetriever`, a ``BaseRetriever`` over the trainfix hybrid search.

Each ``Document`` is one record or passage: ``page_content`` is the best-matching chunk's text and
``metadata`` holds the id, kind, failure mode, fused score, ranks and the citation fields.

Usage::

    from assistant.config import Settings
    from assistant.retrieval.langchain import TrainfixRetriever

    retriever = TrainfixRetriever.from_settings(Settings(), k=3)
    for doc in retriever.invoke("CUDA out of memory during backward"):
        print(doc.metadata["id"], doc.metadata["citation"])
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from assistant.config import Settings
from assistant.retrieval.models import Hit
from assistant.retrieval.retriever import Retriever


def hit_to_document(hit: Hit) -> Document:
    """A LangChain ``Document`` for one hit, with flat (vector-store friendly) metadata."""
    c = hit.citation
    return Document(
        page_content=hit.text,
        metadata={
            "id": hit.id, "kind": hit.kind, "failure_mode": hit.failure_mode or "", "score": hit.score,
            "vector_rank": hit.vector_rank, "bm25_rank": hit.bm25_rank, "field": hit.field,
            "source": c.source, "source_kind": c.source_kind, "section": c.section, "heading": c.heading,
            "start_line": c.start_line, "end_line": c.end_line, "citation": c.label(),
        },
    )


class TrainfixRetriever(BaseRetriever):
    """Returns the ``k`` best records/passages for a query as ``Document`` objects (see module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Retriever = Field(description="the trainfix hybrid retriever doing the search")
    k: int = Field(default=5, ge=1)

    @classmethod
    def from_settings(cls, settings: Settings | None = None, k: int = 5, **kwargs: Any) -> TrainfixRetriever:
        """A retriever over the index described by ``settings`` (default: ``Settings()``)."""
        return cls(retriever=Retriever(settings or Settings(), **kwargs), k=k)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [hit_to_document(h) for h in self.retriever.search(query, k=self.k)]
