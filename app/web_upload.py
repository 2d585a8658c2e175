"""Uploaded logs for the web chat: checked (type, size, text), decompressed, triaged with progress, then deleted.

Nothing uploaded outlives its triage: :func:`prepared` removes the upload (and any decompressed copy)
when its ``with`` block ends, whatever happened inside.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from assistant.errors import InputError

EXTENSIONS = (".log", ".txt", ".out", ".err", ".json", ".jsonl")
ACCEPTED = (*EXTENSIONS, *(e + ".gz" for e in EXTENSIONS), ".gz")
GZ_EXPANSION = 4  # a .gz may expand to this many times the upload limit, no more (zip-bomb guard)
SNIFF_BYTES = 8192
BINARY_SHARE = 0.3  # above this share of NUL / undecodable bytes in the first 8 KiB, it is not a log
POLL_SECONDS = 0.4
MIB = 1024 * 1024


@dataclass
class Upload:
    """A checked upload, ready to triage: ``path`` is plain text (decompressed if it was a .gz)."""

    name: str
    path: Path
    size: int  # bytes to triage (after decompression)
    uploaded: int  # bytes uploaded


def mib(n: float) -> str:
    """``n`` bytes as ``"12.3 MiB"`` (``"5.2 KiB"`` below one MiB)."""
    return f"{n / MIB:,.1f} MiB" if n >= MIB else f"{n / 1024:,.1f} KiB"


def check_name(name: str) -> None:
    """Refuse file types that are not logs, before reading anything."""
    if not name.lower().endswith(ACCEPTED):
        raise InputError(f"{name}: not a log file — upload {', '.join(EXTENSIONS)} (or the same gzipped, .gz)")


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    utf16 = head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))  # a PowerShell log: the triage decodes it
    if b"\x00" in head and not utf16:
        return True
    text = head[: len(head) // 2 * 2].decode("utf-16", errors="replace") if utf16 else head.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    # A multi-byte character cut at the 8 KiB boundary is not a sign of binary data.
    return bad > 3 and bad > BINARY_SHARE * len(text)


def copy_capped(src, out, cap: int, too_large: str) -> int:
    """Copy ``src`` (a binary reader) to ``out`` in MiB chunks; :class:`InputError` ``too_large`` as soon as
    more than ``cap`` bytes have come, so an oversized input is never held whole."""
    total = 0
    while chunk := src.read(MIB):
        total += len(chunk)
        if total > cap:
            raise InputError(too_large)
        out.write(chunk)
    return total


def _gunzip(src: Path, dest: Path, cap: int) -> int:
    try:
        with gzip.open(src, "rb") as zin, dest.open("wb") as out:
            return copy_capped(zin, out, cap, f"{src.name} expands to more than {mib(cap)}: too large to triage "
                                              "here; run `trainfix diagnose FILE` on your machine instead")
    except (OSError, EOFError) as err:  # gzip.BadGzipFile is an OSError
        raise InputError(f"{src.name}: not a readable .gz file ({err})") from None


@contextlib.contextmanager
def prepared(path: str | Path, name: str, limit: int) -> Iterator[Upload]:
    """Check an uploaded file and yield it ready to triage; the upload and any copy are deleted afterwards."""
    path = Path(path)
    workdir: Path | None = None
    try:
        check_name(name)
        size = path.stat().st_size
        if size > limit:
            raise InputError(f"{name} is {mib(size)}, over the upload limit of {mib(limit)}. "
                             "Upload the last part of the log (e.g. `tail -c 50M train.log > tail.log`) "
                             "or run `trainfix diagnose train.log` locally")
        if size == 0:
            raise InputError(f"{name} is empty: nothing to diagnose")
        target, expanded = path, size
        with path.open("rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        if gz:
            workdir = Path(tempfile.mkdtemp(prefix="trainfix-upload-"))
            target = workdir / Path(name).with_suffix("").name
            expanded = _gunzip(path, target, GZ_EXPANSION * limit)
        with target.open("rb") as fh:
            if _looks_binary(fh.read(SNIFF_BYTES)):
                raise InputError(f"{name} looks like a binary file, not a text log: nothing was diagnosed")
        yield Upload(name=name, path=target, size=expanded, uploaded=size)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # Gradio keeps each upload in a directory of its own; remove it when empty
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def read_position(path: Path) -> int | None:
    """How far this process has read ``path`` (Linux ``/proc/self/fdinfo``), or None when unknown."""
    fd_dir = Path("/proc/self/fd")
    try:
        target = str(path.resolve())
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                if os.readlink(fd_dir / fd) == target:
                    for line in (Path("/proc/self/fdinfo") / fd).read_text().splitlines():
                        if line.startswith("pos:"):
                            return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Progress:
    """Triage still running: bytes read so far (None when unknown) and seconds elapsed."""

    read: int | None
    total: int
    elapsed: float


def run_with_progress(fn: Callable[[], object], path: Path, total: int) -> Iterator[Progress | object]:
    """Run ``fn`` in a thread; yield :class:`Progress` while it reads ``path``, then its result (or raise its error)."""
    result: dict[str, object] = {}

    def work() -> None:
        try:
            result["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed back to the caller's thread below
            result["error"] = err

    started = time.monotonic()
    thread = threading.Thread(target=work, name="trainfix-triage", daemon=True)
    thread.start()
    while True:
        thread.join(POLL_SECONDS)
        if not thread.is_alive():
            break
        yield Progress(read=read_position(path), total=total, elapsed=time.monotonic() - started)
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    yield result["value"]
