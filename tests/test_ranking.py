"""Ranking: every stage's signals combine; up to three candidates; decline is its own decision; calibration."""

from __future__ import annotations

from assistant.cases import CaseVotes
from assistant.models import Candidate, OutsideHit, Triage
from assistant.ranking import (
    FLOOR,
    Calibration,
    contradicted_by_metrics,
    expected_calibration_error,
    fit_calibration,
    rank,
    reliability,
)
from assistant.triage import triage

NONE = CaseVotes({}, 0.0, ())


def _triage(*cands: tuple[str, float], outside: tuple[str, str] | None = None) -> Triage:
    return Triage(
        abstained=not cands,
        candidates=[Candidate(failure_mode=m, confidence=c, route="rule") for m, c in cands],
        outside=[OutsideHit(id="environment.x", kind=outside[0], strength=outside[1], line=1, text="x")] if outside else [],
    )


def test_each_rule_counts_once_and_more_rules_mean_more_confidence():
    one = triage("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").candidates[0].confidence
    two = triage("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").candidates[0].confidence
    assert one == two  # the same rule firing twice is one signal


def test_cases_add_alternatives_and_can_propose_a_mode():
    r = rank(_triage(("cuda-oom", 0.9)), CaseVotes({"cpu-oom": 0.6, "disk-full": 0.2}, 0.0, ()))
    assert [x.mode for x in r.ranked] == ["cuda-oom", "cpu-oom", "disk-full"]
    alone = rank(_triage(), CaseVotes({"slow-training": 0.8}, 0.0, ()))
    assert not alone.declined and alone.top.mode == "slow-training" and alone.top.route == "cases"


def test_agreeing_stages_raise_the_score():
    alone = rank(_triage(("loss-spike", 0.65)), NONE).top.raw
    agreed = rank(_triage(("loss-spike", 0.65)), CaseVotes({"loss-spike": 0.7}, 0.0, ())).top.raw
    assert agreed > alone


def test_decline_when_nothing_reaches_the_floor():
    r = rank(_triage(), CaseVotes({"slow-training": 0.1}, 0.0, ()))
    assert r.declined and not r.ranked and r.top is None
    assert FLOOR > 0.07


def test_out_of_domain_beats_weak_in_domain_but_not_a_strong_signature():
    weak = rank(_triage(("slow-training", 0.4), outside=("environment", "strong")), NONE)
    assert weak.declined and weak.outside_kind == "environment"
    strong = rank(_triage(("cuda-oom", 0.9), outside=("environment", "strong")), NONE)
    assert not strong.declined and strong.top.mode == "cuda-oom"


def test_out_of_scope_cases_vote_for_declining():
    r = rank(_triage(("slow-training", 0.4)), CaseVotes({}, 0.9, ()))
    assert r.declined


def _trainer_log(losses: list[float], norms: list[float]) -> str:
    return "\n".join("{'loss': %s, 'grad_norm': %s, 'learning_rate': 5e-05, 'epoch': %.2f}" % (loss, norm, i / 10)
                     for i, (loss, norm) in enumerate(zip(losses, norms)))


def test_the_logged_numbers_speak_against_the_modes_they_contradict():
    falling = [3.2, 2.9, 2.7, 2.6, 2.5, 2.45]
    healthy = triage(_trainer_log(falling, [2.1, 1.8, 1.7, 1.5, 1.5, 1.4])).metrics
    assert contradicted_by_metrics(healthy) == {"nan-loss", "loss-spike", "gradient-explosion"}
    huge = triage(_trainer_log(falling, [3900, 4100, 4000, 4200, 3950, 4050])).metrics
    assert contradicted_by_metrics(huge) == {"nan-loss", "loss-spike"}  # a norm in the thousands is the complaint
    growing = triage(_trainer_log(falling, [1.0, 1.3, 1.7, 2.2, 2.9, 3.8])).metrics
    assert "gradient-explosion" not in contradicted_by_metrics(growing)
    jump = triage(_trainer_log([2.1, 2.0, 1.9, 4.4, 4.1, 3.9], [1.0, 1.0, 0.9, 1.1, 1.0, 1.0])).metrics
    assert not {"loss-spike", "nan-loss"} & contradicted_by_metrics(jump)
    assert contradicted_by_metrics(triage(_trainer_log(falling[:3], [1.0, 1.0, 1.0])).metrics) == set()
    assert contradicted_by_metrics(None) == set()


def test_a_healthy_log_is_not_diagnosed_from_lookalike_incidents():
    votes = CaseVotes({"gradient-explosion": 0.85, "nan-loss": 0.55}, 0.0, ())
    healthy = triage(_trainer_log([2.4, 2.1, 1.9, 1.8, 1.7, 1.65, 1.6], [1.2, 1.0, 0.9, 0.8, 0.8, 0.75, 0.7]))
    assert not healthy.candidates
    assert rank(healthy, votes).declined
    assert not rank(_triage(), votes).declined  # the same votes with no numbers to check them name a mode
    nan = triage(_trainer_log([2.4, 2.1, 1.9, 1.8, "nan", "nan"], [1.2, 1.0, 0.9, 0.8, "nan", "nan"]))
    assert rank(nan, votes).top.mode in {"nan-loss", "gradient-explosion"}


def test_at_most_three_candidates():
    r = rank(_triage(("cuda-oom", 0.9), ("cpu-oom", 0.6), ("disk-full", 0.5), ("nan-loss", 0.4)), NONE)
    assert len(r.ranked) == 3


def test_calibration_fit_reduces_ece():
    # raw scores that overstate: 0.9 is right half the time, 0.5 rarely
    points = [(0.9, i % 2 == 0) for i in range(40)] + [(0.5, i % 5 == 0) for i in range(40)]
    a, b = fit_calibration(points)
    cal = Calibration(a=a, b=b)
    fitted = [(cal(x), y) for x, y in points]
    assert expected_calibration_error(fitted) < expected_calibration_error(points)
    assert cal(0.9) > cal(0.5)  # monotone
    assert sum(row["cases"] for row in reliability(fitted)) == len(points)


def _hit(kind: str, vector: int | None, bm25: int | None, hid: str = "pre-launch-checklist"):
    from types import SimpleNamespace

    return SimpleNamespace(id=hid, kind=kind, vector_rank=vector, bm25_rank=bm25)


def test_a_question_no_rule_recognised_is_answered_by_a_guide_passage_near_the_top_of_both_searches():
    from assistant.api import guide_answer

    weak = rank(_triage(), CaseVotes({"loss-spike": 0.4}, 0.0, ()))
    assert weak.ranked  # only case votes: a guess
    top = _hit("passage", 3, 1)
    assert guide_answer([top], weak, prose=True, question=True) is top
    # not a question, or the passage is not near the top of both searches: the weak modes stand
    assert guide_answer([top], weak, prose=True, question=False) is None
    assert guide_answer([_hit("passage", 4, 1)], weak, prose=True, question=True) is None
    assert guide_answer([_hit("passage", None, 1)], weak, prose=True, question=True) is None
    # a failure mode's record is not a guide answer: it is what the candidates are for
    assert guide_answer([_hit("record", 1, 1, "cuda-oom")], weak, prose=True, question=True) is None
    # ... nor does a record ranked first hide the passage after it; a passage past the third hit is too far down
    second = _hit("passage", 2, 3)
    assert guide_answer([_hit("record", 1, 1, "cuda-oom"), second], weak, prose=True, question=True) is second
    far = [_hit("record", 1, 1, "cuda-oom"), _hit("record", 2, 2, "nan-loss"), _hit("record", 3, 3, "disk-full"),
           _hit("passage", 1, 2)]
    assert guide_answer(far, weak, prose=True, question=True) is None


def test_a_rule_signal_keeps_the_candidates_whatever_retrieval_finds():
    from assistant.api import guide_answer

    ruled = rank(_triage(("cuda-oom", 0.6)), CaseVotes({}, 0.0, ()))
    assert guide_answer([_hit("passage", 1, 1)], ruled, prose=True, question=True) is None


def test_with_no_candidate_only_agreement_in_both_top_two_answers_words_that_are_not_a_question():
    from assistant.api import guide_answer

    none = rank(_triage(), CaseVotes({}, 0.0, ()))
    assert none.declined
    assert guide_answer([_hit("passage", 2, 2)], none, prose=True, question=False) is not None
    assert guide_answer([_hit("passage", 3, 1)], none, prose=True, question=False) is None
    assert guide_answer([_hit("passage", 1, 1)], none, prose=False, question=False) is None


def test_a_how_to_question_with_no_failure_signature_is_declined_whatever_similar_texts_say():
    # passages and past incidents about multi-node launches vote for network-timeout: the topic, not a failure
    votes = CaseVotes({"network-timeout": 0.9}, 0.0, ())
    retrieval = {"network-timeout": 1.0}
    asked = rank(_triage(outside=("how-to", "medium")), votes, retrieval, prose=True, short=True)
    assert asked.declined and asked.outside_kind == "how-to"
    # the same votes without the how-to question, or with a failure signature, or as machine output: answered
    assert not rank(_triage(), votes, retrieval, prose=True, short=True).declined
    ruled = rank(_triage(("network-timeout", 0.6), outside=("how-to", "medium")), votes, retrieval,
                 prose=True, short=True)
    assert not ruled.declined and ruled.top.mode == "network-timeout"
    assert not rank(_triage(outside=("how-to", "medium")), votes, retrieval, prose=False).declined
    # a close past failure vouches that this is a failure report after all
    from types import SimpleNamespace

    neighbour = SimpleNamespace(similarity=0.9, case=SimpleNamespace(labels=["network-timeout"]))
    close = CaseVotes({"network-timeout": 0.9}, 0.0, (neighbour,))
    assert not rank(_triage(outside=("how-to", "medium")), close, retrieval, prose=True, short=True).declined
