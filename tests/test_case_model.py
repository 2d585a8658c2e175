"""The case memory's linear model: learns which words mark each mode across all past incidents,
predicts in pure Python, trains the same model from the same cases, and leaves a thread's fold out
when a dev case is scored."""

from __future__ import annotations

import math

from assistant.case_model import MIN_CASES, OUT_OF_SCOPE, fold, train
from assistant.cases import CaseMemory, CaseRecord

# Made-up words, so nothing here can come from the rules or the real cases: each mode has its own.
WORDS = {
    "cuda-oom": ["zorblat", "gripnax", "vellum"],
    "disk-full": ["quentar", "mossik", "pellow"],
    "slow-training": ["drubble", "tenzig", "frawn"],
    OUT_OF_SCOPE: ["wimbex", "sprocklet", "yarrow"],
}
FILLER = ["the", "run", "stopped", "again", "today", "node", "job", "we", "saw", "it"]


def _cases(per_mode: int = 12) -> list[CaseRecord]:
    out = []
    for m, words in WORDS.items():
        for i in range(per_mode):
            text = " ".join([words[i % 3], FILLER[i % len(FILLER)], words[(i + 1) % 3], FILLER[(i * 3) % len(FILLER)]])
            out.append(CaseRecord(id=f"{m or 'oos'}-{i}", text=text, labels=[m] if m else [],
                                  source=f"org/{m or 'oos'}#{i}"))
    return out


MEMORY = CaseMemory(_cases())


def test_the_model_learns_the_words_of_each_mode():
    assert MEMORY.model is not None
    for mode, words in WORDS.items():
        # A text no case contains verbatim: one word of the mode among words of no mode.
        p = MEMORY.model.predict(MEMORY._query(f"yesterday {words[2]} happened on the cluster"))
        assert max(p, key=p.get) == mode
        assert math.isclose(sum(p.values()), 1.0, rel_tol=1e-9)


def test_votes_carry_the_model_and_the_out_of_scope_class():
    votes = MEMORY.vote("a wimbex and a sprocklet")
    assert votes.out_of_scope > 0.5 and votes.out_of_scope > max(votes.modes.values(), default=0.0)
    votes = MEMORY.vote("tenzig drubble")
    assert votes.best[0] == "slow-training"


def test_the_same_cases_train_the_same_model():
    a, b = CaseMemory(_cases()).model, CaseMemory(_cases()).model
    assert a.classes == b.classes and a.index == b.index and a.weights == b.weights and a.intercept == b.intercept


def test_too_few_cases_train_no_model_and_the_neighbours_still_vote():
    few = CaseMemory(_cases(per_mode=2))
    assert len(few) < MIN_CASES and few.model is None
    assert few.vote("zorblat gripnax").best[0] == "cuda-oom"


def test_two_classes_give_two_sided_probabilities():
    cases = [c for c in _cases(per_mode=MIN_CASES) if c.labels in (["cuda-oom"], ["disk-full"])]
    model = train([CaseMemory(cases)._query(c.text) for c in cases], [c.labels[0] for c in cases])
    p = model.predict(CaseMemory(cases)._query("quentar"))
    assert set(p) == {"cuda-oom", "disk-full"} and p["disk-full"] > 0.5


def test_leaving_a_thread_out_scores_it_with_a_model_that_never_saw_its_fold():
    # One case carries a word no other case has; with its thread left out the model must not know it.
    cases = _cases() + [CaseRecord(id="lone", text="blorptastic zorblat", labels=["cuda-oom"], source="org/lone#1")]
    memory = CaseMemory(cases)
    assert "blorptastic" in memory.model.index
    held_out = memory._model_for("org/lone#1")
    assert "blorptastic" not in held_out.index
    same_fold = [c for c in cases if fold(c.source) == fold("org/lone#1")]
    assert all("blorptastic" not in memory._model_for(c.source).index for c in same_fold)
    # A source the memory does not hold (a test-split case) is scored by the full model.
    assert memory._model_for("org/elsewhere#9") is memory.model


def test_training_fits_the_same_model_as_scikit_learn():
    # The trainer mirrors LogisticRegression(C, lbfgs) without importing scikit-learn on the answer path; here,
    # where scikit-learn is installed anyway (sentence-transformers needs it), the probabilities must agree.
    import numpy as np
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from assistant.case_model import C

    cases = _cases() + [CaseRecord(id="mixed", text="zorblat quentar drubble", labels=["disk-full"], source="o/m#1")]
    vectors = [MEMORY._query(c.text) for c in cases]
    labels = [c.labels[0] if c.labels else OUT_OF_SCOPE for c in cases]
    model = train(vectors, labels)
    x = sp.csr_matrix([[v.get(t, 0.0) for t in model.index] for v in vectors])
    reference = LogisticRegression(C=C, max_iter=3000).fit(x, labels)
    assert tuple(reference.classes_) == model.classes
    for row, vec in zip(reference.predict_proba(x), vectors):
        ours = model.predict(vec)
        assert np.allclose([ours[c] for c in model.classes], row, atol=2e-3)
