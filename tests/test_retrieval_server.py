"""Server mode against a REAL `chroma run` subprocess: same answers as the embedded index."""

from __future__ import annotations

import pytest
from retrieval_fixtures import ChromaServer, sample_passages, sample_records

from assistant.config import Settings
from assistant.errors import IndexError_
from assistant.retrieval import Retriever
from ingest.index import build_index

pytestmark = pytest.mark.slow

QUERIES = ["CUDA out of memory", "显存不足怎么办", "loss becomes nan with fp16", "NCCL 超时 训练挂起",
           "find_unused_parameters", "checkpoint 加载报错", "learning rate too high"]


def test_server_mode_matches_embedded_mode(tmp_path):
    records, passages = sample_records(), sample_passages()
    embedded = Settings(data_dir=tmp_path / "embedded")
    build_index(embedded, records, passages)
    local = Retriever(embedded, records, passages, progress=lambda m: None)
    expected = {q: [h.id for h in local.search(q, k=3)] for q in QUERIES}
    local.close()

    with ChromaServer(tmp_path / "server") as server:
        remote = Settings(data_dir=tmp_path / "client", chroma_url=server.url)
        first = build_index(remote, records, passages)
        assert first.mode == "server" and first.location == server.url and first.embedded == first.chunks
        assert build_index(remote, records, passages).embedded == 0
        retriever = Retriever(remote, records, passages, progress=lambda m: None)
        got = {q: [h.id for h in retriever.search(q, k=3)] for q in QUERIES}
        retriever.close()
        # The server persisted the vectors: a fresh client with no local manifest re-verifies and
        # rebuilds the collection instead of trusting it blindly, and still answers the same.
        fresh = Settings(data_dir=tmp_path / "client2", chroma_url=server.url)
        again = Retriever(fresh, records, passages, progress=lambda m: None)
        assert [h.id for h in again.search(QUERIES[0], k=3)] == expected[QUERIES[0]]
    assert got == expected


def test_unreachable_server_is_a_clear_error(tmp_path):
    from retrieval_fixtures import refusing_port

    with refusing_port() as port:  # held for the whole test: nothing else can start listening on it
        settings = Settings(data_dir=tmp_path / "d", chroma_url=f"http://127.0.0.1:{port}")
        with pytest.raises(IndexError_, match="cannot reach the Chroma server"):
            build_index(settings, sample_records(), sample_passages())


def test_a_restarting_server_is_reported_while_down_and_used_again_when_back(tmp_path):
    records, passages = sample_records(), sample_passages()
    with ChromaServer(tmp_path / "server") as server:
        settings = Settings(data_dir=tmp_path / "client", chroma_url=server.url)
        build_index(settings, records, passages)
        retriever = Retriever(settings, records, passages, progress=lambda m: None)
        before = {q: [h.id for h in retriever.search(q, k=3)] for q in QUERIES[:2]}

        server.stop()
        with pytest.raises(IndexError_, match="Chroma server|not answering"):
            retriever.search(QUERIES[0], k=3)  # reported (the Assistant turns it into a notice), never rebuilt

        server.restart()  # same port, same data: the persisted collection comes back
        after = {q: [h.id for h in retriever.search(q, k=3)] for q in QUERIES[:2]}
        retriever.close()
    assert after == before
