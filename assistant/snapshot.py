"""The loaded knowledge base, kept on disk between runs and invalidated by content hash.

Loading ``kb/`` from its YAML and JSON files (pydantic validation, an RE2 check of every rule
pattern, the case memory's TF-IDF index) costs most of a fresh ``trainfix diagnose``; unpickling the
loaded objects costs a few milliseconds. A snapshot's name is a sha256 over the files it was loaded
from and over the source of the modules that load them, so any edit to a rule, record, case or to
that code makes a new snapshot and an old one is never read. A snapshot that is missing, not ours
or unreadable is rebuilt from the files; failing to write one only costs the load time next run. Writing one
deletes all but the most recently used few of its kind (:func:`prune`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
FORMAT = 1
KEEP = 8  # snapshots kept per kind: a few knowledge bases and code versions in use at once
# The loaders and the classes that are pickled: assistant/retrieval/ too (it pickles its BM25 index)
_CODE = (("assistant", "*.py"), ("assistant", "retrieval/*.py"), ("kb", "*.py"), ("kb", "*.yaml"))
_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/trainfix`` (default ``~/.cache/trainfix``), shared with the Hyperscan database cache."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trainfix"


@lru_cache(maxsize=1)
def _code_hash() -> str:
    digest = hashlib.sha256(f"{FORMAT} {sys.version_info[:2]}".encode())
    for name, pattern in _CODE:
        for path in sorted((_ROOT / name).glob(pattern)):
            digest.update(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def content_hash(files: Iterable[Path]) -> str:
    """sha256 over the names and bytes of ``files`` (in the order given) and the loader code."""
    digest = hashlib.sha256(_code_hash().encode())
    for path in files:
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\0missing")
    return digest.hexdigest()


def cached(kind: str, files: Iterable[Path], build: Callable[[], T]) -> T:
    """``build()``'s result, from the snapshot for exactly these file contents when there is one."""
    return _snapshot(cache_dir() / f"kb-{kind}-{content_hash(files)[:32]}.pickle", build)


def cached_by_key(kind: str, key: str, build: Callable[[], T]) -> T:
    """``build()``'s result, from the snapshot for ``key`` (a digest of everything the value depends on besides
    the loader code) when there is one: for values built from data held in memory rather than read from files."""
    digest = hashlib.sha256(_code_hash().encode() + b"\0" + key.encode()).hexdigest()
    return _snapshot(cache_dir() / f"kb-{kind}-{digest[:32]}.pickle", build)


def _snapshot(path: Path, build: Callable[[], T]) -> T:
    found = _read(path)
    if found is not None:
        return found
    value = build()
    _write(path, value)
    return value


def _read(path: Path):
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            # Only our own regular file that nobody else can write: a snapshot is code-equivalent (pickle).
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
                return None
            value = pickle.load(handle)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a damaged or stale snapshot is rebuilt, never trusted
        return None
    touch(path)
    return value


def touch(path: Path) -> None:
    """Mark a cache file as just used (its modification time): :func:`prune` keeps the most recently used."""
    try:
        os.utime(path)
    except OSError:
        pass


def prune(path: Path, keep: int = KEEP) -> None:
    """Delete all but the ``keep`` most recently used files named like ``path`` (same prefix before the digest,
    same suffix, same length) in its directory; ``path`` itself is always kept. Every edit of the knowledge base or
    of the code makes new snapshots and Hyperscan databases: without this the cache only grows (several MB each)."""
    stem = path.stem
    prefix = stem[: stem.rfind("-") + 1]
    if not prefix:
        return
    found: list[tuple[float, Path]] = []
    try:
        for other in path.parent.iterdir():
            if (other.name != path.name and other.name.startswith(prefix) and other.suffix == path.suffix
                    and len(other.name) == len(path.name)):
                with contextlib.suppress(OSError):
                    found.append((other.stat().st_mtime, other))
    except OSError:
        return
    found.sort(reverse=True)
    for _, other in found[max(keep - 1, 0):]:
        with contextlib.suppress(OSError):
            other.unlink()


def _write(path: Path, value) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        prune(path)
    except Exception:  # noqa: BLE001 - a read-only or full cache directory only costs the load time next run
        try:
            tmp.unlink(missing_ok=True)  # type: ignore[possibly-undefined]
        except Exception:  # noqa: BLE001
            pass


def files_under(directory: Path, patterns: Iterable[str]) -> list[Path]:
    """The files matching ``patterns`` (globs, ``**`` allowed) under ``directory``, sorted."""
    out: set[Path] = set()
    for pattern in patterns:
        out.update(p for p in directory.glob(pattern) if p.is_file())
    return sorted(out)
