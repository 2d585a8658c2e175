"""Ranking: every stage's signals combine; up to three candidates; decline is its own decision; calibration."""

from __future__ import annotations

from assistant.cases import CaseVotes
from assistant.models import Candidate, OutsideHit, Triage
from assistant.ranking import (
    FLOOR,
    Calibration,
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
