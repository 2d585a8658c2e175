"""The scorer works with any predictor."""

from assistant.evaluate import Case, evaluate


def test_scores_top1_top3_and_abstention():
    cases = [
        Case(text="a", labels=["cuda-oom"]),
        Case(text="b", labels=["disk-full"]),
        Case(text="c", labels=[]),
        Case(text="d", labels=[]),
    ]
    answers = {"a": (["cuda-oom"], False), "b": (["cpu-oom", "x", "disk-full"], False), "c": ([], True),
               "d": (["nan-loss"], False)}
    r = evaluate(cases, lambda t: answers[t])
    assert (r.top1, r.top3) == (0.5, 1.0)
    assert (r.abstention_precision, r.abstention_recall, r.abstention_accuracy) == (1.0, 0.5, 0.75)
    assert {m.mode: (m.cases, m.top1, m.top3) for m in r.per_mode} == {"cuda-oom": (1, 1, 1), "disk-full": (1, 0, 1)}
