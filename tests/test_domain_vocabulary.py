"""The training vocabulary (kb/outside.yaml ``domain:``): its inline examples, and what it decides."""

from __future__ import annotations

import pytest

from assistant import Assistant
from assistant.outside import load_domain, load_trouble

DOMAIN = load_domain()


@pytest.mark.parametrize("text", DOMAIN.examples.match)
def test_texts_about_training_use_the_vocabulary(text):
    assert DOMAIN.mentioned_in(text)


@pytest.mark.parametrize("text", DOMAIN.examples.no_match)
def test_texts_about_other_things_do_not(text):
    assert not DOMAIN.mentioned_in(text)


@pytest.fixture(scope="module")
def rules_and_cases() -> Assistant:
    return Assistant(retrieval="never")


def test_a_text_without_training_words_is_declined_as_other_software(rules_and_cases):
    d = rules_and_cases.diagnose(DOMAIN.examples.no_match[0])
    assert d.abstained and not d.candidates and d.out_of_domain == "other-software"


def test_a_training_signature_is_answered_even_without_training_words(rules_and_cases):
    text = "zipfile.BadZipFile: File is not a zip file"  # no training word, but a checkpoint-corruption signature
    assert not DOMAIN.mentioned_in(text)
    d = rules_and_cases.diagnose(text)
    assert not d.abstained and d.candidates[0].failure_mode == "checkpoint-corruption"


TROUBLE = load_trouble()


@pytest.mark.parametrize("text", TROUBLE.examples.match)
def test_reports_of_something_going_wrong_use_the_trouble_words(text):
    assert TROUBLE.mentioned_in(text)


@pytest.mark.parametrize("text", TROUBLE.examples.no_match)
def test_how_to_questions_do_not(text):
    assert not TROUBLE.mentioned_in(text)


@pytest.fixture(scope="module")
def full() -> Assistant:
    return Assistant()


def test_a_question_about_training_that_reports_nothing_wrong_is_declined_as_how_to(full):
    # Retrieval finds the learning-rate passages of the gradient-explosion section for this; without a
    # word of trouble it is a how-to question, declined with the nearest sections still listed.
    text = TROUBLE.examples.no_match[0]
    assert DOMAIN.mentioned_in(text)
    d = full.diagnose(text)
    assert d.abstained and not d.candidates and d.out_of_domain == "how-to"


def test_the_same_question_with_a_symptom_is_answered(full):
    text = "with this learning rate and batch size the loss suddenly jumps to nan after 300 steps"
    assert TROUBLE.mentioned_in(text)
    d = full.diagnose(text)
    assert not d.abstained and d.candidates[0].failure_mode in {"nan-loss", "loss-spike", "gradient-explosion"}
