"""RE2 patterns (linear time, as every pattern on untrusted text must be) with a fast path for ASCII text.

``re2.compile(p).search(text)`` on a ``str`` encodes the text, maps every byte offset of the match back to a
character offset and yields the match from a generator: about 6 µs a call here, most of the cost of reading the
metric and reading lines of a long log (hundreds of thousands of calls). Log lines are nearly always ASCII, where
byte offsets *are* character offsets, so :class:`Pattern` calls the compiled RE2 object directly and builds the
same match object from its spans (about 1.5 µs); ``findall`` of a pattern without groups slices the encoded text
(any ``str``). Anything else — non-ASCII text for a match, bytes, ``pos``/``endpos`` — takes re2's own path.
``tests/test_fastre.py`` checks both paths give the same matches for every pattern of
the package on real text.
"""

from __future__ import annotations

import re2

try:  # the wrapper's own internals (google-re2 1.1); tests/test_fastre.py pins their behaviour
    from re2 import _Anchor, _Match, _NULL_SPAN
except ImportError:  # another google-re2: every pattern takes re2's own path (_usable() below)
    _Anchor = _Match = _NULL_SPAN = None

__all__ = ["Pattern", "byte_spans", "compile"]


class Pattern(re2._Regexp):
    """A compiled RE2 pattern whose ``search``/``match``/``fullmatch`` skip offset decoding on ASCII text."""

    __slots__ = ()

    def _fast(self, anchor, text, pos, endpos):
        if pos is None and endpos is None and text.__class__ is str and text.isascii():
            n = len(text)
            spans = self._regexp.Match(anchor, text.encode("ascii"), 0, n)
            return None if spans[0] == _NULL_SPAN else _Match(self, text, 0, n, spans)
        return next(self._match(anchor, text, pos, endpos), None)

    def search(self, text, pos=None, endpos=None):
        return self._fast(_Anchor.UNANCHORED, text, pos, endpos)

    def match(self, text, pos=None, endpos=None):
        return self._fast(_Anchor.ANCHOR_START, text, pos, endpos)

    def fullmatch(self, text, pos=None, endpos=None):
        return self._fast(_Anchor.ANCHOR_BOTH, text, pos, endpos)

    def findall(self, text, pos=None, endpos=None):
        """re2's ``findall``; for a pattern without groups on a whole ``str``, one encoding and a slice per match
        (re2's own builds a match object and maps its offsets back to characters for each one)."""
        if self.groups or pos is not None or endpos is not None or text.__class__ is not str:
            return super().findall(text, pos, endpos)
        data = text.encode("utf-8")
        n, at, out = len(data), 0, []
        while True:
            spans = self._regexp.Match(_Anchor.UNANCHORED, data, at, n)
            if spans[0] == _NULL_SPAN:
                return out
            start, end = spans[0]
            out.append(data[start:end].decode("utf-8"))
            if at == n:
                return out
            if end == at:  # an empty match where the search began: step over one character, as re2 does
                at += 1
                while at < n and data[at] & 0xC0 == 0x80:
                    at += 1
            else:
                at = end


def _usable() -> bool:
    """Whether this google-re2 has the internals the fast path uses and they behave as expected."""
    try:
        p = Pattern._make(r"b(\d)", tuple(getattr(re2.Options(), n) for n in re2.Options.NAMES))
        fast, slow = p.search("ab1"), re2._Regexp.search(p, "ab1")
        return fast is not None and fast.span(1) == slow.span(1) == (2, 3) and p.search("x") is None
    except Exception:  # noqa: BLE001 - any surprise means: use re2 as it is
        return False


_FAST = _Anchor is not None and _usable()


def byte_spans(rx, data: bytes, limit: int = 0) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of ``rx.finditer(data)`` over bytes (the first ``limit`` when it is positive).

    re2's ``finditer`` builds a match object per match, most of the cost of listing a long log's ~100,000 metric
    lines; this asks the compiled RE2 object for the spans directly, stepping past an empty match as it does.
    """
    if not _FAST or data.__class__ is not bytes or not isinstance(rx, re2._Regexp):
        found = (m.span() for m in rx.finditer(data))
        return [span for _, span in zip(range(limit), found)] if limit > 0 else list(found)
    match, anchor, n = rx._regexp.Match, _Anchor.UNANCHORED, len(data)
    pos, out = 0, []
    while True:
        spans = match(anchor, data, pos, n)
        if spans[0] == _NULL_SPAN:
            return out
        out.append(spans[0])
        if len(out) == limit or pos == n:
            return out
        pos = pos + 1 if pos == spans[0][1] else spans[0][1]


def compile(pattern, options=None) -> Pattern:  # noqa: A001 - the name re2 and re use
    """``re2.compile`` returning a :class:`Pattern` (same options; compiled patterns are cached by re2), or
    re2's own compiled pattern where this google-re2 does not have what the fast path needs."""
    if isinstance(pattern, Pattern):
        return pattern
    if not _FAST:
        return re2.compile(pattern, options)
    if isinstance(pattern, re2._Regexp):
        pattern = pattern.pattern
    options = options or re2.Options()
    return Pattern._make(pattern, tuple(getattr(options, name) for name in re2.Options.NAMES))
