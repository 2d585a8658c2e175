"""Bilingual tokens for BM25: Chinese segmented with jieba, English and code identifiers kept whole.

Query text is untrusted (pasted logs), so it is scanned with RE2 (linear time), never Python ``re``.
``torch.cuda.OutOfMemoryError`` yields the whole identifier plus its dotted parts and the words of
its CamelCase/snake_case parts, so both the exact class name and "out of memory" match it.
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from typing import TYPE_CHECKING

import re2

from assistant import fastre

if TYPE_CHECKING:
    import jieba

# A Han run, or an identifier-like run: word chars joined by '.', '-' (never ending in them).
_TOKEN = re2.compile(r"\p{Han}+|[A-Za-z0-9_]+(?:[.\-][A-Za-z0-9_]+)*")
# Sub-words of an identifier: camel-case humps, digit runs, lower-case runs.
_SUBWORD = fastre.compile(r"[A-Z]+[a-z]*|[a-z]+|[0-9]+")  # findall per identifier: fastre's skips re2's match objects
_HAS_WORD = re2.compile(r"[\p{Han}A-Za-z0-9]")

# Pasted logs can be huge; BM25 only needs the words, and the tail is usually where the error is.
MAX_QUERY_CHARS = 200_000

# Very common words that carry no signal for this domain (kept small on purpose).
_STOP_EN = frozenset(
    "a an and are as at be but by for from has have how i if in into is it its my of on or so that the "
    "their then there these this to was what when where which while why will with you your do does can".split()
)
_STOP_ZH = frozenset("的 了 是 在 和 与 或 我 你 他 她 它 们 吗 呢 吧 啊 怎么 怎么办 如何 为什么 什么 这个 那个 一个 就 也 都 还 要 会 能 有".split())

_jieba_lock = threading.Lock()


@lru_cache(maxsize=1)
def _segmenter() -> jieba.Tokenizer:
    """A private jieba tokenizer (not jieba's global one), its dictionary loaded on first use."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # jieba logs dictionary loading at DEBUG/INFO on stderr
    with _jieba_lock:
        seg = jieba.Tokenizer()
        seg.initialize()
    return seg


def _identifier_tokens(word: str) -> list[str]:
    lower = word.lower()
    out = [lower]
    parts = [p for p in word.replace("-", ".").split(".") if p]
    if len(parts) > 1:
        out.extend(p.lower() for p in parts)
    for part in parts:
        pieces = [s for s in part.split("_") if s]
        if len(pieces) > 1:
            out.extend(s.lower() for s in pieces)
        for piece in pieces:
            # CamelCase words only ('OutOfMemoryError'); 'NaN', 'fp16', '1e' stay whole.
            subs = _SUBWORD.findall(piece) if piece.isalpha() else []
            if len(subs) > 1 and all(len(s) > 1 for s in subs):
                out.extend(s.lower() for s in subs)
    # The whole word is always kept; split-off parts drop stopwords and duplicates of it.
    seen = {lower}
    result = [lower]
    for tok in out[1:]:
        if tok not in seen and tok not in _STOP_EN:
            seen.add(tok)
            result.append(tok)
    return result


def tokenize(text: str) -> list[str]:
    """Lower-cased BM25 tokens of ``text`` (Chinese words via jieba, identifiers whole plus parts)."""
    text = text[:MAX_QUERY_CHARS]
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        word = match.group(0)
        if not word[0].isascii():  # a Han run
            for w in _segmenter().cut_for_search(word):
                if w not in _STOP_ZH and _HAS_WORD.search(w):
                    tokens.append(w)
        elif word.lower() in _STOP_EN:
            continue
        else:
            tokens.extend(_identifier_tokens(word))
    return tokens
