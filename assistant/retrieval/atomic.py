"""Replace a file atomically: write a temporary file beside it, then rename it over the old one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def write_atomically(path: Path, write: Callable[[IO[Any]], None], *, prefix: str, suffix: str,
                     binary: bool = False) -> bool:
    """Call ``write`` on a temporary file beside ``path`` and rename it over ``path`` (mode 0644).

    Returns False when the file could not be written (read-only or full disk): for the caches that use
    this, a failure only costs work later, so it is not an error. No temporary file is left behind."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=path.parent)
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
