"""Is the message a plain question (answer from the knowledge base) or a paste to diagnose?"""

from __future__ import annotations

import re2

from assistant.models import Triage

_QUESTION = re2.compile(
    r"(?i)(?:[?？]\s*$|^\s*(?:how|what|why|when|which|where|should|can|could|is|are|does|do|any)\b"
    r"|怎么|怎样|如何|为什么|为何|是否|吗|呢|多少|什么|哪些|哪个|能不能|可不可以|有没有|应该)"
)
MAX_QUESTION_CHARS = 400
MAX_QUESTION_LINES = 4


def is_question(text: str, result: Triage | None = None) -> bool:
    """True for a short natural-language question with no traceback or training-log lines in it."""
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_QUESTION_CHARS:
        return False
    if len([line for line in stripped.splitlines() if line.strip()]) > MAX_QUESTION_LINES:
        return False
    if result is not None and (result.tracebacks or (result.metrics and result.metrics.series)):
        return False
    return _QUESTION.search(stripped) is not None
