"""Find and read source files, rejecting unusable ones with a reason that names the file."""

from __future__ import annotations

from pathlib import Path

from assistant.errors import InputError

GUIDE_SUFFIXES = (".txt",)
RUNBOOK_SUFFIXES = (".md", ".markdown")


def list_sources(sources_dir: Path) -> list[Path]:
    """Every regular, non-hidden file in ``sources_dir`` in name order."""
    if not Path(sources_dir).is_dir():
        raise InputError(f"{sources_dir}: sources directory does not exist")
    return sorted(p for p in Path(sources_dir).iterdir() if p.is_file() and not p.name.startswith("."))


def source_kind(path: Path) -> str:
    """'guide' or 'runbook'; :class:`InputError` for other extensions."""
    suffix = path.suffix.lower()
    if suffix in GUIDE_SUFFIXES:
        return "guide"
    if suffix in RUNBOOK_SUFFIXES:
        return "runbook"
    raise InputError(f"{path.name}: unsupported file type '{suffix or '(none)'}' "
                     "(expected a .txt guide or a .md runbook)")


def read_text(path: Path) -> tuple[str, bytes]:
    """The file's text (UTF-8, BOM dropped, CRLF -> LF) and raw bytes; :class:`InputError` if empty, binary or not UTF-8."""
    data = Path(path).read_bytes()
    if not data.strip():
        raise InputError(f"{path.name}: empty file")
    if b"\x00" in data[:8192]:
        raise InputError(f"{path.name}: binary file (contains NUL bytes), not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{path.name}: not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); save it as UTF-8"
        ) from err
    # Windows line endings would leak "\r" into headings and quotes; line numbers are unchanged by this.
    return text.removeprefix("\ufeff").replace("\r\n", "\n"), data
