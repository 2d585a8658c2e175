"""The lexical side of the index: BM25 (``bm25s``) over bilingual tokens of every chunk.

Built from the chunks when a :class:`~assistant.retrieval.Retriever` opens. Tokenising a thousand chunks
takes seconds in a fresh process (jieba's dictionary, the identifier splitting), so the built index is kept
as a snapshot (:mod:`assistant.snapshot`) named by a sha256 of the chunk texts and the code: other texts,
another snapshot, never a stale one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from assistant.retrieval.models import Chunk
from assistant.retrieval.tokenize import tokenize


class BM25Index:
    """BM25 over chunk texts; :meth:`search` returns (chunk index, score) best first."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self.size = len(texts)
        corpus = [tokenize(t) or [""] for t in texts]
        self._bm25 = bm25s.BM25()
        if self.size:
            self._bm25.index(corpus, show_progress=False)
        self._last: tuple[str, np.ndarray | None] | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_last": None}  # a query's scores are not part of the index

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk]) -> BM25Index:
        """The index of these chunks' texts, from its snapshot when there is one."""
        from assistant.snapshot import cached_by_key

        texts = [c.text for c in chunks]
        digest = hashlib.sha256()
        for text in texts:
            digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
        return cached_by_key("bm25", digest.hexdigest(), lambda: cls(texts))

    def search(self, query: str, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Up to ``n`` (chunk index, score) pairs with a positive score, best first; with ``allowed`` (a
        boolean array, one entry per chunk) only those chunks.

        Only the ``n`` best are sorted: ranking every chunk in Python cost a sort of the whole index per query.
        """
        if not self.size:
            return []
        scores = self._scores(query)
        if scores is None:
            return []
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        positive = np.flatnonzero(scores > 0)
        if len(positive) > n:  # the n best, and every chunk tied with the n-th, so ties break by index below
            nth = np.partition(scores[positive], len(positive) - n)[len(positive) - n]
            positive = positive[scores[positive] >= nth]
        ranked = sorted(positive.tolist(), key=lambda i: (-scores[i], i))[:n]
        return [(i, float(scores[i])) for i in ranked]

    def _scores(self, query: str) -> np.ndarray | None:
        """Every chunk's score for ``query`` (None: no query token is in the vocabulary). The last query's are kept:
        an answer searches the knowledge base and the past incidents with the same query, one mask apart."""
        last = self._last
        if last is not None and last[0] == query:
            return last[1]
        vocab = self._bm25.vocab_dict
        tokens = [t for t in tokenize(query) if t and t in vocab]
        scores = np.asarray(self._bm25.get_scores(tokens), dtype="float64") if tokens else None
        self._last = (query, scores)
        return scores
