"""A small embedded collection is searched exactly in process (``ExactVectors``): the nearest by Chroma's own cosine
distance, filtered by kind, ties in storage order, refreshed after writes through the store."""

from __future__ import annotations

import math
import random

from retrieval_fixtures import SyntheticEmbedder

from assistant.retrieval import chroma_store
from assistant.retrieval.chroma_store import ChromaStore, ExactVectors, IndexLocation
from assistant.retrieval.embeddings import chroma_embedding_function
from assistant.retrieval.manifest import MANIFEST_NAME


def _store(tmp_path, kinds=None, name="exact-test") -> ChromaStore:
    loc = IndexLocation(mode="embedded", location=str(tmp_path / "chroma"), chroma_dir=tmp_path / "chroma",
                        manifest_path=tmp_path / "chroma" / MANIFEST_NAME, lock_path=tmp_path / "lock",
                        collection=name)
    return ChromaStore(loc, chroma_embedding_function(SyntheticEmbedder()), kinds)


def _cosine_distance(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return 1.0 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_nearest_is_brute_force_with_ties_in_order():
    rng = random.Random(3)
    vectors = [[rng.gauss(0, 1) for _ in range(8)] for _ in range(60)]
    vectors[10] = list(vectors[3])  # an exact tie: storage order decides
    vectors[40] = [2 * x for x in vectors[3]]  # same direction, other length: the same cosine distance
    kinds = [rng.choice(["record", "case", "passage"]) for _ in vectors]
    exact = ExactVectors([f"v{i}" for i in range(60)], vectors, kinds)
    for q in [vectors[3]] + [[rng.gauss(0, 1) for _ in range(8)] for _ in range(20)]:
        for want_kinds in (None, ["case"], ["record", "passage"], ["nothing"]):
            for n in (1, 5, 60, 100):
                rows = [i for i in range(60) if want_kinds is None or kinds[i] in want_kinds]
                ref = sorted(rows, key=lambda i: (round(_cosine_distance(q, vectors[i]), 9), i))[:n]
                got = exact.nearest(q, n, want_kinds)
                assert [cid for cid, _ in got] == [f"v{i}" for i in ref]
                assert all(abs(d - _cosine_distance(q, vectors[i])) < 1e-9 for (_, d), i in zip(got, ref))
    assert [cid for cid, _ in exact.nearest(vectors[3], 3)] == ["v3", "v10", "v40"]


def test_embedded_store_answers_as_chroma_does(tmp_path, monkeypatch):
    """The same neighbours and distances Chroma gives (HNSW is exact at this size), without asking Chroma."""
    texts = [f"text number {i} about {w}" for i, w in enumerate(["loss", "nan", "oom", "nccl", "disk"] * 40)]
    vectors = SyntheticEmbedder().embed(texts)
    kinds = ["record" if i % 3 else "case" for i in range(len(texts))]
    # the knowledge base knows all but the last 30 chunks: their kinds are read from the stored metadata
    store = _store(tmp_path, {f"c{i}": k for i, k in enumerate(kinds[:-30])})
    store.upsert([f"c{i}" for i in range(len(texts))], vectors, texts, [{"kind": k} for k in kinds])
    col = store.collection()
    queries = SyntheticEmbedder().embed(["loss is nan", "out of memory", "nccl timeout"])
    expected = {}
    for qi, q in enumerate(queries):
        for want in (None, ["case"]):
            where = {"kind": {"$in": want}} if want else None
            res = col.query(query_embeddings=[list(q)], n_results=10, include=["distances"], where=where)
            expected[qi, bool(want)] = list(zip(res["ids"][0], res["distances"][0]))
    monkeypatch.setattr(type(col), "query", lambda *a, **k: (_ for _ in ()).throw(AssertionError("asked Chroma")))
    for qi, q in enumerate(queries):
        for want in (None, ["case"]):
            got = store.query(q, 10, want)
            assert [cid for cid, _ in got] == [cid for cid, _ in expected[qi, bool(want)]]
            assert all(abs(d - e) < 1e-5 for (_, d), (_, e) in zip(got, expected[qi, bool(want)]))
    assert isinstance(store._exact, ExactVectors) and len(store._exact) == len(texts)


def test_writes_through_the_store_are_seen_and_large_collections_ask_chroma(tmp_path, monkeypatch):
    store = _store(tmp_path, {"a": "record", "b": "record", "c": "record"})
    vectors = SyntheticEmbedder().embed(["a", "b", "c"])
    store.upsert(["a", "b"], vectors[:2], ["d"] * 2, [{"kind": "record"}] * 2)
    assert {cid for cid, _ in store.query(vectors[2], 5)} == {"a", "b"}
    store.upsert(["c"], vectors[2:], ["d"], [{"kind": "record"}])
    assert store.query(vectors[2], 1)[0][0] == "c"
    store.delete(["c"])
    assert {cid for cid, _ in store.query(vectors[2], 5)} == {"a", "b"}
    without_kinds = _store(tmp_path)  # a store that does not know the chunks: Chroma's own query
    assert {cid for cid, _ in without_kinds.query(vectors[2], 5)} == {"a", "b"} and without_kinds._exact is False
    monkeypatch.setattr(chroma_store, "EXACT_MAX", 1)  # more chunks than that: Chroma's own query
    big = _store(tmp_path, {"a": "record", "b": "record"})
    assert {cid for cid, _ in big.query(vectors[2], 5)} == {"a", "b"} and big._exact is False
    grown = _store(tmp_path, {"a": "record"})  # the knowledge base says one chunk, the collection holds two
    assert {cid for cid, _ in grown.query(vectors[2], 5)} == {"a", "b"} and grown._exact is False
