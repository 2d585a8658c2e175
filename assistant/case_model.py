"""A linear classifier over the case memory: what the past incidents, taken together, say a text is.

The nearest-neighbour vote (``assistant.cases``) asks "which few reports look most like this one?";
on text unlike any single past report it has little to say. This model asks instead "which words
and identifiers, across all past reports, mark each failure mode (or 'not a training failure')?" —
multinomial logistic regression on the same TF-IDF vectors. Measured by thread-wise 10-fold
cross-validation on the dev split and on a batch of reports collected after it, it names the right
mode first far more often than the neighbour vote (see ``tests/data/README.md``).

Training (numpy + scipy's L-BFGS, the objective and stopping rule of scikit-learn's ``LogisticRegression``:
the same model, without importing scikit-learn, which pulls in ``rich`` and more) happens when the case memory
is built, about 3 s for the packaged cases, and is then kept in its snapshot, keyed by the case files' content
(``trainfix ingest`` builds it). Prediction is a sparse dot product in pure Python, so the rule path imports
nothing heavy once the snapshot exists.
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
MAX_ITER = 3000
TOL = 1e-4  # L-BFGS stops when the projected gradient is this small (scikit-learn's default)
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
    from scipy.optimize import minimize

    index: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for i, vec in enumerate(vectors):
        for term in sorted(vec):  # a fixed column order: the same cases give the same model
            rows.append(i)
            cols.append(index.setdefault(term, len(index)))
            vals.append(vec[term])
    n, d = len(vectors), len(index)
    x = sp.csr_matrix((vals, (rows, cols)), shape=(n, d), dtype=np.float64)
    xt = x.T.tocsr()
    classes = tuple(sorted(set(labels)))
    k = len(classes)
    y = np.array([classes.index(label) for label in labels])
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    scale = 1.0 / (n * C)  # scikit-learn's scaling (mean log-loss + |W|^2 / 2Cn), so its tolerance means the same

    def loss_and_grad(w):
        weights, bias = w[: d * k].reshape(d, k), w[d * k:]
        z = x @ weights + bias
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(n), y]).sum() * C + 0.5 * float((weights * weights).sum())
        g = p - onehot
        grad = np.concatenate([((xt @ g) * C + weights).ravel(), g.sum(axis=0) * C])
        return loss * scale, grad * scale

    result = minimize(loss_and_grad, np.zeros(d * k + k), jac=True, method="L-BFGS-B",
                      options={"maxiter": MAX_ITER, "gtol": TOL, "ftol": 64 * np.finfo(float).eps})
    weights = array("d", result.x[: d * k].tolist())  # row-major d x k, as predict() reads it
    return CaseModel(classes, index, weights, tuple(float(b) for b in result.x[d * k:]))


def fold(source: str) -> int:
    """The cross-validation fold of a source thread (stable across runs and machines)."""
    return int(hashlib.sha256(source.encode("utf-8")).hexdigest()[:8], 16) % FOLDS
