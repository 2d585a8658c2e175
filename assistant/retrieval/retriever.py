"""Hybrid search over the knowledge base: Chroma vectors + BM25, fused with reciprocal-rank fusion."""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from assistant.config import Settings
from assistant.errors import IndexError_, InputError
from assistant.retrieval.fusion import rrf
from assistant.retrieval.models import Chunk, Hit, IndexReport

if TYPE_CHECKING:
    import numpy as np

    from assistant.retrieval.bm25 import BM25Index
    from assistant.retrieval.chroma_store import ChromaStore
    from assistant.retrieval.embeddings import Embedder
    from assistant.retrieval.index import KnowledgeBase
    from kb.schema import Passage, Record

# Candidates taken from each list before fusion (chunks, not documents).
CANDIDATES = 50
KNOWLEDGE = ("record", "passage")
MAX_EMBED_CHARS = 8000
READ_WAIT = 5.0  # seconds a query waits for a writer (trainfix ingest) before answering without retrieval
BUILD_WAIT = 2.0  # seconds a serving process waits to repair the index while another process is building it
QUERY_VECTORS = 256  # query embeddings kept per retriever
# Index size and share of wanted chunks from which a kind-restricted vector search asks Chroma unfiltered and
# filters itself (see Retriever._vector_plan); below them Chroma's own filter is cheap and is kept. Measured on
# the packaged knowledge base (2,578 chunks, 90 % past incidents): the past-incident search took 13.7 ms with
# Chroma's filter and 2.0 ms unfiltered, the same 50 nearest in 198 of 200 dev queries, and `trainfix eval` on
# the dev split printed the same report, every row (stop 28; the bound was 20,000 before).
UNFILTERED_FROM = 1_000
UNFILTERED_SHARE = 0.5


def _stderr(message: str) -> None:
    print(f"trainfix: {message}", file=sys.stderr, flush=True)


def han_fraction(text: str) -> float:
    """Share of Han characters among the letters of ``text`` (0.0 for no letters)."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for ch in letters if "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff") / len(letters)


class Retriever:
    """Search the knowledge base; the index is opened (and built or repaired if needed) on first use.

    >>> from assistant.config import Settings
    >>> hits = Retriever(Settings()).search("CUDA out of memory", k=3)   # doctest: +SKIP
    >>> hits[0].failure_mode, hits[0].citation.label()                  # doctest: +SKIP

    ``records``/``passages`` default to ``settings.records_dir``; ``progress`` receives one-line
    messages while an index is built (default: stderr); ``embedder`` replaces the configured model
    (the benchmark uses a synthetic one). A missing, stale, damaged or other-model index
    is rebuilt with a message, never used silently; :class:`IndexError_` if that fails too.
    """

    def __init__(self, settings: Settings | None = None, records: Sequence[Record] | None = None,
                 passages: Sequence[Passage] | None = None,
                 progress: Callable[[str], None] | None = None, embedder: Embedder | None = None) -> None:
        self.settings = settings or Settings()
        self._embedder = embedder
        self._records = records
        self._passages = passages
        self.progress = progress or _stderr
        self._lock = threading.RLock()
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()  # query text -> embedding (LRU)
        self._kb: KnowledgeBase | None = None
        self._store: ChromaStore | None = None
        self._bm25: BM25Index | None = None
        self._masks: dict[frozenset[str], np.ndarray] = {}  # per set of kinds (the chunks are fixed per Retriever)
        self._stamp: tuple[int, int, int] | None = None  # the manifest the open store was checked against
        self._by_id: dict[str, Chunk] = {}
        self._doc_of: dict[str, str] = {}
        self.last_build: IndexReport | None = None  # what the last (re)build this retriever triggered did

    # -- opening ----------------------------------------------------------------------------

    def open(self) -> None:
        """Load records, health-check the index and build/repair it if needed. Called by :meth:`search`.

        Reads hold the index's lock shared; a (re)build takes it exclusively in :func:`build_index`,
        waiting at most :data:`BUILD_WAIT` seconds (another process building it: :class:`IndexBusy`).
        An index rebuilt by another process since it was opened is noticed (its manifest changed) and
        re-opened, so a long-running server never queries vectors that are gone.
        """
        from assistant.retrieval.chroma_store import read_lock
        from assistant.retrieval.index import manifest_stamp

        with self._lock:
            if self._store is not None:
                assert self._kb is not None
                if manifest_stamp(self._kb.loc) == self._stamp:
                    return
                self.progress(f"the index at {self._kb.loc.location} changed since it was opened; re-opening it")
                self._drop_store()
            from assistant.retrieval.bm25 import BM25Index
            from assistant.retrieval.index import KnowledgeBase, build_index, inspect_index

            kb = self._kb or KnowledgeBase.load(self.settings, self._records, self._passages, embedder=self._embedder)
            store = kb.store()
            try:
                with read_lock(kb.loc, READ_WAIT):
                    found = inspect_index(kb, store, queries=True)
                    stamp = manifest_stamp(kb.loc)
            except BaseException:
                store.close()
                raise
            fresh = found.state == "ok" and found.manifest is not None and found.manifest.chunks == kb.hashes
            if not fresh:
                store.close()
                if found.state == "ok":
                    self.progress(f"kb/records changed since the index at {kb.loc.location} was built; updating it")
                self.last_build = build_index(self.settings, progress=self.progress, kb=kb, wait=BUILD_WAIT)
                store = kb.store()
                stamp = manifest_stamp(kb.loc)
            self._kb, self._store, self._stamp = kb, store, stamp
            self._by_id = {c.id: c for c in kb.chunks}
            self._doc_of = {c.id: c.doc_id for c in kb.chunks}
            if self._bm25 is None:
                self._bm25 = BM25Index.from_chunks(kb.chunks)

    def close(self) -> None:
        """Release the Chroma client."""
        with self._lock:
            if self._store is not None:
                self._store.close()
            self._store = None

    def _drop_store(self) -> None:
        """Forget the open client entirely (embedded: Chroma's per-directory cache too), to re-open afresh."""
        if self._store is not None:
            self._store.close()
            if self._store.loc.mode == "embedded":
                self._store._forget_system()
        self._store = None

    def _repair(self, why: str) -> None:
        from assistant.retrieval.index import build_index, manifest_stamp

        assert self._kb is not None
        self._drop_store()
        self.last_build = build_index(self.settings, progress=self.progress, damaged=why, kb=self._kb, wait=BUILD_WAIT)
        self._store = self._kb.store()
        self._stamp = manifest_stamp(self._kb.loc)

    # -- searching --------------------------------------------------------------------------

    def vector_search(self, query: str, n: int = CANDIDATES, kinds: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk id, cosine distance) of the nearest chunks (of ``kinds``).

        On a Chroma error: a locked store or an unreachable server is reported (:class:`IndexError_`),
        never wiped; a server connection is re-made once; anything else repairs the index once."""
        from assistant.retrieval.chroma_store import ChromaFailure, is_transient, read_lock

        self.open()
        assert self._kb is not None
        # The model reads only its first 256 word pieces; don't make the tokenizer walk a 10 MB paste.
        vector = self.query_vector(query)
        ask_n, ask_kinds, keep = self._vector_plan(n, kinds)
        reconnected = repaired = False
        while True:
            self.open()
            assert self._store is not None
            try:
                with read_lock(self._kb.loc, READ_WAIT):
                    found = self._store.query(vector, ask_n, ask_kinds)
            except ChromaFailure as err:
                if self._kb.loc.mode == "server" and not reconnected:
                    reconnected = True  # a restarted server: a new connection, same collection
                    self._drop_store()
                    continue
                if is_transient(err):
                    raise IndexError_(f"the index at {self._kb.loc.location} is not answering ({err})") from err
                if repaired:
                    raise IndexError_(f"the index at {self._kb.loc.location} still fails after a rebuild: {err}") from err
                repaired = True
                self._repair(str(err))
                continue
            unknown = [cid for cid, _ in found if cid not in self._by_id]
            if not unknown:
                if keep is None:
                    return found
                kept = [(cid, d) for cid, d in found if self._by_id[cid].kind in keep]
                if len(kept) >= n or len(found) < ask_n:
                    return kept[:n]
                ask_n, ask_kinds, keep = n, kinds, None  # too few of those kinds near the top: ask Chroma to filter
                continue
            if repaired:
                raise IndexError_(f"the index at {self._kb.loc.location} returns unknown chunks ({unknown[0]})")
            repaired = True
            self._repair(f"it returned {len(unknown)} chunk(s) that are not in kb/records")

    def _vector_plan(self, n: int, kinds: Sequence[str] | None) -> tuple[int, Sequence[str] | None, frozenset | None]:
        """How to ask Chroma for the ``n`` nearest chunks of ``kinds``: (how many, filter on kind, kinds to keep).

        Chroma answers a ``where`` filter on kind by walking the metadata of every chunk that passes it (at 100k
        chunks, ~0.7 s a query here, against a few ms unfiltered). When every chunk is of ``kinds`` the filter
        is dropped; in a large index where most are, the nearest few times ``n`` are asked for unfiltered and
        the others dropped, falling back to the filter when too few remain.
        """
        if not kinds:
            return n, None, None
        mask = self._kind_mask(kinds)
        share = float(mask.mean()) if len(mask) else 0.0
        if share == 1.0:
            return n, None, None
        if len(mask) >= UNFILTERED_FROM and share >= UNFILTERED_SHARE:
            return min(len(mask), math.ceil(2 * n / share)), None, frozenset(kinds)
        return n, kinds, None

    def query_vector(self, query: str) -> list[float]:
        """The query's embedding, computed once: the knowledge-base search and the past-incident search of
        one answer share it, and a repeated paste is not embedded again (bounded LRU)."""
        text = query[:MAX_EMBED_CHARS]
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                return vector
        self.open()
        assert self._kb is not None
        vector = self._kb.embedder.embed([text])[0]
        with self._lock:
            self._vectors[text] = vector
            while len(self._vectors) > QUERY_VECTORS:
                self._vectors.popitem(last=False)
        return vector

    def bm25_search(self, query: str, n: int = CANDIDATES, kinds: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk id, BM25 score) of the best lexical matches (of ``kinds``)."""
        self.open()
        assert self._bm25 is not None and self._kb is not None
        chunks = self._kb.chunks
        return [(chunks[i].id, s) for i, s in self._bm25.search(query, n, self._kind_mask(kinds) if kinds else None)]

    def _kind_mask(self, kinds: Sequence[str]) -> np.ndarray:
        """Which chunks are of ``kinds`` (one boolean per chunk), computed once per set of kinds."""
        import numpy as np

        assert self._kb is not None
        key = frozenset(kinds)
        if key not in self._masks:
            chunks = self._kb.chunks
            self._masks[key] = np.fromiter((c.kind in key for c in chunks), dtype=bool, count=len(chunks))
        return self._masks[key]

    def vector_weight(self, query: str) -> float:
        """Weight of the vector ranking for ``query``.

        The default embedding model is English-only: for a mostly-Chinese query its ranking is close
        to noise (measured in the README's retrieval table), so BM25 over jieba tokens decides and the
        vectors only break ties, unless ``Settings.retrieval_zh_vector_weight`` says otherwise.
        """
        return self.settings.retrieval_zh_vector_weight if han_fraction(query) > 0.5 else 1.0

    def search(self, query: str, k: int = 5, kinds: Sequence[str] = KNOWLEDGE) -> list[Hit]:
        """The ``k`` best documents of ``kinds`` for ``query`` (Chinese or English), best first.

        By default the knowledge base proper (records and passages); ``kinds=("case",)`` searches
        the past incidents, which are indexed beside it but never crowd it out."""
        if not query or not query.strip():
            raise InputError("empty search query")
        if k < 1:
            raise InputError(f"k must be at least 1 (got {k})")
        with self._lock:
            vec = self.vector_search(query, kinds=kinds)
            lex = self.bm25_search(query, kinds=kinds)
        weights = {"vector": self.vector_weight(query), "bm25": 1.0}
        fused = rrf({"vector": [c for c, _ in vec], "bm25": [c for c, _ in lex]}, self._doc_of, weights)
        hits = []
        for f in fused[:k]:
            chunk = self._by_id[f.best_chunk]
            mode = chunk.failure_mode or (chunk.failure_modes[0] if chunk.failure_modes else None)
            hits.append(Hit(
                id=f.doc_id, kind=chunk.kind, failure_mode=mode, score=round(f.score, 6),
                vector_rank=f.ranks.get("vector"), bm25_rank=f.ranks.get("bm25"),
                text=chunk.text, field=chunk.field, citation=chunk.citation,
            ))
        return hits
