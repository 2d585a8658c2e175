"""Where an exception was raised (kb/frames.yaml): the inline examples through the whole triage."""

from __future__ import annotations

import pytest

from assistant.frames import load_frames
from assistant.triage import triage

CONTEXTS = load_frames()
MATCH = [(c, t) for c in CONTEXTS for t in c.examples.match]
NO_MATCH = [(c, t) for c in CONTEXTS for t in c.examples.no_match]


def _from_frames(result, context) -> list:
    return [e for c in result.candidates if c.failure_mode == context.failure_mode
            for e in c.evidence if e.source == f"frames:{context.id}"]


@pytest.mark.parametrize(("context", "text"), MATCH, ids=[f"{c.id}-{i}" for i, (c, _) in enumerate(MATCH)])
def test_an_exception_raised_in_the_context_names_its_mode(context, text):
    result = triage(text)
    evidence = _from_frames(result, context)
    assert evidence, [(c.failure_mode, [e.source for e in c.evidence]) for c in result.candidates]
    line = text.splitlines()[evidence[0].line - 1]
    assert evidence[0].text.strip("*` ") in line  # the exception line of the input, never invented


@pytest.mark.parametrize(("context", "text"), NO_MATCH, ids=[f"{c.id}-{i}" for i, (c, _) in enumerate(NO_MATCH)])
def test_the_same_exception_raised_elsewhere_does_not(context, text):
    assert not _from_frames(triage(text), context)


def test_a_headerless_traceback_in_a_markdown_post_is_read():
    # Pasted from the middle: no "Traceback (most recent call last):" header, the last line bolded.
    text = ("my custom coco json will not load:\n"
            '  File "/env/lib/python3.9/site-packages/pycocotools/coco.py", line 229, in loadImgs\n'
            "    return [self.imgs[id] for id in ids]\n"
            "**KeyError: '7'**\n")
    result = triage(text)
    assert [tb.exc_type for tb in result.tracebacks] == ["KeyError"]
    assert result.candidates and result.candidates[0].failure_mode == "data-format-error"
