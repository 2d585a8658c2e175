"""Follow a growing log file (like ``tail -F``) or a pipe, yielding new bytes as they arrive.

A file is followed across **rotation** (a new file appears at the path: the rest of the old one is read
first, then the new one from its start) and **truncation** (the file shrinks: it is read again from its
start). Nothing is ever re-read otherwise, and only one read buffer is held. Waiting uses
``stop.wait(poll)``, so a caller (or a test) ends the loop at once by setting ``stop``.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from assistant.errors import InputError

READ_SIZE = 1024 * 1024


@dataclass(frozen=True)
class Event:
    """``data``: new bytes; ``idle``: nothing new for now; ``rotated`` / ``truncated`` / ``waiting``: a notice."""

    kind: Literal["data", "idle", "rotated", "truncated", "waiting"]
    data: bytes = b""


def follow_file(path: str | Path, stop: threading.Event, *, poll: float = 0.5, from_end: bool = False,
                read_size: int = READ_SIZE) -> Iterator[Event]:
    """Events for the file at ``path`` until ``stop`` is set (it may not exist yet: it is waited for)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a log file")
    handle: BinaryIO | None = None
    announced = False
    try:
        while not stop.is_set():
            if handle is None:
                handle = _open(path)
                if handle is None:
                    if not announced:
                        announced = True
                        yield Event("waiting")
                    stop.wait(poll)
                    continue
                if from_end:
                    handle.seek(0, os.SEEK_END)
                    from_end = False
            data = handle.read(read_size)
            if data:
                yield Event("data", data)
                continue
            # At the end of what is there: has the file been replaced or cut?
            try:
                st = path.stat()
            except FileNotFoundError:
                st = None  # moved away, the new one not created yet: keep the old one open meanwhile
            except PermissionError as err:
                raise InputError(f"permission denied reading {path}") from err
            mine = os.fstat(handle.fileno())
            if st is not None and (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev):
                rest = handle.read()  # written to the old file between our last read and the rotation
                if rest:
                    yield Event("data", rest)
                handle.close()
                handle = _open(path)
                yield Event("rotated")
                continue
            if st is not None and st.st_size < handle.tell():
                handle.seek(0)
                yield Event("truncated")
                continue
            yield Event("idle")
            stop.wait(poll)
    finally:
        if handle is not None:
            handle.close()


def _open(path: Path) -> BinaryIO | None:
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None
    except PermissionError:
        raise InputError(f"permission denied reading {path}") from None


def follow_stream(fd: int, stop: threading.Event, *, poll: float = 0.5, read_size: int = READ_SIZE) -> Iterator[Event]:
    """Events for a pipe or terminal (stdin) until end of input or ``stop``: ``idle`` when nothing came for ``poll``."""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], poll)
        if not ready:
            yield Event("idle")
            continue
        data = os.read(fd, read_size)
        if not data:
            return
        yield Event("data", data)
