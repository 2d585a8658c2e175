"""Chunking of records and passages, and the BM25 side of retrieval (no model, no Chroma)."""

from __future__ import annotations

import numpy as np
import pytest
from retrieval_fixtures import sample_passages, sample_records

from assistant.retrieval.bm25 import BM25Index
from assistant.retrieval.chunks import build_chunks, chunk_hash, passage_chunks, record_chunks
from kb.schema import Passage, Text


def _by_id():
    return {c.id: c for c in build_chunks(sample_records(), sample_passages())}


def test_record_is_chunked_by_field():
    nan = next(r for r in sample_records() if r.id == "nan-loss")
    fields = [c.field for c in record_chunks(nan)]
    assert fields == ["overview", "symptoms:1", "cause:fp16-overflow", "cause:lr-too-high", "diagnosis:1", "fix:1", "fix:2"]


def test_chunk_text_has_both_languages_and_the_title():
    chunk = _by_id()["nan-loss#cause:fp16-overflow"]
    assert "FP16 溢出" in chunk.text and "FP16 overflow" in chunk.text
    assert "检查是否使用 FP16 而非 BF16" in chunk.text and "instead of BF16" in chunk.text
    assert chunk.text.startswith("Loss 变为 NaN / Loss becomes NaN")
    assert chunk.lang == "zh+en"


def test_chunk_carries_citation_and_metadata():
    chunk = _by_id()["distributed-sync-failure#symptoms:1"]
    # two symptom lines of one section form one group whose citation spans both
    assert (chunk.citation.start_line, chunk.citation.end_line) == (160, 161)
    meta = chunk.metadata()
    assert meta["doc_id"] == "distributed-sync-failure" and meta["kind"] == "record"
    assert meta["failure_mode"] == "distributed-sync-failure"
    assert meta["source"] == "000_416041118514696b.txt" and meta["section"] == "5"
    assert all(isinstance(v, (str, int)) for v in meta.values())  # Chroma accepts scalars only


def test_fix_chunk_contains_its_code():
    chunk = _by_id()["distributed-sync-failure#fix:1"]
    assert "model = DDP(model, find_unused_parameters=True)" in chunk.text


def test_passage_chunks_have_empty_failure_mode_and_list_relevant_modes():
    chunk = _by_id()["guide-8-checklist#text"]
    assert chunk.kind == "passage" and chunk.failure_mode == ""
    assert chunk.metadata()["failure_modes"] == "token-out-of-range"
    assert "训练启动前" in chunk.text and "Before training" in chunk.text


def test_long_passage_is_split_on_blank_lines():
    base = sample_passages()[0]
    long_text = "\n\n".join(f"第{i}段：" + "检查数据格式。" * 40 for i in range(6))
    passage = Passage(**{**base.model_dump(), "text": long_text, "text_en": None, "id": "long"})
    chunks = passage_chunks(passage)
    assert len(chunks) > 1
    assert all(c.field.startswith("text:") for c in chunks)
    assert "".join(c.text for c in chunks).count("段：") == 6  # nothing lost, nothing repeated


def test_duplicate_ids_are_refused():
    records = sample_records()
    with pytest.raises(ValueError, match="duplicate chunk id"):
        build_chunks(records + records[:1])


def test_content_hash_depends_on_text_metadata_and_model():
    chunks = _by_id()
    chunk = chunks["cuda-oom#fix:1"]
    assert chunk_hash(chunk, "m1") == chunk_hash(chunk, "m1")
    assert chunk_hash(chunk, "m1") != chunk_hash(chunk, "m2")
    assert chunk_hash(chunk, "m1") != chunk_hash(chunk.model_copy(update={"text": chunk.text + "!"}), "m1")
    moved = chunk.model_copy(update={"citation": chunk.citation.model_copy(update={"end_line": 150})})
    assert chunk_hash(chunk, "m1") != chunk_hash(moved, "m1")


def test_same_text_in_both_languages_appears_once():
    oom = next(r for r in sample_records() if r.id == "cuda-oom")
    symptom = oom.symptoms[0].model_copy(update={"text": Text(zh="CUDA out of memory.", en="CUDA out of memory.")})
    chunk = record_chunks(oom.model_copy(update={"symptoms": [symptom]}))[1]
    assert chunk.text.count("CUDA out of memory.") == 1


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        ("显存不足", "cuda-oom"),
        ("torch.cuda.OutOfMemoryError", "cuda-oom"),
        ("out of memory", "cuda-oom"),
        ("find_unused_parameters", "distributed-sync-failure"),
        ("NCCL 超时", "distributed-sync-failure"),
        ("加载 Checkpoint 报错", "checkpoint-corruption"),
        ("学习率过高", "nan-loss"),
    ],
)
def test_bm25_finds_records_in_both_languages(query, doc):
    chunks = build_chunks(sample_records(), sample_passages())
    index = BM25Index.from_chunks(chunks)
    best, score = index.search(query, 5)[0]
    assert chunks[best].doc_id == doc and score > 0


def test_bm25_unknown_words_give_no_results():
    index = BM25Index.from_chunks(build_chunks(sample_records()))
    assert index.search("zzzqqq 嘤嘤嘤", 5) == []
    assert BM25Index([]).search("cuda", 5) == []


def test_bm25_restricted_to_some_chunks_ranks_only_those():
    chunks = build_chunks(sample_records(), sample_passages())
    index = BM25Index.from_chunks(chunks)
    every = index.search("loss nan fp16", len(chunks))
    assert len(every) > 3
    allowed = np.array([i % 2 == 0 for i in range(len(chunks))])
    some = index.search("loss nan fp16", 3, allowed)
    # The same order as ranking everything and keeping the allowed ones: only the top is cut, not re-ranked.
    assert some == [(i, s) for i, s in every if allowed[i]][:3]
    assert index.search("loss nan fp16", 3, np.zeros(len(chunks), dtype=bool)) == []


def test_bm25_ties_at_the_cut_break_by_chunk_order():
    index = BM25Index(["cuda oom"] * 10 + ["disk full"] * 5)
    got = index.search("cuda", 3)
    assert [i for i, _ in got] == [0, 1, 2] and len({s for _, s in got}) == 1
    assert [i for i, _ in index.search("cuda", 3, np.array([i % 3 == 2 for i in range(15)]))] == [2, 5, 8]


def test_bm25_repeated_query_reuses_its_scores_and_the_snapshot_holds_none():
    import pickle

    chunks = build_chunks(sample_records(), sample_passages())
    index = BM25Index.from_chunks(chunks)
    allowed = np.array([i % 2 == 0 for i in range(len(chunks))])
    texts = [c.text for c in chunks]
    fresh = [BM25Index(texts).search(q, 5, mask)  # a new index per search: nothing kept from another query
             for q, mask in (("loss nan fp16", allowed), ("loss nan fp16", None), ("cuda oom", None))]
    for _ in range(2):  # masked, then unmasked: the masked search must not change the kept scores
        assert index.search("loss nan fp16", 5, allowed) == fresh[0]
        assert index.search("loss nan fp16", 5) == fresh[1]
        assert index.search("cuda oom", 5) == fresh[2]
    assert pickle.loads(pickle.dumps(index))._last is None
