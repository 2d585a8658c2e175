"""Reciprocal-rank fusion (RRF) of ranked lists, aggregated from chunks to documents.

Each list is first collapsed to documents (a document's rank is that of its best chunk in the
list), then ``score(doc) = Σ_lists weight / (k + rank)``. Using ranks, not raw scores, makes
cosine distances and BM25 scores comparable without calibration (Cormack et al., 2009; k=60).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60


def doc_ranks(chunk_ids: Sequence[str], doc_of: Mapping[str, str]) -> dict[str, tuple[int, str]]:
    """doc id -> (1-based rank among documents, best chunk id) for a best-first list of chunk ids."""
    out: dict[str, tuple[int, str]] = {}
    for cid in chunk_ids:
        doc = doc_of.get(cid)
        if doc is not None and doc not in out:
            out[doc] = (len(out) + 1, cid)
    return out


@dataclass
class Fused:
    """One document after fusion: its score, rank per list and the chunk that represents it."""

    doc_id: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    best_chunk: str = ""


def rrf(
    lists: Mapping[str, Sequence[str]],
    doc_of: Mapping[str, str],
    weights: Mapping[str, float] | None = None,
    k: int = RRF_K,
) -> list[Fused]:
    """Fuse best-first chunk-id lists (e.g. ``{"vector": [...], "bm25": [...]}``) into ranked documents.

    The representative chunk is the best-ranked one of the list that contributes most to the score.
    Ties are broken by the best single rank, then by document id, so results are deterministic.
    """
    weights = weights or {}
    fused: dict[str, Fused] = {}
    best_part: dict[str, float] = {}
    for name, chunk_ids in lists.items():
        w = weights.get(name, 1.0)
        for doc, (rank, cid) in doc_ranks(chunk_ids, doc_of).items():
            f = fused.setdefault(doc, Fused(doc_id=doc, score=0.0))
            part = w / (k + rank)
            f.score += part
            f.ranks[name] = rank
            if part > best_part.get(doc, -1.0):
                best_part[doc] = part
                f.best_chunk = cid
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), f.doc_id))
