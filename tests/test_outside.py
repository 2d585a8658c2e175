"""Out-of-domain signatures (kb/outside.yaml): examples run, and they decline only without strong in-domain evidence."""

from __future__ import annotations

import pytest

from assistant import Assistant
from assistant.outside import load_outside

RULES = load_outside()


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_outside_examples(rule):
    for text in rule.examples.match:
        assert rule.fires_on(text), f"{rule.id} should match {text!r}"
    for text in rule.examples.no_match:
        assert not rule.fires_on(text), f"{rule.id} should not match {text!r}"


@pytest.fixture(scope="module")
def assistant():
    return Assistant(retrieval="never")


def test_install_problem_is_declined_and_named(assistant):
    d = assistant.diagnose("ModuleNotFoundError: No module named 'apex.normalization'")
    assert d.abstained and not d.candidates
    assert d.out_of_domain == "environment"
    assert d.out_of_domain_evidence[0].line == 1


def test_strong_training_failure_wins_over_an_install_warning(assistant):
    text = ("UserWarning: apex is not installed; No module named 'apex'\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 23.6 GiB")
    d = assistant.diagnose(text)
    assert not d.abstained and d.candidates[0].failure_mode == "cuda-oom"
    assert d.out_of_domain is None


def test_serving_question_is_not_slow_training(assistant):
    d = assistant.diagnose("用 vllm 部署后推理非常慢，怎么加速？")
    assert not d.candidates or d.candidates[0].failure_mode != "slow-training"
