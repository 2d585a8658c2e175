"""The vectors of the indexed chunks, kept beside the index by chunk content hash: a rebuild embeds only what changed.

A chunk's content hash covers its text, its metadata and the embedding model's fingerprint
(:func:`assistant.retrieval.chunks.chunk_hash`), so a vector found here is reused only for exactly the text and
the model it was made from. The file (``<data_dir>/vectors/<collection>.npz``) is a cache, rewritten after each
build with the vectors of the chunks indexed then: a missing or unreadable one, or one whose checksum does not
match its contents, is ignored and those chunks are embedded again. It matters when the index itself must be
rebuilt (damaged, deleted) while kb/records did not change: the vectors come from here, not from the model.
Only the model's vectors are kept; a stand-in embedder (tests, benchmarks) is cheaper to run than to cache.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assistant.retrieval.atomic import write_atomically

FORMAT = 1


def cache_path(data_dir: Path, collection: str) -> Path:
    """The cache file of one collection (its name carries the model fingerprint)."""
    return Path(data_dir).expanduser() / "vectors" / f"{collection}.npz"


def _checksum(hashes: Any, vectors: Any) -> str:
    digest = hashlib.sha256(f"{FORMAT} {vectors.shape} {vectors.dtype}".encode())
    digest.update("\n".join(hashes.tolist()).encode())
    digest.update(vectors.tobytes())
    return digest.hexdigest()


def load(path: Path) -> dict[str, Any]:
    """content hash -> float32 vector; empty when there is no usable cache at ``path``."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            hashes, vectors, checksum = data["hashes"], data["vectors"], str(data["checksum"])
    except FileNotFoundError:
        return {}
    except Exception:  # noqa: BLE001 - a damaged or foreign file is a cache miss, never an error
        return {}
    if (vectors.dtype != np.float32 or vectors.ndim != 2 or hashes.ndim != 1 or len(hashes) != len(vectors)
            or _checksum(hashes, vectors) != checksum):
        return {}
    return dict(zip(hashes.tolist(), vectors))


def save(path: Path, vectors: Mapping[str, Any]) -> None:
    """Write ``vectors`` (content hash -> vector) to ``path`` atomically, replacing it and the caches of other
    collections with the same prefix (made with another model); a failure to write only costs embedding later."""
    import numpy as np

    hashes = np.array(sorted(vectors), dtype="<U64")
    matrix = (np.stack([np.asarray(vectors[h], dtype=np.float32) for h in hashes.tolist()]) if len(hashes)
              else np.zeros((0, 0), dtype=np.float32))
    written = write_atomically(
        path, lambda fh: np.savez(fh, hashes=hashes, vectors=matrix, checksum=np.array(_checksum(hashes, matrix))),
        prefix=".vectors-", suffix=".npz", binary=True)
    if not written:
        return
    prefix = path.stem.rsplit("-", 1)[0]
    with contextlib.suppress(OSError):
        for other in path.parent.glob(f"{prefix}-*.npz"):
            if other != path and other.stem.rsplit("-", 1)[0] == prefix:
                other.unlink(missing_ok=True)
