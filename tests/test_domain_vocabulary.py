"""The training vocabulary (kb/outside.yaml ``domain:``): its inline examples, and what it decides."""

from __future__ import annotations

import pytest

from assistant import Assistant
from assistant.outside import load_domain

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
