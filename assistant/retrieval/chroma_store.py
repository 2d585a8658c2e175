"""The vector side of the index: one Chroma collection, embedded (``PersistentClient``) or on a server.

Embedded mode keeps the index under ``<data_dir>/chroma`` with the manifest inside it; server mode
(``Settings.chroma_url``) talks to a ``chroma run`` server over HTTP and keeps the manifest locally
under ``<data_dir>/servers/``. The collection name carries the model fingerprint, so a different model
never reads vectors made by another. Every Chroma failure surfaces as :class:`ChromaFailure`.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import re2

from assistant.config import Settings
from assistant.errors import IndexError_
from assistant.retrieval.manifest import MANIFEST_NAME

# Chroma refuses batches above ~5461 items; stay well below.
SLICE = 5000
# An embedded collection of at most this many vectors is searched exactly, in process (ExactVectors): at the packaged
# knowledge base's ~2,600 chunks a query takes ~0.15 ms where Chroma's HNSW query took ~4 ms, and it returns the true
# nearest (HNSW's approximate top 50 differed past rank 14 in 34 of 600 dev queries, stop 28). The matrix is read
# whole for every query: at 12,000 vectors a query took 4-6 ms and at 20,000 5-8 ms here, no faster than HNSW, so
# larger collections, and a Chroma server, are queried through Chroma.
EXACT_MAX = 5_000
_NAME_BAD = re2.compile(r"[^A-Za-z0-9._-]+")


class ChromaFailure(Exception):
    """Chroma raised (or panicked) while opening, reading or writing the collection."""


@contextlib.contextmanager
def chroma_errors(what: str) -> Iterator[None]:
    """Turn anything Chroma raises into :class:`ChromaFailure`.

    Chroma's Rust core reports a corrupt file as a pyo3 ``PanicException``, which derives from
    ``BaseException``, not ``Exception``: catch everything except interpreter exits.
    """
    try:
        yield
    except (KeyboardInterrupt, SystemExit, GeneratorExit, IndexError_):
        raise
    except BaseException as err:  # noqa: BLE001 - see docstring
        raise ChromaFailure(f"{what}: {type(err).__name__}: {str(err)[:300]}") from err


_TRANSIENT = re2.compile(r"(?i)database is locked|database table is locked|\bbusy\b|connect(?:ion)? ?(?:error|refused|reset)"
                         r"|timed? ?out|temporarily unavailable|RemoteProtocolError")


def is_transient(err: BaseException) -> bool:
    """A store that is locked by another process or a server that is (re)starting: wait, never wipe."""
    return bool(_TRANSIENT.search(str(err)))


@dataclass(frozen=True)
class IndexLocation:
    """Where an index lives and what its collection and manifest are called."""

    mode: Literal["embedded", "server"]
    location: str  # directory (embedded) or URL (server)
    chroma_dir: Path | None
    manifest_path: Path
    lock_path: Path
    collection: str

    @classmethod
    def from_settings(cls, settings: Settings, model_fingerprint: str) -> IndexLocation:
        prefix = _NAME_BAD.sub("-", settings.collection).strip("-._") or "trainfix"
        collection = f"{prefix[:40]}-{model_fingerprint[:16]}"
        data_dir = Path(settings.data_dir).expanduser()
        if settings.chroma_url:
            url = settings.chroma_url.rstrip("/")
            slug = _NAME_BAD.sub("_", urllib.parse.urlsplit(url).netloc) or "server"
            return cls(mode="server", location=url, chroma_dir=None,
                       manifest_path=data_dir / "servers" / f"{slug}-{collection}.manifest.json",
                       lock_path=data_dir / "index.lock", collection=collection)
        chroma_dir = data_dir / "chroma"
        return cls(mode="embedded", location=str(chroma_dir), chroma_dir=chroma_dir,
                   manifest_path=chroma_dir / MANIFEST_NAME, lock_path=data_dir / "index.lock",
                   collection=collection)


class IndexBusy(IndexError_):
    """Another process holds the index lock (``trainfix ingest`` rebuilding it) longer than a reader waits."""


@contextlib.contextmanager
def _flocked(loc: IndexLocation, mode: int, wait: float | None) -> Iterator[None]:
    """Hold the index's lock file in ``mode``, waiting ``wait`` seconds at most (None: as long as it takes)."""
    loc.lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(loc.lock_path, "a") as fh:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh, mode if deadline is None else mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:  # type: ignore[operator]  # only non-blocking calls get here
                    raise IndexBusy(f"the index at {loc.location} is being rebuilt by another process "
                                    "(trainfix ingest or index build); try again in a minute") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_lock(loc: IndexLocation, wait: float | None = None) -> contextlib.AbstractContextManager[None]:
    """Exclusive lock around writes: several processes writing one Chroma directory lose vectors.

    Readers hold the same lock shared (:func:`read_lock`) while they query, so a writer never changes the
    directory under a query and a reader never sees a half-written index. ``wait``: give up after that
    many seconds with :class:`IndexBusy` (default: wait as long as it takes, as ``trainfix ingest`` does)."""
    return _flocked(loc, fcntl.LOCK_EX, wait)


def read_lock(loc: IndexLocation, wait: float = 5.0) -> contextlib.AbstractContextManager[None]:
    """Shared lock around a read: many readers at once, none while a writer holds :func:`build_lock`."""
    return _flocked(loc, fcntl.LOCK_SH, wait)


def _chroma_settings() -> Any:
    from chromadb.config import Settings as ChromaSettings

    return ChromaSettings(anonymized_telemetry=False)


class ChromaStore:
    """One collection of chunk vectors. Methods raise :class:`ChromaFailure` on any Chroma error."""

    def __init__(self, loc: IndexLocation, embedding_function: Any, kinds: Mapping[str, str] | None = None) -> None:
        """``kinds``: chunk id -> kind of every chunk the index should hold (the knowledge base knows them); with
        it, an embedded collection of at most :data:`EXACT_MAX` chunks is searched exactly in process."""
        self.loc = loc
        self._ef = embedding_function
        self._client: Any = None
        self._collection: Any = None
        self._kinds = kinds
        self._exact: ExactVectors | None | bool = None  # loaded on the first query; False: search through Chroma

    # -- connection -------------------------------------------------------------------------

    def client(self) -> Any:
        if self._client is None:
            import chromadb

            if self.loc.mode == "server":
                parts = urllib.parse.urlsplit(self.loc.location)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise IndexError_(f"TRAINFIX_CHROMA_URL {self.loc.location!r} is not an http(s)://host:port URL")
                try:
                    self._client = chromadb.HttpClient(
                        host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 8000),
                        ssl=parts.scheme == "https", settings=_chroma_settings(),
                    )
                    self._client.heartbeat()
                except Exception as err:  # connection refused, DNS, TLS: the server is not there
                    self._client = None
                    raise IndexError_(f"cannot reach the Chroma server at {self.loc.location} ({type(err).__name__}); "
                                      "is `chroma run` up?") from err
            else:
                assert self.loc.chroma_dir is not None
                self.loc.chroma_dir.mkdir(parents=True, exist_ok=True)
                try:
                    with chroma_errors(f"opening {self.loc.chroma_dir}"):
                        self._client = chromadb.PersistentClient(path=str(self.loc.chroma_dir),
                                                                 settings=_chroma_settings())
                except ChromaFailure:
                    self._forget_system()  # a failed open can leave a broken System cached for this path
                    raise
        return self._client

    def collection(self, create: bool = False) -> Any:
        """The collection; with ``create`` it is created (cosine space) when missing."""
        if self._collection is None:
            client = self.client()
            with chroma_errors(f"opening collection {self.loc.collection}"):
                if create:
                    self._collection = client.get_or_create_collection(
                        self.loc.collection, embedding_function=self._ef,
                        configuration={"hnsw": {"space": "cosine"}},
                    )
                else:
                    self._collection = client.get_collection(self.loc.collection, embedding_function=self._ef)
        return self._collection

    def close(self) -> None:
        """Release the client (embedded: the SQLite handles of this process)."""
        client, self._client, self._collection, self._exact = self._client, None, None, None
        if client is not None and self.loc.mode == "embedded":
            # close() is reference counted: other clients of this directory in the process keep working.
            with contextlib.suppress(ChromaFailure), chroma_errors("closing"):
                client.close()

    def _forget_system(self) -> None:
        # Chroma caches one System per directory for the whole process; after the directory is
        # deleted a cached System would keep writing to unlinked files, so drop it explicitly.
        from chromadb.api.shared_system_client import SharedSystemClient

        key = str(self.loc.chroma_dir)
        system = SharedSystemClient._identifier_to_system.pop(key, None)
        SharedSystemClient._identifier_to_refcount.pop(key, None)
        if system is not None:
            with contextlib.suppress(ChromaFailure), chroma_errors("stopping"):
                system.stop()

    # -- reads ------------------------------------------------------------------------------

    def exists(self) -> bool:
        client = self.client()
        with chroma_errors("listing collections"):
            return self.loc.collection in {c.name for c in client.list_collections()}

    def count(self) -> int:
        with chroma_errors("counting vectors"):
            return int(self.collection().count())

    def stored_hashes(self) -> dict[str, str]:
        """chunk id -> content hash of every stored vector."""
        col = self.collection()
        out: dict[str, str] = {}
        with chroma_errors("reading chunk metadata"):
            total = col.count()
            for offset in range(0, total, SLICE):
                got = col.get(include=["metadatas"], limit=SLICE, offset=offset)
                for cid, meta in zip(got["ids"], got["metadatas"] or []):
                    out[cid] = str((meta or {}).get("hash", ""))
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, Any]:
        """chunk id -> stored vector, for those of ``ids`` that are stored."""
        col = self.collection()
        out: dict[str, Any] = {}
        with chroma_errors("reading vectors"):
            for i in range(0, len(ids), SLICE):
                got = col.get(ids=list(ids[i:i + SLICE]), include=["embeddings"])
                vectors = got["embeddings"]
                if vectors is not None:
                    out.update(zip(got["ids"], vectors))
        return out

    def query(self, vector: Sequence[float], n: int, kinds: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk id, cosine distance) of the ``n`` nearest vectors, nearest first (only ``kinds`` if given).

        An embedded collection of at most :data:`EXACT_MAX` vectors, opened with the chunks' kinds, is read once and
        searched exactly in process (re-read after a write through this store; a rebuild by another process makes
        the retriever open a new store); anything else asks Chroma."""
        exact = self._exact_vectors()
        if exact is not None:
            return exact.nearest(vector, n, kinds)
        col = self.collection()
        where = {"kind": {"$in": list(kinds)}} if kinds else None
        with chroma_errors("querying vectors"):
            # No count() first: Chroma returns what there is for an empty collection or n beyond its size, and at
            # 100k chunks the count cost 25 ms a query (bench/results/profile-retrieval.txt).
            res = col.query(query_embeddings=[list(vector)], n_results=n, include=["distances"], where=where)
        return list(zip(res["ids"][0], (float(d) for d in res["distances"][0])))

    def _exact_vectors(self) -> ExactVectors | None:
        if self._exact is None:
            if self.loc.mode != "embedded" or self._kinds is None or len(self._kinds) > EXACT_MAX:
                self._exact = False
                return None
            col = self.collection()
            ids: list[str] = []
            vectors: list[Any] = []
            with chroma_errors("querying vectors"):
                # The vectors alone (reading the metadata too costs three times as much): kinds come from the
                # knowledge base, and from the stored metadata only for an id it does not know.
                while len(ids) <= EXACT_MAX:
                    got = col.get(include=["embeddings"], limit=SLICE, offset=len(ids))
                    if not got["ids"]:
                        break
                    ids += got["ids"]
                    vectors += list(got["embeddings"])
                if len(ids) > EXACT_MAX:
                    self._exact = False
                    return None
                kinds = dict(self._kinds)
                unknown = [cid for cid in ids if cid not in kinds]
                for i in range(0, len(unknown), SLICE):
                    got = col.get(ids=unknown[i:i + SLICE], include=["metadatas"])
                    for cid, meta in zip(got["ids"], got["metadatas"] or []):
                        kinds[cid] = str((meta or {}).get("kind", ""))
            self._exact = ExactVectors(ids, vectors, [kinds.get(cid, "") for cid in ids])
        return self._exact if isinstance(self._exact, ExactVectors) else None

    def probes_ok(self, probe_ids: Sequence[str]) -> str | None:
        """``None`` if each probe's stored vector finds the probe again; else what went wrong.

        A damaged HNSW segment can leave ``count()`` right while neighbours are wrong; this catches it.
        """
        if not probe_ids:
            return None
        col = self.collection()
        with chroma_errors("probing vectors"):
            got = col.get(ids=list(probe_ids), include=["embeddings"])
            ids, vectors = list(got["ids"]), got["embeddings"]
            if len(ids) != len(probe_ids) or vectors is None:
                return f"{len(probe_ids) - len(ids)} probe vector(s) missing"
            total = col.count()
            # HNSW is approximate, and equal vectors tie at distance 0: a probe missing from the top 5 of a large
            # index is asked again for the top 100 (a wider search), and a stored copy of its vector at distance 0
            # counts as found. A damaged segment loses vectors or returns unrelated ones, which this still catches.
            for wide in (False, True):
                res = col.query(query_embeddings=[list(map(float, v)) for v in vectors],
                                n_results=min(100 if wide else 5, total), include=["distances"])
                lost = [(pid, v) for pid, v, found, dists in zip(ids, vectors, res["ids"], res["distances"])
                        if not any(d < 1e-3 and (wide or f == pid) for f, d in zip(found, dists))]
                if not lost:
                    return None
                ids, vectors = [pid for pid, _ in lost], [v for _, v in lost]
        return f"vector of {ids[0]} no longer finds itself"

    # -- writes -----------------------------------------------------------------------------

    def upsert(self, ids: list[str], vectors: list[list[float]], documents: list[str], metadatas: list[dict]) -> None:
        self._exact = None
        col = self.collection(create=True)
        with chroma_errors("writing vectors"):
            for i in range(0, len(ids), SLICE):
                col.upsert(ids=ids[i:i + SLICE], embeddings=vectors[i:i + SLICE],
                           documents=documents[i:i + SLICE], metadatas=metadatas[i:i + SLICE])

    def delete(self, ids: list[str]) -> None:
        self._exact = None
        col = self.collection(create=True)
        with chroma_errors("deleting vectors"):
            for i in range(0, len(ids), SLICE):
                col.delete(ids=ids[i:i + SLICE])

    def wipe(self) -> None:
        """Remove the index completely (embedded: the directory; server: this collection only)."""
        self._exact = None
        if self.loc.mode == "embedded":
            self.close()
            self._forget_system()
            assert self.loc.chroma_dir is not None
            if self.loc.chroma_dir.is_dir() and not self.loc.chroma_dir.is_symlink():
                shutil.rmtree(self.loc.chroma_dir)
            else:
                self.loc.chroma_dir.unlink(missing_ok=True)
            return
        self.loc.manifest_path.unlink(missing_ok=True)
        client = self.client()
        self._collection = None
        with chroma_errors(f"deleting collection {self.loc.collection}"):
            if self.loc.collection in {c.name for c in client.list_collections()}:
                client.delete_collection(self.loc.collection)

    def drop_other_collections(self, prefix: str) -> list[str]:
        """Embedded mode: delete collections made with another model (same prefix, other fingerprint)."""
        if self.loc.mode != "embedded":
            return []  # a shared server may hold other users' collections: leave them alone
        client = self.client()
        dropped = []
        with chroma_errors("listing collections"):
            for c in client.list_collections():
                if c.name != self.loc.collection and c.name.startswith(prefix + "-"):
                    client.delete_collection(c.name)
                    dropped.append(c.name)
        return dropped


class ExactVectors:
    """Every vector of a small collection in one matrix: the exact nearest by cosine distance, as Chroma's cosine
    space defines it (1 - cosine similarity), ties in storage order."""

    def __init__(self, ids: Sequence[str], vectors: Sequence[Any], kinds: Sequence[str]) -> None:
        import numpy as np

        matrix = np.asarray(vectors, dtype=np.float64) if len(ids) else np.zeros((0, 1))
        norms = np.linalg.norm(matrix, axis=1)
        self._matrix = matrix / np.where(norms > 0, norms, 1.0)[:, None]
        self._ids = list(ids)
        self._kinds = np.asarray(kinds, dtype=object)
        self._rows: dict[frozenset[str], Any] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def nearest(self, vector: Sequence[float], n: int, kinds: Sequence[str] | None = None) -> list[tuple[str, float]]:
        import numpy as np

        if not self._ids or n <= 0:
            return []
        query = np.asarray(vector, dtype=np.float64)
        norm = np.linalg.norm(query)
        distances = 1.0 - self._matrix @ (query / norm if norm > 0 else query)
        if kinds:
            key = frozenset(kinds)
            rows = self._rows.get(key)
            if rows is None:
                rows = self._rows[key] = np.flatnonzero(np.isin(self._kinds, list(key)))
            distances_of = distances[rows]
        else:
            rows, distances_of = None, distances
        if not len(distances_of):
            return []
        if n < len(distances_of):
            kth = np.partition(distances_of, n - 1)[n - 1]  # the n-th smallest: all below it, then ties in order
            below = np.flatnonzero(distances_of < kth)
            top = np.concatenate((below, np.flatnonzero(distances_of == kth)[: n - len(below)]))
            top = top[np.lexsort((top, distances_of[top]))]
        else:
            top = np.lexsort((np.arange(len(distances_of)), distances_of))
        picked = top if rows is None else rows[top]
        return [(self._ids[i], float(distances[i])) for i in picked.tolist()]
