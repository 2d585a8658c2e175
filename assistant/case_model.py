"""A linear classifier over the case memory: what the past incidents, taken together, say a text is.

The nearest-neighbour vote (``assistant.cases``) asks "which few reports look most like this one?";
on text unlike any single past report it has little to say. This model asks instead "which words
and identifiers, across all past reports, mark each failure mode (or 'not a training failure')?" —
multinomial logistic regression on the same TF-IDF vectors. Measured by thread-wise 10-fold
cross-validation on the dev split and on a batch of reports collected after it, it names the right
mode first far more often than the neighbour vote (see ``tests/data/README.md``).

Training needs scikit-learn and happens when the case memory is built (then kept in its snapshot,
keyed by the case files' content); prediction is a sparse dot product in pure Python, so the rule
path imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

OUT_OF_SCOPE = ""  # the class of reports that are not a training failure (labels [])
C = 30.0  # inverse L2 strength: chosen by thread-wise cross-validation on the dev split (3 / 10 / 30 tried)
MIN_CASES = 30  # fewer cases than this (a small team knowledge base) train no model
MIN_CLASSES = 2
FOLDS = 10  # for scoring the dev split: a case is predicted by the model that never saw its fold


@dataclass(frozen=True)
class CaseModel:
    """Per-class linear weights over terms; :meth:`predict` returns a probability per class."""

    classes: tuple[str, ...]
    index: dict[str, int]  # term -> row in ``weights``
    weights: array  # row-major, len(index) x len(classes)
    intercept: tuple[float, ...]

    def predict(self, vector: dict[str, float]) -> dict[str, float]:
        """Class probabilities (softmax) for a TF-IDF vector of the case memory."""
        n = len(self.classes)
        scores = list(self.intercept)
        w = self.weights
        for term, x in vector.items():
            row = self.index.get(term)
            if row is None:
                continue
            base = row * n
            for k in range(n):
                scores[k] += x * w[base + k]
        top = max(scores)
        exp = [math.exp(s - top) for s in scores]
        total = sum(exp)
        return {c: e / total for c, e in zip(self.classes, exp)}


def train(vectors: Sequence[dict[str, float]], labels: Sequence[str]) -> CaseModel | None:
    """Fit the model on TF-IDF ``vectors`` with one label each (:data:`OUT_OF_SCOPE` for ``[]``);
    None when there is too little to learn from."""
    if len(vectors) < MIN_CASES or len(set(labels)) < MIN_CLASSES:
        return None
    import numpy as np
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    index: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for i, vec in enumerate(vectors):
        for term in sorted(vec):  # a fixed column order: the same cases give the same model
            rows.append(i)
            cols.append(index.setdefault(term, len(index)))
            vals.append(vec[term])
    x = sp.csr_matrix((vals, (rows, cols)), shape=(len(vectors), len(index)), dtype=np.float64)
    clf = LogisticRegression(C=C, max_iter=3000)
    clf.fit(x, list(labels))
    classes = tuple(str(c) for c in clf.classes_)
    coef = clf.coef_
    intercept = clf.intercept_
    if len(classes) == 2:  # scikit-learn keeps one row for two classes: spell out both sides
        coef = np.vstack([-coef[0] / 2, coef[0] / 2])
        intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
    weights = array("d", np.ascontiguousarray(coef.T, dtype=np.float64).ravel().tolist())
    return CaseModel(classes, index, weights, tuple(float(b) for b in intercept))


def fold(source: str) -> int:
    """The cross-validation fold of a source thread (stable across runs and machines)."""
    return int(hashlib.sha256(source.encode("utf-8")).hexdigest()[:8], 16) % FOLDS
