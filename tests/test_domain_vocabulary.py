"""The vocabularies of kb/outside.yaml (``domain:`` training words, ``trouble:`` words of something going
wrong): their inline examples, and what they decide."""

from __future__ import annotations

import pytest

from assistant import Assistant
from assistant.cases import CaseVotes
from assistant.outside import load_domain, load_trouble

DOMAIN = load_domain()
TROUBLE = load_trouble()
EXAMPLES = [(name, v, t, True) for name, v in (("domain", DOMAIN), ("trouble", TROUBLE)) for t in v.examples.match] + [
    (name, v, t, False) for name, v in (("domain", DOMAIN), ("trouble", TROUBLE)) for t in v.examples.no_match]


@pytest.mark.parametrize(("name", "vocabulary", "text", "uses"), EXAMPLES,
                         ids=[f"{n}-{'match' if u else 'no_match'}-{i}" for i, (n, _, _, u) in enumerate(EXAMPLES)])
def test_the_inline_examples_use_the_vocabulary_or_not(name, vocabulary, text, uses):
    # domain: texts about training use it, texts about other things do not; trouble: reports of something
    # going wrong use it, how-to questions do not
    assert vocabulary.mentioned_in(text) == uses


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


@pytest.fixture(scope="module")
def full() -> Assistant:
    return Assistant()


SETUP_POST = (
    "Using two machines\n\n"
    "Thanks for releasing the code! The README shows the launch command for one machine with 8 GPUs. "
    "We have two machines with 8 A100s each and would like to use both for pre-training. "
    "Which arguments should we set, and do we need a hostfile?\n\n"
    "Our cluster uses SLURM and each node has one InfiniBand card. We launch jobs with srun. "
    "Could you share an example script for this setup? Thank you very much for the great work."
)


def test_a_post_about_training_that_reports_nothing_wrong_is_declined_as_how_to(full):
    # Retrieval and past incidents point at the multi-node sections; a post (not a short chat question)
    # without a word of trouble asks how to set something up: declined as how-to, nearest sections listed.
    assert len(SETUP_POST) > 400
    assert DOMAIN.mentioned_in(SETUP_POST) and not TROUBLE.mentioned_in(SETUP_POST)
    d = full.diagnose(SETUP_POST)
    assert d.abstained and not d.candidates and d.out_of_domain == "how-to"


def test_a_short_chat_question_without_trouble_is_still_answered_from_the_knowledge_base():
    from assistant.models import Triage
    from assistant.ranking import rank

    votes = CaseVotes(modes={"token-out-of-range": 0.2}, out_of_scope=0.0, neighbours=())
    retrieval = {"token-out-of-range": 1.0}
    chat = rank(Triage(abstained=True), votes, retrieval, prose=True, short=True, reports_trouble=False)
    post = rank(Triage(abstained=True), votes, retrieval, prose=True, short=False, reports_trouble=False)
    assert not chat.declined and chat.top.mode == "token-out-of-range"
    assert post.declined and post.outside_kind == "how-to"


def test_the_same_question_with_a_symptom_is_answered(full):
    text = "with this learning rate and batch size the loss suddenly jumps to nan after 300 steps"
    assert TROUBLE.mentioned_in(text)
    d = full.diagnose(text)
    assert not d.abstained and d.candidates[0].failure_mode in {"nan-loss", "loss-spike", "gradient-explosion"}
