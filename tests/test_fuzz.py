"""Property tests (hypothesis) over the normaliser, traceback extractor, metric parser, rule engine and renderers:
never raises, every evidence line number points into the input, the same input gives the same answer, and
rendering never emits raw HTML from the input. Derandomized with a fixed example count: the same examples
every run, on any machine (`HYPOTHESIS_PROFILE=long` for a longer randomized run, see README "Reliability")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assistant.metrics import MetricsAnalyser
from assistant.normalise import Chunker, decode, display, split_prefix
from assistant.tracebacks import KeptLine, extract
from assistant.triage import triage

# The "ci" (derandomized) and "long" profiles are registered and loaded in conftest.py, for every property test.

# Pieces of real failures, so random mixes reach deep into the rules, the traceback parser and the metric parser.
PIECES = [
    "Traceback (most recent call last):", '  File "train.py", line 12, in <module>', "    loss.backward()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
    "RuntimeError: NCCL communicator was aborted", "[rank3]: Watchdog caught collective operation timeout",
    "{'loss': nan, 'grad_norm': inf, 'learning_rate': 2e-05, 'epoch': 0.5}", "{'loss': 2.1, 'grad_norm': 1e308, 'epoch': 1e400}",
    "step 100 | loss 3.06 | mem_alloc 6.10 GiB", "iteration 10/100 | lm loss: 1.0E+99 | grad norm: -0.0 |",
    "\x1b[31mERROR\x1b[0m", "\r 46%|████ | 2810/6000", "OSError: [Errno 28] No space left on device",
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<!channel> <https://evil.example|click>", "```", "`",
    "显存不足 CUDA out of memory", "Killed", "exitcode  : -9 (pid: 1234)", "IndexError: index out of range in self",
]
lines = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=80)), max_size=40)
raw = st.one_of(st.binary(max_size=2000), lines.map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")))


@given(raw)
def test_normaliser_never_raises_and_counts_lines(data):
    chunker = Chunker()
    chunks = [*chunker.feed(data), *chunker.finish()]
    assert sum(c.data.count(b"\n") for c in chunks) <= data.count(b"\n") + data.count(b"\r") + 1
    for line in data.split(b"\n")[:50]:
        text = decode(line)
        display(text)
        split_prefix(text)


@given(lines)
def test_traceback_extractor_never_raises(ls):
    kept = [KeptLine(i + 1, None, t) for i, t in enumerate(ls)]
    for tb in extract(kept):
        assert 1 <= tb.start_line <= tb.end_line <= len(ls)


@given(lines)
def test_metric_parser_never_raises(ls):
    m = MetricsAnalyser()
    for i, t in enumerate(ls):
        m.feed(i + 1, t, None)
    report = m.report()
    for f in report.findings:
        assert 1 <= f.line <= len(ls)


@given(raw)
def test_rule_engine_evidence_points_into_the_input_and_is_deterministic(data):
    first = triage(data)
    assert first.model_dump_json() == triage(data).model_dump_json()
    for c in first.candidates:
        for e in c.evidence:
            assert 1 <= e.line <= max(first.input_lines, 1), (e.line, first.input_lines)


@given(lines)
def test_rendering_never_emits_raw_html_from_the_input(ls):
    from app.render import markdown
    from app.slack_blocks import answer_messages
    from app.web_render import answer_markdown, user_markdown
    from assistant import Assistant

    text = "\n".join(ls)
    d = _assistant(Assistant).diagnose(text)
    web, _ = answer_markdown(d, "k")
    for out in (web, user_markdown(text)):
        low = _outside_code(out).lower()  # inside code fences and spans Markdown shows it as text
        assert "<script" not in low and "<img" not in low and "onerror=" not in low, out
    slack = str(answer_messages(d))
    assert "<!channel>" not in slack and "<https://evil" not in slack
    markdown(d)


_CACHE: dict = {}


def _outside_code(md: str) -> str:
    import re

    out, fence = [], None
    for line in md.split("\n"):
        m = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)*?\1", "", line))
    return "\n".join(out)


def _assistant(cls):
    if "a" not in _CACHE:
        _CACHE["a"] = cls(retrieval="never")
    return _CACHE["a"]
