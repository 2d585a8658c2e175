"""Coverage-guided fuzzing (atheris / libFuzzer) of everything untrusted text goes through on the rule path:
normalise → triage (rules, tracebacks, timeline, metrics, trends, readings, tree) → compose → render
(Markdown, web chat Markdown, Slack blocks) and the redactor. Any exception other than a clear InputError is
a finding (libFuzzer stops and writes the input to crash-*).

    pip install atheris            # a manylinux wheel for CPython 3.11 on x86_64
    python bench/fuzz_atheris.py -max_total_time=300 -rss_limit_mb=4096 -seed=14 bench/results/fuzz-corpus

Results of the run recorded in the README ("Reliability") are written to bench/results/fuzz_atheris.txt.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from app.render import markdown
    from app.slack_blocks import answer_messages
    from app.web_render import answer_markdown
    from assistant import Assistant
    from assistant.errors import InputError
    from assistant.redact import redact

ASSISTANT = Assistant(retrieval="never")


def one_input(data: bytes) -> None:
    try:
        d = ASSISTANT.diagnose(data)
    except InputError:
        return
    markdown(d)
    answer_markdown(d, "k")
    answer_messages(d)
    for c in d.candidates:
        for e in c.evidence:
            if not 1 <= e.line <= max(1, data.count(b"\n") + data.count(b"\r") + 1):
                raise AssertionError(f"evidence line {e.line} outside the input")
    redact(data.decode("utf-8", "replace"))


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
