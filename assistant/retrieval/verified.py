"""The embedded index as a build last verified it, so a re-ingest with nothing changed only hashes and compares.

After a build (or a full check that found the index up to date) has closed the store, still under the build
lock, ``<data_dir>/index-verified.json`` records the digest of the chunk hashes the index holds and a sha256 of
every file of the index directory and of the ONNX export. The next build computes the same from kb/records and
the files on disk: when every digest is equal, nothing changed since that check and it opens neither Chroma nor
the model. Any other state — a byte changed in any file, a file added or gone, another model, other chunks —
falls through to the full check (:func:`assistant.retrieval.index.inspect_index`), which rewrites the record.
Only the embedded index has one: a server's collection is not files here to hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assistant.retrieval.atomic import write_atomically

FORMAT = 1
NAME = "index-verified.json"
_BLOCK = 1 << 20


def record_path(data_dir: Path) -> Path:
    return Path(data_dir).expanduser() / NAME


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def chunks_digest(hashes: Mapping[str, str]) -> str:
    """One sha256 over the (chunk id, content hash) pairs."""
    return hashlib.sha256(json.dumps(sorted(hashes.items())).encode()).hexdigest()


def snapshot(chroma_dir: Path, collection: str, fingerprint: str, hashes: Mapping[str, str],
             onnx: Path | None) -> dict[str, Any] | None:
    """What the index is now: its collection, model, chunks and the sha256 of each of its files (and of the ONNX
    export, if one is used); ``None`` when the directory cannot be read."""
    try:
        if not chroma_dir.is_dir() or chroma_dir.is_symlink():
            return None
        files = {str(p.relative_to(chroma_dir)): file_sha256(p)
                 for p in sorted(chroma_dir.rglob("*")) if p.is_file() and not p.is_symlink()}
        onnx_file = {str(onnx): file_sha256(onnx)} if onnx is not None else None
    except OSError:
        return None
    return {"format": FORMAT, "location": str(chroma_dir), "collection": collection, "model_fingerprint": fingerprint,
            "chunks": chunks_digest(hashes), "files": files, "onnx": onnx_file}


def read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def write(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` atomically; failing to only costs a full check next time."""
    write_atomically(path, lambda fh: json.dump(data, fh, indent=1, sort_keys=True), prefix=".verified-", suffix=".tmp")


def remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
