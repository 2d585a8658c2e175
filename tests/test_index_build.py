"""Incremental index builds: unchanged chunks are reused, changed ones re-embedded, removed ones deleted."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from retrieval_fixtures import sample_passages, sample_records

from assistant.config import Settings
from assistant.retrieval import Retriever, vector_cache
from assistant.retrieval.chunks import build_chunks
from assistant.retrieval.embeddings import default_model_dir
from assistant.retrieval.manifest import MANIFEST_NAME
from ingest.index import build_index, index_status
from kb.schema import Text

pytestmark = pytest.mark.slow


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data")


def test_first_build_then_no_change_rebuild_embeds_nothing(settings):
    records, passages = sample_records(), sample_passages()
    n = len(build_chunks(records, passages))
    messages: list[str] = []
    first = build_index(settings, records, passages, progress=messages.append)
    assert (first.chunks, first.embedded, first.reused, first.rebuilt) == (n, n, 0, True)
    assert any("building it from kb/records" in m for m in messages)
    again = build_index(settings, records, passages)
    assert (again.embedded, again.reused, again.deleted, again.rebuilt) == (0, n, 0, False)
    assert again.reason == "up to date"
    manifest = json.loads((settings.data_dir / "chroma" / MANIFEST_NAME).read_text())
    assert manifest["complete"] is True and len(manifest["chunks"]) == n
    assert index_status(settings, records, passages).state == "ok"


def test_changed_record_reembeds_only_its_changed_chunks(settings):
    records, passages = sample_records(), sample_passages()
    build_index(settings, records, passages)
    oom = records[1]
    fix = oom.fixes[0].model_copy(update={"text": Text(zh="减小 micro_batch_size 到 1", en="Reduce micro_batch_size to 1")})
    records[1] = oom.model_copy(update={"fixes": [fix, *oom.fixes[1:]]})
    assert index_status(settings, records, passages).state == "stale"
    report = build_index(settings, records, passages)
    assert (report.embedded, report.deleted, report.rebuilt) == (1, 0, False)
    hits = Retriever(settings, records, passages, progress=lambda m: None).search("micro_batch_size to 1", k=1)
    assert hits[0].id == "cuda-oom" and "to 1" in hits[0].text


def test_removed_record_is_deleted_from_the_index(settings):
    records, passages = sample_records(), sample_passages()
    build_index(settings, records, passages)
    gone = [c.id for c in build_chunks(records[-1:])]
    report = build_index(settings, records[:-1], passages)
    assert (report.embedded, report.deleted) == (0, len(gone))
    hits = Retriever(settings, records[:-1], passages, progress=lambda m: None).search("checkpoint resume", k=5)
    assert "checkpoint-corruption" not in [h.id for h in hits]


def test_model_change_rebuilds_into_a_new_collection(settings, tmp_path):
    records, passages = sample_records(), sample_passages()
    first = build_index(settings, records, passages)
    # Same weights (symlinked), one changed file: a different model as far as the index can tell.
    other = tmp_path / "other-model"
    src = default_model_dir()
    for f in src.rglob("*"):
        if f.is_file():
            dest = other / f.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(f)
    (other / "README.md").unlink()
    (other / "README.md").write_text("a different model\n")
    changed = settings.model_copy(update={"embedding_model": str(other)})
    messages: list[str] = []
    report = build_index(changed, records, passages, progress=messages.append)
    assert report.rebuilt and report.embedded == report.chunks
    assert report.collection != first.collection
    assert any("rebuilding" in m for m in messages)
    assert build_index(changed, records, passages).embedded == 0
    assert not vector_cache.cache_path(settings.data_dir, first.collection).exists()  # the other model's vectors
    assert len(vector_cache.load(vector_cache.cache_path(settings.data_dir, report.collection))) == report.chunks


def _opened(monkeypatch) -> list[str]:
    """Record each time Chroma is opened or the model embeds a text."""
    from assistant.retrieval import chroma_store, embeddings

    seen: list[str] = []
    real_client, real_embed = chroma_store.ChromaStore.client, embeddings.Embedder.embed_array

    def client(self):
        seen.append("chroma")
        return real_client(self)

    def embed_array(self, texts, progress=None):
        seen.append("model")
        return real_embed(self, texts, progress)

    monkeypatch.setattr(chroma_store.ChromaStore, "client", client)
    monkeypatch.setattr(embeddings.Embedder, "embed_array", embed_array)
    return seen


def test_unchanged_rebuild_only_hashes_and_compares(settings, monkeypatch):
    records, passages = sample_records(), sample_passages()
    first = build_index(settings, records, passages)
    seen = _opened(monkeypatch)
    again = build_index(settings, records, passages)
    assert seen == []  # neither Chroma nor the model: the chunks and the index files hash as when last verified
    assert (again.embedded, again.reused, again.deleted, again.rebuilt, again.reason) == (0, first.chunks, 0, False,
                                                                                          "up to date")
    assert again.onnx == first.onnx and not again.onnx_exported


def test_a_changed_index_file_gets_the_full_check(settings, monkeypatch):
    records, passages = sample_records(), sample_passages()
    build_index(settings, records, passages)
    manifest = settings.data_dir / "chroma" / MANIFEST_NAME
    manifest.write_text(json.dumps(json.loads(manifest.read_text())), encoding="utf-8")  # same content, other bytes
    seen = _opened(monkeypatch)
    report = build_index(settings, records, passages)
    assert "chroma" in seen and "model" not in seen
    assert (report.embedded, report.rebuilt, report.reason) == (0, False, "up to date")
    seen.clear()
    assert build_index(settings, records, passages).reason == "up to date" and seen == []  # checked again: fast


def test_rebuild_takes_unchanged_vectors_from_the_cache(settings, monkeypatch):
    from assistant.retrieval.index import KnowledgeBase

    records, passages = sample_records(), sample_passages()
    first = build_index(settings, records, passages)
    kb = KnowledgeBase.load(settings, records, passages)
    before = _stored(kb)
    shutil.rmtree(settings.data_dir / "chroma")
    seen = _opened(monkeypatch)
    report = build_index(settings, records, passages)
    assert report.rebuilt and (report.embedded, report.reused) == (0, first.chunks) and "model" not in seen
    after = _stored(kb)
    assert after.keys() == before.keys() and all((after[k] == before[k]).all() for k in before)
    hits = Retriever(settings, records, passages, progress=lambda m: None).search("CUDA out of memory", k=1)
    assert hits[0].id == "cuda-oom"


def _stored(kb) -> dict:
    store = kb.store()
    try:
        return {cid: np.asarray(v) for cid, v in store.vectors(sorted(kb.hashes)).items()}
    finally:
        store.close()


@pytest.mark.parametrize("spoil", ["garbage", "altered", "missing"])
def test_an_unusable_vector_cache_is_not_used(settings, spoil):
    records, passages = sample_records(), sample_passages()
    first = build_index(settings, records, passages)
    path = vector_cache.cache_path(settings.data_dir, first.collection)
    assert len(vector_cache.load(path)) == first.chunks
    if spoil == "garbage":
        path.write_bytes(b"PK\x03\x04 not a cache" * 50)
    elif spoil == "altered":  # a vector changed without its checksum
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        arrays["vectors"][0, 0] += 0.5
        with path.open("wb") as fh:
            np.savez(fh, **arrays)
    else:
        path.unlink()
    assert vector_cache.load(path) == {}
    shutil.rmtree(settings.data_dir / "chroma")
    report = build_index(settings, records, passages)
    assert report.rebuilt and report.embedded == report.chunks
    assert len(vector_cache.load(path)) == report.chunks  # written afresh


def test_a_lost_vector_cache_is_refilled_from_the_index(settings):
    records, passages = sample_records(), sample_passages()
    first = build_index(settings, records, passages)
    path = vector_cache.cache_path(settings.data_dir, first.collection)
    path.unlink()  # or an index built before there was a cache
    (settings.data_dir / "index-verified.json").unlink()  # so the next build runs its full check
    assert build_index(settings, records, passages).embedded == 0
    assert len(vector_cache.load(path)) == first.chunks
    shutil.rmtree(settings.data_dir / "chroma")
    assert build_index(settings, records, passages).embedded == 0
