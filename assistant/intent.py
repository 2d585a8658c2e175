"""What kind of message is this: a question, a prose description of a problem, or pasted machine output?

Retrieval may *answer* only prose (questions and short descriptions in words). For pasted machine
output the rules decide; retrieval then only lists the nearest sections. Measured on the labelled
sets: vector/BM25 agreement on pastes the rules did not recognise picked out-of-scope pastes (web
app errors, npm, ssh…) about twice as often as real training failures.
"""

from __future__ import annotations

from assistant import fastre
from assistant.models import Triage

_QUESTION = fastre.compile(
    r"(?i)(?:[?？]\s*$|^\s*(?:how|what|why|when|which|where|should|can|could|is|are|does|do|any)\b"
    r"|怎么|怎样|如何|为什么|为何|是否|吗|呢|多少|什么|哪些|哪个|能不能|可不可以|有没有|应该)"
)
# Lines that are machine output rather than someone's words: exception names, log levels, prompts,
# timestamps, file paths, stack frames, key/value dumps, tables.
_MACHINE = fastre.compile(
    r"(?i)(?:traceback|\b\w*(?:error|exception)\b[:(]|^\s*(?:error|warning|warn|fatal|info|debug)\b"
    r"|\bat [\w.$]+\(|^\s*[$#>] |^\s*\[[\w\s:.-]+\]|^\s*\d{4}-\d\d-\d\d|file \"|\w+\.py\b|\{['\"]\w"
    r"|\|\s*\S+\s*\||^\s*\w+=\S+\s+\w+=|\s{4,}\S+\s{4,}\S"
    # metric lines: "loss 2.0 | lr 3e-4", "1.1 s/it, loss=2"
    r"|\d[\d.e+-]*\s*[a-z%/]{0,4}\s*[|,]\s*(?:train[_/ ])?(?:loss|lr|learning_rate|grad_?norm|gnorm|step|iter\w*|epoch"
    r"|tok\w*/s|samples\w*|acc\w*|ppl|\w*time|\w*mem\w*|throughput)[\s:=]+-?\d)"
)
MAX_PROSE_CHARS = 400
MAX_PROSE_LINES = 4
MAX_ANSWER_CHARS = 160  # a reply to a follow-up question is short: "it's bf16 already", "就是bf16"
MAX_ANSWER_LINES = 2


def is_question(text: str, result: Triage | None = None) -> bool:
    """True for a short natural-language question with no traceback or training-log lines in it."""
    return is_prose(text, result) and looks_like_question(text)


def looks_like_question(text: str) -> bool:
    """The words are phrased as a question (question mark, question word, 吗/怎么/…)."""
    return _QUESTION.search(text.strip()) is not None


def is_prose(text: str, result: Triage | None = None) -> bool:
    """True for a short message in words (a question or a description), not pasted machine output."""
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_PROSE_CHARS:
        return False
    lines = [line for line in stripped.splitlines() if line.strip()]
    if len(lines) > MAX_PROSE_LINES:
        return False
    if result is not None and (result.tracebacks or (result.metrics and result.metrics.series)):
        return False
    return not any(_MACHINE.search(line) for line in lines)


def reads_as_answer(text: str) -> bool:
    """True when a chat reply reads as an answer to a follow-up question, not a new paste or question.

    Short, in words (no machine output such as an exception line), and not itself a question —
    "it's bf16 already" is an answer; a pasted ``JSONDecodeError`` or "显存不够怎么办" starts over.
    """
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_ANSWER_CHARS:
        return False
    lines = [line for line in stripped.splitlines() if line.strip()]
    if len(lines) > MAX_ANSWER_LINES or any(_MACHINE.search(line) for line in lines):
        return False
    return not looks_like_question(stripped)


def prose_share(text: str, max_lines: int = 200) -> float:
    """Share of the (first ``max_lines``) non-empty lines that are words rather than machine output.

    A real question is often a long post — a title, a few paragraphs and a short snippet — which
    :func:`is_prose` (short messages only) rejects; this tells such a post from a pasted log.
    """
    lines = [line for line in text.splitlines() if line.strip()][:max_lines]
    if not lines:
        return 0.0
    return sum(1 for line in lines if not _MACHINE.search(line)) / len(lines)
