"""The index builder, for ``trainfix ingest`` and ``trainfix index``: re-exported from its one owner,
:mod:`assistant.retrieval.index` (the core uses the same code to check and repair the index, without
``assistant`` importing ``ingest``)."""

from __future__ import annotations

from assistant.retrieval.index import (
    IndexReport,
    IndexStatus,
    KnowledgeBase,
    build_index,
    index_status,
    inspect_index,
)

__all__ = ["IndexReport", "IndexStatus", "KnowledgeBase", "build_index", "index_status", "inspect_index"]
