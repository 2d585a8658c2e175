"""Retrieval over the knowledge base: hybrid (Chroma vectors + BM25) search with reciprocal-rank fusion.

Public API: :class:`Retriever` (``Retriever(settings).search(query, k) -> list[Hit]``), :class:`Hit`,
:class:`HitCitation`. Importing this package does not import chromadb, sentence-transformers or torch.
"""

from assistant.retrieval.models import Hit, HitCitation, IndexReport
from assistant.retrieval.retriever import Retriever

__all__ = ["Hit", "HitCitation", "IndexReport", "Retriever"]
