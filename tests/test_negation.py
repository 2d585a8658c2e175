"""A rule that reads words does not fire on a denial of its words; questions and doubts are not denials."""

from __future__ import annotations

import pytest

from assistant import Assistant
from assistant.signatures import denied


@pytest.mark.parametrize("before, matched", [
    ("这不是", "梯度爆炸"),
    ("", "loss 还没变 nan"),
    ("there is no ", "loss spike"),
    ("we have not seen a ", "loss spike"),
    ("the ", "loss is not spiking"),
    ("并没有出现", "显存不足"),
])
def test_denials(before, matched):
    assert denied(before, matched)


@pytest.mark.parametrize("before, matched", [
    ("是不是", "通信太慢"),
    ("有没有可能是", "梯度爆炸"),
    ("I'm not sure whether it is a ", "loss spike"),
    ("没多久 ", "loss 就变成 nan"),  # "soon after": bare 没 is not a denial
    ("after step 300 the ", "loss spikes"),
])
def test_questions_doubts_and_plain_statements_are_not_denials(before, matched):
    assert not denied(before, matched)


@pytest.fixture(scope="module")
def rules_only() -> Assistant:
    return Assistant(retrieval="never")


def test_a_denied_symptom_is_not_the_diagnosis_but_the_real_one_is(rules_only):
    d = rules_only.diagnose("梯度范数突然飙升到几万，loss 还没变 nan，这是梯度爆炸吗？")
    assert d.candidates and d.candidates[0].failure_mode == "gradient-explosion"
    assert not any(c.failure_mode == "nan-loss" and c.route == "rule" for c in d.candidates)


def test_machine_output_is_never_negated(rules_only):
    d = rules_only.diagnose("no retry left: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert d.candidates[0].failure_mode == "cuda-oom"
