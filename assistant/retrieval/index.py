"""Build and check the retrieval index (Chroma vectors) from ``kb/records``, incrementally.

``build_index`` embeds only chunks whose content hash (text + metadata + model) changed, deletes
chunks that are gone, and rebuilds from scratch when the index is missing, damaged, or made with
another model. The manifest (model, chunk hashes, probes) is written atomically as the last step,
so an interrupted build is detected on the next open. A build with nothing to do only hashes the chunks
and the index files and compares them with the last check (:mod:`assistant.retrieval.verified`); a rebuild
takes the vectors of unchanged chunks from the vector cache (:mod:`assistant.retrieval.vector_cache`), and
the model embeds the rest in one pass batched by token count. Usage::

    from assistant.config import Settings
    from assistant.retrieval.index import build_index      # also re-exported as ingest.index
    report = build_index(Settings())
    print(report.embedded, report.reused, report.seconds)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from assistant.cases import load_cases
from assistant.config import Settings
from assistant.errors import IndexError_
from assistant.retrieval import vector_cache, verified
from assistant.retrieval.chroma_store import (
    ChromaFailure,
    ChromaStore,
    IndexBusy,
    IndexLocation,
    build_lock,
    is_transient,
)
from assistant.retrieval.chunks import build_chunks, chunk_hash
from assistant.retrieval.embeddings import Embedder, chroma_embedding_function, resolve_model_dir
from assistant.retrieval.manifest import Manifest, ManifestError, read_manifest, remove_manifest, write_manifest
from assistant.retrieval.models import Chunk, IndexReport
from kb.schema import Passage, Record
from kb.store import load_passages, load_records

Progress = Callable[[str], None]
EMBED_BATCH = 64  # chunks per write to Chroma, and texts per call to a stand-in embedder that has only ``embed``
STORE_SLICE = 4096  # chunks embedded, then written, per step (below Chroma's ~5461 items per call)
PROGRESS_EVERY = 128  # chunks between progress messages

__all__ = ["IndexReport", "IndexStatus", "KnowledgeBase", "build_index", "index_status", "inspect_index", "manifest_stamp"]


def _quiet(_: str) -> None:
    pass


@dataclass
class KnowledgeBase:
    """Records, passages and past incidents with their chunks and per-chunk content hashes for one model."""

    records: list[Record]
    passages: list[Passage]
    chunks: list[Chunk]
    hashes: dict[str, str]
    embedder: Embedder
    loc: IndexLocation
    data_dir: Path

    @classmethod
    def load(cls, settings: Settings, records: Sequence[Record] | None = None,
             passages: Sequence[Passage] | None = None, embedder: Embedder | None = None) -> KnowledgeBase:
        """Load (or take) records and passages and chunk them; ``embedder`` defaults to the configured model."""
        recs = list(records) if records is not None else load_records(settings.records_dir)
        if passages is not None:
            pas = list(passages)
        elif records is not None:
            pas = []  # records were injected: don't mix them with passages from disk
        else:
            pas = load_passages(settings.records_dir)
        # Past incidents (kb/cases) are indexed with the knowledge base read from disk, not with injected records.
        cases = load_cases(settings.cases_dir) if records is None else []
        embedder = embedder or Embedder(resolve_model_dir(settings.embedding_model), onnx_dir(settings))
        try:
            chunks = build_chunks(recs, pas, cases)
        except ValueError as err:
            raise IndexError_(f"cannot index kb/records: {err}") from err
        hashes = {c.id: chunk_hash(c, embedder.fingerprint) for c in chunks}
        loc = IndexLocation.from_settings(settings, embedder.fingerprint)
        return cls(recs, pas, chunks, hashes, embedder, loc, Path(settings.data_dir).expanduser())

    def store(self) -> ChromaStore:
        return ChromaStore(self.loc, chroma_embedding_function(self.embedder), {c.id: c.kind for c in self.chunks})


@dataclass
class Inspection:
    state: str  # "ok" | "missing" | "damaged" | "model-changed"
    reason: str
    manifest: Manifest | None = None


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def inspect_index(kb: KnowledgeBase, store: ChromaStore, thorough: bool = False, queries: bool = False) -> Inspection:
    """Check the index against its manifest without changing it (the health check).

    Quick checks: manifest readable and complete, same model, collection opens, vector count equals
    the manifest's, probe vectors find themselves. ``queries`` also embeds a few known records' text
    afresh and expects each back as its own nearest neighbour (a damaged HNSW segment or corrupted
    stored vectors can leave the count right while neighbours are wrong). ``thorough`` also compares
    every stored hash. A locked or unreachable store raises (:class:`IndexBusy`, :class:`IndexError_`)
    instead of being called damaged: it must not be wiped for being busy.
    """
    loc = kb.loc
    if loc.mode == "embedded":
        assert loc.chroma_dir is not None
        if not loc.chroma_dir.exists() or _is_empty_dir(loc.chroma_dir):
            return Inspection("missing", f"no index at {loc.location}")
        if not loc.chroma_dir.is_dir():
            return Inspection("damaged", f"{loc.chroma_dir} is not a directory")
    try:
        manifest = read_manifest(loc.manifest_path)
    except ManifestError as err:
        if loc.mode == "server":
            try:
                present = store.exists()
            except ChromaFailure as cerr:
                return Inspection("damaged", str(cerr))
            if not present:
                return Inspection("missing", f"no collection {loc.collection} on {loc.location}")
        return Inspection("damaged", str(err))
    if not manifest.complete:
        return Inspection("damaged", "manifest says the build did not complete")
    if manifest.model_fingerprint != kb.embedder.fingerprint or manifest.collection != loc.collection:
        return Inspection("model-changed", f"index was built with {manifest.model}; the model is now {kb.embedder.model_dir}",
                          manifest)
    try:
        count = store.count()
        if count != len(manifest.chunks):
            return Inspection("damaged", f"{count} vectors stored but the manifest lists {len(manifest.chunks)}", manifest)
        bad = store.probes_ok(manifest.probes)
        if bad:
            return Inspection("damaged", bad, manifest)
        if queries:
            bad = known_records_ok(kb, store, manifest.probes)
            if bad:
                return Inspection("damaged", bad, manifest)
        if thorough and store.stored_hashes() != manifest.chunks:
            return Inspection("damaged", "stored chunk hashes differ from the manifest", manifest)
    except ChromaFailure as err:
        if is_transient(err):
            raise IndexBusy(f"the index at {loc.location} is busy ({err}); try again in a minute") from err
        return Inspection("damaged", str(err), manifest)
    return Inspection("ok", "up to date", manifest)


def known_records_ok(kb: KnowledgeBase, store: ChromaStore, ids: Sequence[str]) -> str | None:
    """``None`` if each known chunk's text, embedded now, finds that chunk first; else what went wrong."""
    by_id = {c.id: c for c in kb.chunks}
    known = [by_id[i] for i in ids if i in by_id]
    if not known:
        return None
    vectors = kb.embedder.embed([c.text for c in known])
    for chunk, vector in zip(known, vectors):
        found = store.query(vector, 3)
        if not any(cid == chunk.id and dist < 1e-3 for cid, dist in found):
            return f"a query for the known record {chunk.id} did not return it"
    return None


def manifest_stamp(loc: IndexLocation) -> tuple[int, int, int] | None:
    """Identity of the manifest file now (inode, size, mtime): changes whenever a build completes."""
    try:
        st = loc.manifest_path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def onnx_dir(settings: Settings) -> Path:
    """Where the embedding model's ONNX export is kept: beside the index, in the (always local) data dir."""
    return Path(settings.data_dir).expanduser() / "onnx"


def _export_onnx(kb: KnowledgeBase, say: Progress) -> tuple[str | None, bool]:
    """Export the model to ONNX for torch-free queries unless a usable export exists; a failure is reported, and
    queries keep using sentence-transformers."""
    export = getattr(kb.embedder, "export_onnx", None)  # a stand-in embedder (tests, benchmarks) has none
    if export is None:
        return None, False
    from assistant.retrieval.onnx_export import ExportError

    started = time.perf_counter()
    try:
        done = export()
    except ExportError as err:
        say(f"queries will embed with sentence-transformers: cannot export the model to ONNX ({err})")
        return None, False
    if done is None:
        return None, False
    path, exported = done
    if exported:
        say(f"exported the embedding model to {path} for queries ({time.perf_counter() - started:.1f} s)")
    return str(path), exported


def _probes(ids: Sequence[str]) -> list[str]:
    ordered = sorted(ids)
    if not ordered:
        return []
    return sorted({ordered[0], ordered[len(ordered) // 2], ordered[-1]})


def _embed(embedder: Embedder, texts: list[str], progress: Callable[[int], None]) -> Any:
    """float32 vectors of ``texts``: in one length-sorted pass by the model, or in batches by a stand-in embedder
    (tests, benchmarks) that has only ``embed``."""
    import numpy as np

    many = getattr(embedder, "embed_array", None)
    if many is not None:
        return np.asarray(many(texts, progress), dtype=np.float32)
    out: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        out.extend(embedder.embed(texts[start:start + EMBED_BATCH]))
        progress(len(out))
    return np.asarray(out, dtype=np.float32)


def _embed_and_store(kb: KnowledgeBase, store: ChromaStore, todo: list[Chunk], progress: Progress,
                     cached: dict[str, Any]) -> dict[str, Any]:
    """Write ``todo`` to the store, in its order; vectors come from ``cached`` (content hash -> vector) or are
    embedded now. Returns content hash -> vector of the chunks embedded now."""
    import numpy as np

    fresh: dict[str, Any] = {}
    total = sum(1 for c in todo if kb.hashes[c.id] not in cached)
    done = reported = 0

    def note(n: int) -> None:
        nonlocal reported
        if done + n == total or done + n - reported >= PROGRESS_EVERY:
            reported = done + n
            progress(f"embedded {done + n}/{total} chunks")

    # Pieces of STORE_SLICE chunks bound the memory of a huge build; ours is one piece, so one length-sorted pass.
    for start in range(0, len(todo), STORE_SLICE):
        part = todo[start:start + STORE_SLICE]
        missing = [c for c in part if kb.hashes[c.id] not in cached and kb.hashes[c.id] not in fresh]
        if missing:
            vectors = _embed(kb.embedder, [c.text for c in missing], note)
            fresh.update(zip((kb.hashes[c.id] for c in missing), vectors))
            done += len(missing)
        # Written in the chunks' order and in small calls, as always: Chroma builds its HNSW graph in the order
        # and the batches it is given, and one large call makes the graph (so the far neighbours) vary from build
        # to build.
        for first in range(0, len(part), EMBED_BATCH):
            batch = part[first:first + EMBED_BATCH]
            hashes = [kb.hashes[c.id] for c in batch]
            matrix = np.stack([fresh[h] if h in fresh else cached[h] for h in hashes])
            metas = [{**c.metadata(), "hash": h} for c, h in zip(batch, hashes)]
            store.upsert([c.id for c in batch], matrix, [c.text for c in batch], metas)
    return fresh


def _keep_vectors(kb: KnowledgeBase, store: ChromaStore, cached: dict[str, Any], fresh: dict[str, Any]) -> None:
    """Rewrite the vector cache with the vectors of every chunk now indexed (those it lacks read from the index)."""
    path = vector_cache.cache_path(kb.data_dir, kb.loc.collection)
    wanted = set(kb.hashes.values())
    if not fresh and set(cached) == wanted:
        return
    vectors = {h: v for h, v in {**cached, **fresh}.items() if h in wanted}
    lacking = [cid for cid, h in kb.hashes.items() if h not in vectors]
    if lacking:  # an index built before there was a cache, or a cache lost since: fill it from the index
        try:
            for cid, vector in store.vectors(lacking).items():
                vectors[kb.hashes[cid]] = vector
        except ChromaFailure:
            pass  # a cache with gaps only costs embedding those chunks if the index must be rebuilt
    vector_cache.save(path, vectors)


def _expected_onnx(kb: KnowledgeBase) -> Path | None:
    """The ONNX export a build of this index makes and checks (None: a stand-in embedder, or no ``onnx_dir``)."""
    onnx_dir_ = getattr(kb.embedder, "onnx_dir", None)
    if getattr(kb.embedder, "export_onnx", None) is None or onnx_dir_ is None:
        return None
    from assistant.retrieval.onnx_embed import onnx_path

    return onnx_path(onnx_dir_, kb.embedder.fingerprint)


def _snapshot(kb: KnowledgeBase, onnx: Path | None) -> dict[str, Any] | None:
    assert kb.loc.chroma_dir is not None
    return verified.snapshot(kb.loc.chroma_dir, kb.loc.collection, kb.embedder.fingerprint, kb.hashes, onnx)


def _unchanged_since_verified(kb: KnowledgeBase, started: float) -> IndexReport | None:
    """The report of a build with nothing to do when the index's files, the ONNX export and the chunks all hash as
    they did when a build last verified them (see :mod:`assistant.retrieval.verified`); else ``None``."""
    if kb.loc.mode != "embedded":
        return None
    found = verified.read(verified.record_path(kb.data_dir))
    if found is None:
        return None
    onnx = _expected_onnx(kb)
    if found != _snapshot(kb, onnx):
        return None
    loc = kb.loc
    return IndexReport(
        chunks=len(kb.chunks), embedded=0, reused=len(kb.chunks), deleted=0, rebuilt=False, reason="up to date",
        seconds=round(time.perf_counter() - started, 3), mode=loc.mode, location=loc.location,
        collection=loc.collection, model=str(kb.embedder.model_dir), onnx=str(onnx) if onnx else None,
        onnx_exported=False,
    )


def build_index(settings: Settings, records: Sequence[Record] | None = None,
                passages: Sequence[Passage] | None = None, progress: Progress | None = None,
                *, damaged: str | None = None, kb: KnowledgeBase | None = None,
                wait: float | None = None) -> IndexReport:
    """Bring the vector index up to date with ``records``/``passages`` (default: ``settings.records_dir``).

    Missing, damaged (garbage, half-written, count/manifest mismatch, Chroma errors) or other-model
    indexes are rebuilt from scratch; otherwise only changed chunks are embedded. ``progress`` gets
    one-line status messages. ``damaged`` forces a rebuild for that reason (a caller saw the index
    fail); ``kb`` reuses an already loaded :class:`KnowledgeBase`. The build holds the index's exclusive
    lock (readers hold it shared); ``wait`` gives up after that many seconds with :class:`IndexBusy`
    (a serving process repairing the index), default: wait. Raises :class:`IndexError_` if the index
    cannot be built or verified.
    """
    say = progress or _quiet
    started = time.perf_counter()
    kb = kb or KnowledgeBase.load(settings, records, passages)
    loc = kb.loc
    record = verified.record_path(kb.data_dir)
    try:
        with build_lock(loc, wait):
            if damaged is None:
                unchanged = _unchanged_since_verified(kb, started)
                if unchanged is not None:
                    return unchanged  # nothing changed since the last check: neither Chroma nor the model is loaded
            verified.remove(record)
            store = kb.store()
            try:
                report = _build_locked(kb, store, say, started, damaged)
            finally:
                store.close()
            if loc.mode == "embedded":
                # Taken after close, still under the lock: the files exactly as the next build will find them.
                snap = _snapshot(kb, Path(report.onnx) if report.onnx else None)
                if snap is not None:
                    verified.write(record, snap)
            return report
    except ChromaFailure as err:
        raise IndexError_(f"cannot build the index at {loc.location}: {err}") from err
    except OSError as err:  # unwritable data dir, disk full, ...
        raise IndexError_(f"cannot write the index at {loc.location}: {err}") from err


def _build_locked(kb: KnowledgeBase, store: ChromaStore, say: Progress, started: float,
                  damaged: str | None) -> IndexReport:
    loc = kb.loc
    onnx, onnx_exported = _export_onnx(kb, say)  # first: the documents are then embedded as queries will be
    found = Inspection("damaged", damaged) if damaged else inspect_index(kb, store, thorough=True)
    rebuilt = found.state != "ok"
    if found.state == "damaged":
        say(f"index at {loc.location} is damaged ({found.reason}); rebuilding from kb/records")
    elif found.state == "model-changed":
        say(f"{found.reason}; rebuilding the index at {loc.location}")
    elif found.state == "missing":
        say(f"{found.reason}; building it from kb/records ({len(kb.chunks)} chunks)")
    if rebuilt:
        remove_manifest(loc.manifest_path)
        store.wipe()
        stored: dict[str, str] = {}
    else:
        assert found.manifest is not None
        stored = dict(found.manifest.chunks)

    todo = [c for c in kb.chunks if stored.get(c.id) != kb.hashes[c.id]]
    gone = sorted(set(stored) - set(kb.hashes))
    changed = bool(todo or gone or rebuilt)
    # Only the model's vectors are kept: a stand-in embedder (tests, benchmarks) is cheaper to run than to cache.
    caching = getattr(kb.embedder, "embed_array", None) is not None
    cached = vector_cache.load(vector_cache.cache_path(kb.data_dir, loc.collection)) if caching else {}
    fresh: dict[str, Any] = {}
    if changed:
        remove_manifest(loc.manifest_path)  # from here until the end the index is "being changed"
        store.collection(create=True)
        if todo:
            fresh = _embed_and_store(kb, store, todo, say, cached)
        if gone:
            store.delete(gone)
        count = store.count()
        if count != len(kb.chunks):
            raise IndexError_(f"index at {loc.location} holds {count} vectors after the build, expected {len(kb.chunks)}")
        probes = _probes(list(kb.hashes))
        bad = store.probes_ok(probes)
        if bad:
            raise IndexError_(f"index at {loc.location} failed its check after the build: {bad}")
        store.drop_other_collections(loc.collection.rsplit("-", 1)[0])
        write_manifest(loc.manifest_path, Manifest(
            complete=True, mode=loc.mode, location=loc.location, collection=loc.collection,
            model=str(kb.embedder.model_dir), model_fingerprint=kb.embedder.fingerprint,
            chunks=dict(sorted(kb.hashes.items())), probes=probes,
        ))
    if caching:
        _keep_vectors(kb, store, cached, fresh)
    embedded = len(fresh)
    return IndexReport(
        chunks=len(kb.chunks), embedded=embedded, reused=len(kb.chunks) - embedded, deleted=len(gone),
        rebuilt=rebuilt,
        reason=found.reason if rebuilt else (f"{len(todo)} chunk(s) changed, {len(gone)} removed" if changed else "up to date"),
        seconds=round(time.perf_counter() - started, 3), mode=loc.mode, location=loc.location,
        collection=loc.collection, model=str(kb.embedder.model_dir), onnx=onnx, onnx_exported=onnx_exported,
    )


class IndexStatus(BaseModel):
    """What ``trainfix index status`` shows: where the index is and whether it matches kb/records."""

    model_config = ConfigDict(extra="forbid")
    state: str
    reason: str
    mode: str
    location: str
    collection: str
    model: str
    chunks_in_kb: int
    chunks_indexed: int
    stale_chunks: int


def index_status(settings: Settings, records: Sequence[Record] | None = None,
                 passages: Sequence[Passage] | None = None) -> IndexStatus:
    """Inspect the index without changing it (state: ok, stale, missing, damaged, model-changed)."""
    kb = KnowledgeBase.load(settings, records, passages)
    store = kb.store()
    try:
        found = inspect_index(kb, store)
    finally:
        store.close()
    indexed = found.manifest.chunks if found.manifest and found.state == "ok" else {}
    stale = sum(1 for cid, h in kb.hashes.items() if indexed.get(cid) != h) + len(set(indexed) - set(kb.hashes))
    state, reason = found.state, found.reason
    if state == "ok" and stale:
        state, reason = "stale", f"{stale} chunk(s) changed in kb/records since the last build"
    return IndexStatus(state=state, reason=reason, mode=kb.loc.mode, location=kb.loc.location,
                       collection=kb.loc.collection, model=str(kb.embedder.model_dir),
                       chunks_in_kb=len(kb.chunks), chunks_indexed=len(indexed), stale_chunks=stale)
