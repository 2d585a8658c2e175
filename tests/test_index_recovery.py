"""A missing or damaged index is detected, reported and rebuilt: never a crash, never empty results."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from retrieval_fixtures import sample_passages, sample_records

from assistant.config import Settings
from assistant.retrieval import Retriever
from assistant.retrieval.chroma_store import ChromaFailure
from assistant.retrieval.manifest import MANIFEST_NAME
from ingest.index import build_index, index_status

pytestmark = pytest.mark.slow


def _rm_manifest(chroma):
    (chroma / MANIFEST_NAME).unlink()


def _garbage_manifest(chroma):
    (chroma / MANIFEST_NAME).write_bytes(os.urandom(300))


def _manifest_mismatch(chroma):
    path = chroma / MANIFEST_NAME
    data = json.loads(path.read_text())
    data["chunks"].pop(sorted(data["chunks"])[0])
    path.write_text(json.dumps(data))


def _half_written(chroma):
    data = json.loads((chroma / MANIFEST_NAME).read_text())
    data["complete"] = False
    (chroma / MANIFEST_NAME).write_text(json.dumps(data))


def _garbage_everywhere(chroma):
    for f in chroma.rglob("*"):
        if f.is_file():
            f.write_bytes(os.urandom(4096))


def _truncated_sqlite(chroma):
    db = chroma / "chroma.sqlite3"
    db.write_bytes(db.read_bytes()[:4096])


def _garbage_sqlite(chroma):
    (chroma / "chroma.sqlite3").write_bytes(os.urandom(64 * 1024))


def _dir_replaced_by_file(chroma):
    shutil.rmtree(chroma)
    chroma.write_bytes(b"not an index")


DAMAGE = [_rm_manifest, _garbage_manifest, _manifest_mismatch, _half_written, _garbage_everywhere,
          _truncated_sqlite, _garbage_sqlite, _dir_replaced_by_file]


@pytest.fixture
def built(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    build_index(settings, sample_records(), sample_passages())
    return settings


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_damaged_index_is_rebuilt_on_open(built, damage):
    chroma = built.data_dir / "chroma"
    damage(chroma)
    assert index_status(built, sample_records(), sample_passages()).state == "damaged"
    messages: list[str] = []
    retriever = Retriever(built, sample_records(), sample_passages(), progress=messages.append)
    hits = retriever.search("CUDA out of memory", k=3)
    assert hits and hits[0].id == "cuda-oom" and hits[0].vector_rank == 1
    assert any(m.startswith(f"index at {chroma} is damaged (") and m.endswith("rebuilding from kb/records")
               for m in messages), messages
    assert retriever.last_build is not None and retriever.last_build.rebuilt
    retriever.close()
    assert index_status(built, sample_records(), sample_passages()).state == "ok"


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_damage_after_a_verified_build_is_found_by_the_next_ingest(built, damage):
    """The next build's shortcut (nothing changed since the last check) never hides a damaged index; the rebuild
    takes the unchanged vectors from the vector cache instead of the model."""
    assert build_index(built, sample_records(), sample_passages()).reason == "up to date"
    damage(built.data_dir / "chroma")
    report = build_index(built, sample_records(), sample_passages())
    assert report.rebuilt and report.embedded == 0 and report.reused == report.chunks
    assert index_status(built, sample_records(), sample_passages()).state == "ok"
    hits = Retriever(built, sample_records(), sample_passages(), progress=lambda m: None).search("显存不足", k=1)
    assert hits[0].id == "cuda-oom"


def test_missing_directory_is_built_on_first_search(tmp_path):
    settings = Settings(data_dir=tmp_path / "never-built")
    messages: list[str] = []
    hits = Retriever(settings, sample_records(), sample_passages(), progress=messages.append).search("NCCL 超时", k=2)
    assert hits[0].id == "distributed-sync-failure"
    assert any("no index at" in m for m in messages)


def test_deleted_directory_after_build_is_rebuilt(built):
    shutil.rmtree(built.data_dir / "chroma")
    hits = Retriever(built, sample_records(), sample_passages(), progress=lambda m: None).search("checkpoint 加载报错", k=1)
    assert hits[0].id == "checkpoint-corruption"


def test_chroma_error_during_query_triggers_one_rebuild(built, monkeypatch):
    messages: list[str] = []
    retriever = Retriever(built, sample_records(), sample_passages(), progress=messages.append)
    retriever.open()
    from assistant.retrieval import chroma_store

    real_query = chroma_store.ChromaStore.query
    calls = {"n": 0}

    def flaky(self, vector, n, kinds=None):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ChromaFailure("querying vectors: InternalError: Error finding id")
        return real_query(self, vector, n, kinds)

    monkeypatch.setattr(chroma_store.ChromaStore, "query", flaky)
    hits = retriever.search("loss becomes nan", k=1)
    assert hits[0].id == "nan-loss"
    assert any("is damaged (querying vectors" in m for m in messages)
    assert retriever.last_build is not None and retriever.last_build.rebuilt


def test_persistent_chroma_failure_is_an_index_error_not_empty_results(built, monkeypatch):
    from assistant.errors import IndexError_
    from assistant.retrieval import chroma_store

    def broken(self, vector, n, kinds=None):
        raise ChromaFailure("querying vectors: boom")

    monkeypatch.setattr(chroma_store.ChromaStore, "query", broken)
    retriever = Retriever(built, sample_records(), sample_passages(), progress=lambda m: None)
    with pytest.raises(IndexError_, match="still fails after a rebuild"):
        retriever.search("CUDA out of memory")


def test_stale_index_is_updated_not_rebuilt(built):
    records = sample_records()[:-1]
    messages: list[str] = []
    retriever = Retriever(built, records, sample_passages(), progress=messages.append)
    retriever.search("checkpoint", k=1)
    assert retriever.last_build is not None
    assert not retriever.last_build.rebuilt and retriever.last_build.deleted > 0
    assert any("changed since the index" in m for m in messages)


def test_deleted_hnsw_segment_is_caught_by_the_probes(tmp_path):
    # With thousands of vectors Chroma keeps them in an HNSW segment directory; deleting it leaves
    # count() unchanged, so only the probe check (stored vector must find itself) can notice.
    from retrieval_fixtures import SyntheticEmbedder, synthetic_records

    from ingest.index import KnowledgeBase

    settings = Settings(data_dir=tmp_path / "data")
    records, embedder = synthetic_records(1500), SyntheticEmbedder()
    report = build_index(settings, records, [], kb=KnowledgeBase.load(settings, records, [], embedder=embedder))
    assert report.chunks == 3000
    segments = [d for d in (settings.data_dir / "chroma").iterdir() if d.is_dir()]
    assert segments
    for d in segments:
        shutil.rmtree(d)
    messages: list[str] = []
    retriever = Retriever(settings, records, [], progress=messages.append, embedder=embedder)
    assert retriever.search("梯度爆炸", k=2)
    assert any("is damaged (" in m for m in messages), messages
    assert retriever.last_build is not None and retriever.last_build.rebuilt


# -- one owner of the index: readers share the lock, writers hold it alone ---------------------------------


def test_reader_waits_for_a_writer_then_reports_busy(built, monkeypatch):
    from assistant.errors import IndexError_
    from assistant.retrieval import retriever as retriever_module
    from assistant.retrieval.chroma_store import IndexBusy, IndexLocation, build_lock
    from assistant.retrieval.index import KnowledgeBase

    monkeypatch.setattr(retriever_module, "READ_WAIT", 0.2)
    retriever = Retriever(built, sample_records(), sample_passages(), progress=lambda m: None)
    retriever.open()
    loc = KnowledgeBase.load(built, sample_records(), sample_passages()).loc
    assert isinstance(loc, IndexLocation)
    with build_lock(loc):  # another process (trainfix ingest) is rebuilding
        with pytest.raises(IndexBusy, match="being rebuilt by another process"):
            retriever.search("CUDA out of memory", k=1)
    assert issubclass(IndexBusy, IndexError_)
    assert retriever.search("CUDA out of memory", k=1)[0].id == "cuda-oom"  # and serves again afterwards


def test_index_rebuilt_by_another_process_is_reopened(built):
    messages: list[str] = []
    retriever = Retriever(built, sample_records(), sample_passages(), progress=messages.append)
    assert retriever.search("CUDA out of memory", k=1)[0].id == "cuda-oom"
    shutil.rmtree(built.data_dir / "chroma")  # what another process's rebuild does to the directory
    build_index(built, sample_records(), sample_passages())
    assert retriever.search("loss becomes nan", k=1)[0].id == "nan-loss"
    assert any("changed since it was opened; re-opening" in m for m in messages), messages
    assert retriever.last_build is None  # the reader did not write


def test_locked_store_mid_query_is_reported_not_wiped(built, monkeypatch):
    from assistant.errors import IndexError_
    from assistant.retrieval import chroma_store

    retriever = Retriever(built, sample_records(), sample_passages(), progress=lambda m: None)
    retriever.open()
    manifest = (built.data_dir / "chroma" / MANIFEST_NAME).read_bytes()

    def locked(self, vector, n, kinds=None):
        raise ChromaFailure("querying vectors: OperationalError: database is locked")

    monkeypatch.setattr(chroma_store.ChromaStore, "query", locked)
    with pytest.raises(IndexError_, match="not answering"):
        retriever.search("CUDA out of memory")
    assert retriever.last_build is None
    assert (built.data_dir / "chroma" / MANIFEST_NAME).read_bytes() == manifest  # nothing was rebuilt


def test_health_check_queries_known_records(built, monkeypatch):
    """Vectors that still find themselves but no longer match their text are caught by querying known records."""
    from assistant.retrieval.index import KnowledgeBase, inspect_index, known_records_ok

    kb = KnowledgeBase.load(built, sample_records(), sample_passages())
    store = kb.store()
    try:
        assert inspect_index(kb, store, queries=True).state == "ok"
        ids = sorted(kb.hashes)[:3]
        real = kb.embedder.embed
        monkeypatch.setattr(kb.embedder, "embed", lambda texts: [list(reversed(v)) for v in real(texts)])
        assert "did not return it" in (known_records_ok(kb, store, ids) or "")
        assert inspect_index(kb, store, queries=True).state == "damaged"
    finally:
        store.close()


def test_probe_check_accepts_equal_vectors_and_still_catches_wrong_neighbours(tmp_path):
    """Equal vectors tie at distance 0 (a probe can be crowded out of the top 5 by its copies): that is not
    damage. A probe whose stored vector finds nothing equal to it is."""
    from retrieval_fixtures import SyntheticEmbedder

    from assistant.retrieval.chroma_store import ChromaStore, IndexLocation
    from assistant.retrieval.embeddings import chroma_embedding_function

    loc = IndexLocation(mode="embedded", location=str(tmp_path / "chroma"), chroma_dir=tmp_path / "chroma",
                        manifest_path=tmp_path / "chroma" / MANIFEST_NAME, lock_path=tmp_path / "lock",
                        collection="probe-test")
    store = ChromaStore(loc, chroma_embedding_function(SyntheticEmbedder()))
    same = SyntheticEmbedder().embed(["one text"])[0]
    others = SyntheticEmbedder().embed([f"text {i}" for i in range(20)])
    ids = [f"dup{i}" for i in range(12)] + [f"other{i}" for i in range(20)]
    store.upsert(ids, [same] * 12 + others, ["d"] * 32, [{"kind": "record"}] * 32)
    assert store.probes_ok([f"dup{i}" for i in range(12)] + ["other3"]) is None

    real = store.collection()

    class Unrelated:  # a damaged HNSW segment: neighbours that have nothing to do with the query
        def get(self, **kw):
            return real.get(**kw)

        def count(self):
            return real.count()

        def query(self, query_embeddings, n_results, include):
            return {"ids": [[f"other{i}" for i in range(n_results)] for _ in query_embeddings],
                    "distances": [[0.5] * n_results for _ in query_embeddings]}

    store.collection = lambda create=False: Unrelated()
    assert store.probes_ok(["dup0"]) == "vector of dup0 no longer finds itself"


def test_a_query_asks_chroma_for_more_than_it_holds_without_counting_first(tmp_path, monkeypatch):
    from retrieval_fixtures import SyntheticEmbedder

    from assistant.retrieval.chroma_store import ChromaStore, IndexLocation
    from assistant.retrieval.embeddings import chroma_embedding_function

    loc = IndexLocation(mode="embedded", location=str(tmp_path / "chroma"), chroma_dir=tmp_path / "chroma",
                        manifest_path=tmp_path / "chroma" / MANIFEST_NAME, lock_path=tmp_path / "lock",
                        collection="query-test")
    store = ChromaStore(loc, chroma_embedding_function(SyntheticEmbedder()))
    vectors = SyntheticEmbedder().embed(["a", "b", "c"])
    store.upsert(["a", "b", "c"], vectors, ["d"] * 3, [{"kind": "record"}, {"kind": "record"}, {"kind": "case"}])
    col = store.collection()
    monkeypatch.setattr(type(col), "count", lambda self: pytest.fail("query must not count"))
    found = store.query(vectors[0], 50)
    assert [cid for cid, _ in found][0] == "a" and len(found) == 3
    assert [d for _, d in found] == sorted(d for _, d in found)
    assert {cid for cid, _ in store.query(vectors[0], 50, ["record"])} == {"a", "b"}
    col.delete(ids=["a", "b", "c"])
    assert store.query(vectors[0], 50) == []
