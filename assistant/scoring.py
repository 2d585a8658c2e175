"""Predictors for ``trainfix eval``: the full assistant, the rules alone, and a plain-vector baseline.

Each returns ``predict(text) -> (ranked ids, abstained)`` for :func:`assistant.evaluate.evaluate`.
Ranked ids are failure-mode ids, followed by passage ids when the answer comes from passages.
"""

from __future__ import annotations

from assistant.evaluate import Predict

SYSTEMS = ("full", "rules", "vector")


def predictor(system: str, settings=None) -> Predict:
    """The predictor for ``system`` ('full', 'rules' or 'vector')."""
    if system == "rules":
        from assistant.evaluate import triage_predictor

        return triage_predictor()
    if system == "full":
        return _full(settings)
    if system == "vector":
        return _vector(settings)
    from assistant.errors import InputError

    raise InputError(f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}")


def _full(settings) -> Predict:
    from assistant.api import Assistant

    assistant = Assistant(settings)

    def predict(text: str) -> tuple[list[str], bool]:
        d = assistant.diagnose(text)
        ranked = [c.failure_mode for c in d.candidates]
        if not d.abstained:
            ranked += [p.id for p in d.passages if p.id not in ranked]
        return ranked, d.abstained

    return predict


def _vector(settings) -> Predict:
    """Plain vector retrieval: nearest chunks' documents in order; it never abstains."""
    from assistant.config import Settings
    from assistant.retrieval import Retriever

    retriever = Retriever(settings or Settings())

    def predict(text: str) -> tuple[list[str], bool]:
        if not text.strip():
            return [], False
        ranked: list[str] = []
        for chunk_id, _distance in retriever.vector_search(text[:4000]):
            doc = chunk_id.split("#", 1)[0]
            if doc not in ranked:
                ranked.append(doc)
        return ranked, False

    return predict
