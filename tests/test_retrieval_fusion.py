"""Reciprocal-rank fusion: chunk lists collapse to documents, then ranks (not scores) are fused."""

from __future__ import annotations

import pytest

from assistant.retrieval.fusion import RRF_K, doc_ranks, rrf

DOC_OF = {"a#1": "a", "a#2": "a", "b#1": "b", "c#1": "c", "d#1": "d"}


def test_doc_ranks_use_best_chunk_and_skip_unknown():
    assert doc_ranks(["a#2", "x#9", "b#1", "a#1"], DOC_OF) == {"a": (1, "a#2"), "b": (2, "b#1")}


def test_rrf_scores_are_sum_of_reciprocal_ranks():
    fused = rrf({"vector": ["a#1", "b#1"], "bm25": ["b#1", "c#1"]}, DOC_OF)
    scores = {f.doc_id: f.score for f in fused}
    assert scores["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert scores["a"] == pytest.approx(1 / (RRF_K + 1))
    assert scores["c"] == pytest.approx(1 / (RRF_K + 2))
    assert [f.doc_id for f in fused] == ["b", "a", "c"]  # agreement of both lists wins


def test_rrf_records_ranks_per_list():
    fused = {f.doc_id: f for f in rrf({"vector": ["a#1", "b#1"], "bm25": ["b#1"]}, DOC_OF)}
    assert fused["a"].ranks == {"vector": 1}
    assert fused["b"].ranks == {"vector": 2, "bm25": 1}


def test_rrf_chunks_of_one_document_count_once_per_list():
    fused = rrf({"vector": ["a#1", "a#2", "b#1"]}, DOC_OF)
    assert [(f.doc_id, f.ranks["vector"]) for f in fused] == [("a", 1), ("b", 2)]


def test_rrf_weights_change_the_order():
    lists = {"vector": ["a#1", "c#1"], "bm25": ["c#1", "b#1"]}
    assert rrf(lists, DOC_OF)[0].doc_id == "c"
    zero_vector = rrf({"vector": ["a#1", "b#1"], "bm25": ["b#1", "a#1"]}, DOC_OF, weights={"vector": 0.0})
    assert [f.doc_id for f in zero_vector] == ["b", "a"]


def test_representative_chunk_comes_from_the_list_that_contributes_most():
    fused = {f.doc_id: f for f in rrf({"vector": ["b#1", "a#2"], "bm25": ["a#1"]}, DOC_OF)}
    assert fused["a"].best_chunk == "a#1"  # bm25 rank 1 beats vector rank 2


def test_ties_are_deterministic():
    one = rrf({"vector": ["a#1"], "bm25": ["b#1"]}, DOC_OF)
    two = rrf({"bm25": ["b#1"], "vector": ["a#1"]}, DOC_OF)
    assert [f.doc_id for f in one] == [f.doc_id for f in two] == ["a", "b"]


def test_empty_lists():
    assert rrf({"vector": [], "bm25": []}, DOC_OF) == []
