"""The LangChain retriever returns Documents carrying ids, scores and citation metadata."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from retrieval_fixtures import sample_passages, sample_records

from assistant.config import Settings
from assistant.retrieval.langchain import TrainfixRetriever

pytestmark = pytest.mark.slow


def test_langchain_retriever_returns_documents_with_citations(tmp_path):
    retriever = TrainfixRetriever.from_settings(
        Settings(data_dir=tmp_path / "d"), k=2,
        records=sample_records(), passages=sample_passages(), progress=lambda m: None,
    )
    docs = retriever.invoke("NCCL timeout, training hangs")
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    top = docs[0]
    assert top.metadata["id"] == "distributed-sync-failure"
    assert top.metadata["failure_mode"] == "distributed-sync-failure"
    assert top.metadata["source"] == "000_416041118514696b.txt" and top.metadata["section"] == "5"
    assert 155 <= top.metadata["start_line"] <= top.metadata["end_line"] <= 181
    assert top.metadata["citation"].startswith("000_416041118514696b.txt §5")
    assert top.metadata["score"] > docs[1].metadata["score"]
    assert "NCCL" in top.page_content
