"""Predictors for ``trainfix eval``: the full assistant, the rules alone, and a plain-vector baseline.

Each returns ``predict(text) -> (ranked ids, abstained)`` for :func:`assistant.evaluate.evaluate`.
Ranked ids are failure-mode ids, followed by passage ids when the answer comes from passages.
"""

from __future__ import annotations

from assistant.evaluate import Predict

SYSTEMS = ("full", "no-retrieval", "rules", "vector")


def predictor(system: str, settings=None) -> Predict:
    """The predictor for ``system``: 'full', 'no-retrieval' (rules + case memory), 'rules' or 'vector'.

    The full predictors have a ``before_each(case)`` attribute: it leaves the case's own thread
    (its ``source``) out of the case memory, so a dev-split case is never matched with itself.
    """
    if system == "rules":
        from assistant.evaluate import triage_predictor

        return triage_predictor()
    if system == "full":
        return _full(settings)
    if system == "no-retrieval":
        return _full(settings, retrieval="never")
    if system == "vector":
        return _vector(settings)
    from assistant.errors import InputError

    raise InputError(f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}")


def _full(settings, retrieval: str = "auto") -> Predict:
    from assistant.api import Assistant

    assistant = Assistant(settings, retrieval=retrieval)

    def predict(text: str) -> tuple[list[str], bool]:
        d = assistant.diagnose(text)
        ranked = [c.failure_mode for c in d.candidates]
        if not d.abstained:
            ranked += [p.id for p in d.passages if p.id not in ranked]
        return ranked, d.abstained

    def before_each(case) -> None:
        assistant.leave_out(case.source)

    predict.before_each = before_each  # type: ignore[attr-defined]
    predict.assistant = assistant  # type: ignore[attr-defined]
    return predict


def _vector(settings) -> Predict:
    """Plain vector retrieval: nearest chunks' documents in order; it never abstains."""
    from assistant.config import Settings
    from assistant.retrieval import Retriever
    from assistant.retrieval.retriever import KNOWLEDGE

    retriever = Retriever(settings or Settings())

    def predict(text: str) -> tuple[list[str], bool]:
        if not text.strip():
            return [], False
        ranked: list[str] = []
        for chunk_id, _distance in retriever.vector_search(text[:4000], kinds=KNOWLEDGE):
            doc = chunk_id.split("#", 1)[0]
            if doc not in ranked:
                ranked.append(doc)
        return ranked, False

    return predict
