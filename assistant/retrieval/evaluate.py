"""Retrieval quality over a labelled query set: recall@1, recall@3 and MRR, overall and per language.

A hit is acceptable when its id is one of the query's labels; a record hit also counts when the
label is its failure-mode id (record ids and mode ids coincide in the shipped KB, but need not).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError

from assistant.errors import InputError
from assistant.retrieval.models import EvalReport, Hit, QueryCase, QueryResult


def load_cases(path: Path) -> list[QueryCase]:
    """Query cases from a JSON-lines file (blank lines and ``#`` comments skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise InputError(f"cannot read query cases {path}: {err}") from err
    cases = []
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            cases.append(QueryCase.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as err:
            raise InputError(f"{path}:{n}: not a query case ({err})") from err
    if not cases:
        raise InputError(f"{path}: no query cases")
    return cases


def _acceptable(hit: Hit, labels: Sequence[str]) -> bool:
    return hit.id in labels or (hit.kind == "record" and hit.failure_mode in labels)


def _summary(results: Sequence[QueryResult]) -> dict[str, float]:
    n = len(results) or 1
    return {
        "queries": float(len(results)),
        "recall_at_1": sum(1 for r in results if r.rank == 1) / n,
        "recall_at_3": sum(1 for r in results if r.rank is not None and r.rank <= 3) / n,
        "mrr": sum(1.0 / r.rank for r in results if r.rank) / n,
    }


def evaluate(search: Callable[[str, int], list[Hit]], cases: Iterable[QueryCase], k: int = 10) -> EvalReport:
    """Run every case through ``search(text, k)`` and score the rankings (MRR counts ranks up to ``k``)."""
    results = []
    for case in cases:
        hits = search(case.text, k)
        rank = next((i for i, h in enumerate(hits, start=1) if _acceptable(h, case.labels)), None)
        results.append(QueryResult(id=case.id, text=case.text, lang=case.lang, labels=list(case.labels),
                                   ranked=[h.id for h in hits], rank=rank))
    overall = _summary(results)
    langs = sorted({r.lang or "?" for r in results})
    return EvalReport(
        queries=len(results), k=k,
        recall_at_1=round(overall["recall_at_1"], 4), recall_at_3=round(overall["recall_at_3"], 4),
        mrr=round(overall["mrr"], 4),
        by_lang={lang: {key: round(v, 4) for key, v in _summary([r for r in results if (r.lang or "?") == lang]).items()}
                 for lang in langs},
        misses=[r for r in results if r.rank != 1],
    )
