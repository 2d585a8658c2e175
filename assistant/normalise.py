"""Input cleanup: bytes → clean UTF-8 chunks that end on line boundaries, plus per-line helpers.

Works on a stream of byte chunks so a 100 MB log is handled with bounded memory. Every step is a
linear-time byte-string operation (no regex): NUL bytes and invalid UTF-8 are dropped, ANSI escape
codes stripped, CRLF normalised and carriage-return redraws (progress bars) resolved to their last
redraw. Line numbers always refer to the input as given: only ``\\n`` starts a new line, and
cleanup never removes one.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

from assistant import fastre

MAX_CHUNK = 8 * 1024 * 1024  # a line longer than this is cut (the pieces keep its line number)
MAX_LINE_CHARS = 2000  # lines kept for display/evidence are truncated to this


# Rank prefixes, applied repeatedly at the start of a line: torchrun ``[rank3]:`` / ``[default0]:``,
# DeepSpeed ``[Rank 0]``, pdsh/deepspeed multi-node ``node-2:`` or ``10.0.0.2:`` (optionally ``host:3:``).
_PREFIX = fastre.compile(
    r"^(?:\[(?:rank|default)(\d+)\]:\s?"
    r"|\[Rank (\d+)\]\s"
    r"|((?:[A-Za-z][A-Za-z0-9-]*\d|\d{1,3}(?:\.\d{1,3}){3})):(?:(\d+):)?\s"
    r"| {0,4}(\d{1,4}): )"  # `srun -l` labels every line with the task (rank) number: " 11: ..."
)


@dataclass(slots=True)
class Chunk:
    """Cleaned bytes ending on a line boundary (or at a forced cut of a very long line)."""

    data: bytes
    first_line: int  # original 1-based line number of the chunk's first line


@dataclass(slots=True)
class CleanStats:
    """What cleanup changed, for user-readable notices."""

    raw_bytes: int = 0
    nul_bytes: int = 0
    invalid_utf8: int = 0
    ansi_codes: int = 0
    redraws: int = 0
    long_line_cuts: int = 0
    lines: int = 0
    cjk_chars: int = 0
    ascii_letters: int = 0
    has_text: bool = False  # any non-whitespace character seen
    utf16: bool = False  # the input started with a UTF-16 byte-order mark and was decoded as UTF-16

    @property
    def binary(self) -> bool:
        """Most of the input was not text (over 30 % of its bytes were NUL or invalid UTF-8)."""
        return bool(self.raw_bytes) and self.nul_bytes + self.invalid_utf8 > 0.3 * self.raw_bytes

    def notices(self) -> list[str]:
        """Plain-English notices about what cleanup removed or changed."""
        out: list[str] = []
        if self.utf16:
            out.append("The input is UTF-16 (it starts with a byte-order mark, as PowerShell writes files); "
                       "it was decoded as such.")
        dropped = self.nul_bytes + self.invalid_utf8
        if self.binary:
            out.append(
                f"The input looks like binary data: {dropped:,} of {self.raw_bytes:,} bytes were not text "
                "(NUL or invalid UTF-8) and were removed."
            )
        else:
            if self.nul_bytes:
                out.append(f"Removed {self.nul_bytes:,} NUL byte(s).")
            if self.invalid_utf8:
                out.append(f"Removed {self.invalid_utf8:,} invalid UTF-8 sequence(s).")
        if self.ansi_codes:
            out.append(f"Stripped {self.ansi_codes:,} ANSI colour/cursor code(s).")
        if self.redraws:
            out.append(f"Collapsed {self.redraws:,} progress-bar redraw(s) to the last one on each line.")
        if self.long_line_cuts:
            out.append(
                f"Very long line(s) were scanned in {MAX_CHUNK // (1024 * 1024)} MiB pieces "
                f"({self.long_line_cuts:,} cut(s)); a match spanning a cut can be missed."
            )
        return out


_ASCII_LETTERS = bytes(range(65, 91)) + bytes(range(97, 123))
_CJK_LEADS = tuple(bytes([b]) for b in range(0xE4, 0xEA))  # U+4E00–U+9FFF start with E4..E9


_CSI_BODY = bytes(range(0x20, 0x40))


def _escape_length(piece: bytes) -> int:
    """Length of the escape sequence at the start of ``piece`` (the text after an ESC byte)."""
    if not piece:
        return 0
    kind = piece[0]
    if kind == 0x5B:  # '[' CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E
        rest = piece[1:].lstrip(_CSI_BODY)  # bytes.lstrip: the parameter run at C speed
        i = len(piece) - len(rest)
        return i + 1 if rest and 0x40 <= rest[0] <= 0x7E else i
    if kind == 0x5D:  # ']' OSC: up to BEL or ESC \ (the ESC starts the next piece)
        end = piece.find(b"\x07")
        nl = piece.find(b"\n")
        if end >= 0 and (nl < 0 or end < nl):
            return end + 1
        return len(piece) if nl < 0 else nl
    return 1 if 0x40 <= kind <= 0x5F else 0


SAMPLED_ESCAPES = 64  # escape sequences looked at to find a log's few repeated codes
MAX_REPLACED = 16  # distinct codes removed with bytes.replace


def _strip_ansi(data: bytes, stats: CleanStats) -> bytes:
    stats.ansi_codes += data.count(b"\x1b")
    # A coloured log repeats a few codes ("\x1b[32m", "\x1b[0m") on every line. A complete CSI code, or an ESC and one
    # byte, is removed the same wherever it occurs (it ends at its own final byte), so removing every occurrence
    # with bytes.replace (C speed) is exactly what the piece-by-piece loop below would do to each.
    # Only when nothing else is left is that the answer: an unterminated code followed by a removed one would
    # have been cut differently (it runs to the next ESC), so with any other code the loop does it all.
    stripped = data
    for code in _repeated_codes(data):
        stripped = stripped.replace(code, b"")
    if b"\x1b" not in stripped:
        return stripped
    # Split on ESC (C speed) and cut each escape sequence off the front of the piece after it.
    pieces = data.split(b"\x1b")
    out = [pieces[0]]
    for piece in pieces[1:]:
        out.append(piece[_escape_length(piece):])
    return b"".join(out)


def _repeated_codes(data: bytes) -> list[bytes]:
    """Complete CSI codes and two-byte escapes among the first escape sequences of ``data``."""
    codes: list[bytes] = []
    pos = data.find(b"\x1b")
    for _ in range(SAMPLED_ESCAPES):
        if pos < 0 or len(codes) >= MAX_REPLACED:
            break
        nxt = data.find(b"\x1b", pos + 1)
        piece = data[pos + 1: nxt if nxt >= 0 else min(len(data), pos + 257)]
        n = _escape_length(piece)
        complete = n == 1 and 0x40 <= piece[0] <= 0x5F and piece[0] != 0x5B and piece[0] != 0x5D \
            or n > 1 and piece[0] == 0x5B and 0x40 <= piece[n - 1] <= 0x7E
        code = data[pos: pos + 1 + n]
        if complete and code not in codes:
            codes.append(code)
        pos = nxt
    return codes


def _resolve_redraws(data: bytes, stats: CleanStats) -> bytes:
    # A carriage return redraws the line: keep what follows the last one (CRLF is a plain line end).
    # Only the lines holding a CR are visited; the rest are copied in slices between them.
    out: list[bytes] = []
    pos = 0
    cr = data.find(b"\r")
    while cr >= 0:
        start = data.rfind(b"\n", 0, cr) + 1
        end = data.find(b"\n", cr)
        end = len(data) if end < 0 else end
        line = data[start:end].rstrip(b"\r")
        cut = line.rfind(b"\r")
        if cut >= 0:
            stats.redraws += line.count(b"\r")
            line = line[cut + 1:]
        out.append(data[pos:start])
        out.append(line)
        pos = end
        cr = data.find(b"\r", end)
    out.append(data[pos:])
    return b"".join(out)


def clean_bytes(data: bytes, stats: CleanStats) -> bytes:
    """Clean one piece of input (linear time): NUL, invalid UTF-8, ANSI codes, CR redraws."""
    stats.raw_bytes += len(data)
    nul = data.count(b"\0")
    if nul:
        stats.nul_bytes += nul
        data = data.replace(b"\0", b"")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        stats.invalid_utf8 += text.count("\ufffd")
        data = text.replace("\ufffd", "").encode("utf-8")
    if b"\x1b" in data:
        data = _strip_ansi(data, stats)
    if b"\r" in data:
        data = _resolve_redraws(data, stats)
    if not stats.has_text and data.strip():
        stats.has_text = True
    stats.cjk_chars += sum(data.count(lead) for lead in _CJK_LEADS)
    stats.ascii_letters += len(data) - len(data.translate(None, _ASCII_LETTERS))
    return data


@dataclass
class Chunker:
    """Cut a stream of raw byte pieces into cleaned :class:`Chunk` s that end on line boundaries."""

    max_chunk: int = MAX_CHUNK
    stats: CleanStats = field(default_factory=CleanStats)
    _buf: bytearray = field(default_factory=bytearray)
    _next_line: int = 1
    _ended_with_newline: bool = True
    _saw_any: bool = False
    _head: bytes | None = b""  # the first bytes, held until a byte-order mark can be recognised (None: done)
    _utf16: codecs.IncrementalDecoder | None = None

    def feed(self, raw: bytes) -> list[Chunk]:
        """Add raw bytes; return the chunks that are complete."""
        self._saw_any = self._saw_any or bool(raw)
        raw = self._decode(raw)
        self._buf += raw
        out: list[Chunk] = []
        while len(self._buf) > self.max_chunk:
            nl = self._buf.rfind(b"\n", 0, self.max_chunk)
            if nl >= 0:
                cut = nl + 1
            else:
                cut = self._char_boundary(self.max_chunk)
                self.stats.long_line_cuts += 1
            out.append(self._emit(bytes(self._buf[:cut])))
            del self._buf[:cut]
        nl = self._buf.rfind(b"\n")
        if nl >= 0:
            out.append(self._emit(bytes(self._buf[: nl + 1])))
            del self._buf[: nl + 1]
        return out

    def _decode(self, raw: bytes, final: bool = False) -> bytes:
        """A UTF-16 input (byte-order mark first) re-encoded as UTF-8; a UTF-8 byte-order mark dropped."""
        if self._head is not None:
            head = self._head + raw
            if len(head) < 3 and not final:
                self._head = head
                return b""
            self._head = None
            if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                self._utf16 = codecs.getincrementaldecoder("utf-16")(errors="replace")
                self.stats.utf16 = True
            elif head.startswith(codecs.BOM_UTF8):
                head = head[3:]
            raw = head
        if self._utf16 is not None:
            return self._utf16.decode(raw, final).encode("utf-8", errors="replace")
        return raw

    def finish(self) -> list[Chunk]:
        """Flush what is left (the last line may lack a newline) and count the lines."""
        out: list[Chunk] = []
        self._buf += self._decode(b"", final=True)
        if self._buf:
            out.append(self._emit(bytes(self._buf)))
            self._buf.clear()
        if not self._saw_any:
            self.stats.lines = 0
        else:
            self.stats.lines = self._next_line - 1 if self._ended_with_newline else self._next_line
        return out

    def _char_boundary(self, pos: int) -> int:
        # Back off so a multi-byte UTF-8 character is not split between two chunks.
        while pos > 1 and 0x80 <= self._buf[pos] <= 0xBF:
            pos -= 1
        return pos

    def _emit(self, raw: bytes) -> Chunk:
        chunk = Chunk(clean_bytes(raw, self.stats), self._next_line)
        self._next_line += raw.count(b"\n")
        self._ended_with_newline = raw.endswith(b"\n")
        self.stats.lines = self._next_line - 1  # complete lines so far (a stream being watched); finish() adds the last
        return chunk


def iter_chunk_lines(chunk: Chunk):
    """Yield ``(line_number, line_bytes)`` for every line of a chunk (the trailing empty piece skipped)."""
    data = chunk.data[:-1] if chunk.data.endswith(b"\n") else chunk.data
    number = chunk.first_line
    for piece in data.split(b"\n"):
        yield number, piece
        number += 1


_STAMPED_RANK = fastre.compile(r"^(\[\d{4}-\d{2}-\d{2}[ T][\d:.,]{5,15}\])\s*\[rank(\d+)\]:?\s*")


def split_prefix(line: str) -> tuple[str | None, str]:
    """Strip rank/host prefixes from a line; return ``(rank, body)``.

    ``rank`` is the rank number when one is given, else the host name, else ``None``.
    """
    rank: str | None = None
    host: str | None = None
    body = line
    if line.startswith("[") and "][rank" in line[:48]:  # "[2026-11-25 19:07:33][rank2] msg": keep the stamp
        m = _STAMPED_RANK.match(line)
        if m:
            return m.group(2), m.group(1) + " " + line[m.end():]
    colon = line.find(":", 0, 48)
    if not line.startswith(("[rank", "[default", "[Rank ")) and (colon <= 0 or " " in line[:colon].lstrip(" ")):
        return None, line  # cheap test first: no prefix can start this line
    for _ in range(3):
        m = _PREFIX.search(body)
        if not m:
            break
        r = m.group(1) or m.group(2) or m.group(4) or m.group(5)
        if r is not None:
            rank = r
        elif m.group(3):
            host = m.group(3)
        body = body[m.end():]
    return (rank if rank is not None else host), body


def display(line: str) -> str:
    """A line as shown in evidence: truncated to :data:`MAX_LINE_CHARS`."""
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS] + f"… [{len(line) - MAX_LINE_CHARS:,} more characters]"
    return line


def decode(line: bytes) -> str:
    """Decode a cleaned line (already valid UTF-8 except at a forced cut)."""
    return line.decode("utf-8", errors="replace")


def text_language(text: str) -> str:
    """:func:`language` of a short piece of text (a chat reply), without running a triage."""
    stats = CleanStats()
    clean_bytes(text.encode("utf-8", errors="replace"), stats)
    return language(stats)


def language(stats: CleanStats) -> str:
    """'zh' when CJK characters make up a fair share of the text, else 'en'.

    Compares CJK characters with English words (≈ 5 letters each), so a Chinese question
    with an English traceback pasted under it still counts as Chinese. Binary data is answered in
    English: its random bytes decode partly as CJK characters, which says nothing about the asker.
    """
    if stats.binary:
        return "en"
    words = stats.ascii_letters / 5
    if stats.cjk_chars >= 2 and stats.cjk_chars >= 0.15 * (stats.cjk_chars + words):
        return "zh"
    if stats.cjk_chars >= 8:
        return "zh"
    return "en"
