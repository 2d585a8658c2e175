"""The index manifest: which model and which chunk hashes an index holds, plus a "build complete" marker.

It is written atomically (temp file + ``os.replace``) as the LAST step of a build and removed as the
FIRST step of a change, so a directory whose build was interrupted has no manifest and is detected.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

FORMAT = 1
MANIFEST_NAME = "trainfix-manifest.json"


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1] = FORMAT
    complete: bool
    mode: Literal["embedded", "server"]
    location: str
    collection: str
    model: str
    model_fingerprint: str
    chunks: dict[str, str]  # chunk id -> content hash
    probes: list[str]  # chunk ids whose stored vectors must find themselves again (HNSW sanity check)


class ManifestError(Exception):
    """The manifest is missing, unreadable or not a manifest (the index must be treated as damaged)."""


def read_manifest(path: Path) -> Manifest:
    """The manifest at ``path``; :class:`ManifestError` saying why if there is no usable one."""
    if not path.is_file():
        raise ManifestError("no manifest: the build never finished")
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError) as err:
        raise ManifestError(f"unreadable manifest ({type(err).__name__})") from err


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest`` atomically (and durably) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(manifest.model_dump(mode="json"), ensure_ascii=False, indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the manifest is not secret
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_manifest(path: Path) -> None:
    """Mark the index as "being changed" before touching it."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        path.unlink()
