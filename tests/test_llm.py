"""Optional LLM rephrasing against a real HTTP server on 127.0.0.1 speaking the OpenAI chat API.

The server is a local stand-in for a hosted model (the only fake allowed: the SaaS border). It
records what it receives, so the tests can check redaction and what the prompt carries.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langchain_openai")

from app.render import markdown, source_label  # noqa: E402
from assistant.api import Assistant  # noqa: E402
from assistant.config import Settings  # noqa: E402
from tests.llm_fake import FakeChatServer  # noqa: E402

TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
PASTE = f"HF_TOKEN={TOKEN}\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.fixture()
def server():
    with FakeChatServer() as s:
        yield s


def _assistant(url: str) -> Assistant:
    settings = Settings(llm_model="openai:trainfix-test-model", llm_base_url=url, llm_api_key="test-key",
                        llm_timeout=10)
    return Assistant(settings, retrieval="never")


def test_valid_rephrasing_is_kept_and_renders_with_the_same_sources(server):
    server.reply = "This is a CUDA OOM at line 2. Reduce the micro batch size first [6]."
    d = _assistant(server.url).diagnose(PASTE)
    assert d.explanation == server.reply
    assert "llm" in d.routes and not d.warnings
    md = markdown(d)
    assert md.startswith("This is a CUDA OOM at line 2.")
    cited = d.citations[5]  # [6] in the model's answer = d.citations[5]
    first_line = md.splitlines()[0]
    number = first_line.rsplit("[", 1)[1].rstrip("].")
    assert f"[{number}] {source_label(cited, d)}" in md
    assert cited.source in source_label(cited, d)  # the file is named too, after the document's title


def test_prompt_carries_cited_records_and_no_secret(server):
    server.reply = "CUDA OOM [1]."
    _assistant(server.url).diagnose(PASTE)
    (req,) = server.requests
    assert req["path"].endswith("/chat/completions")
    assert req["auth"] == "Bearer test-key"
    sent = json.dumps(req["body"], ensure_ascii=False)
    assert TOKEN not in sent and "REDACTED" in sent
    assert "Sources:" in sent and "000_416041118514696b.txt §4" in sent


@pytest.mark.parametrize("reply", ["Just lower the batch size.", "See [99] for details.", "   "])
def test_uncited_or_unknown_citations_are_discarded(server, reply):
    server.reply = reply
    d = _assistant(server.url).diagnose(PASTE)
    assert d.explanation is None
    assert any("LLM answer discarded" in w for w in d.warnings)
    assert d.candidates[0].failure_mode == "cuda-oom"  # the deterministic answer stands


def test_unreachable_model_falls_back_to_the_deterministic_answer():
    with FakeChatServer() as s:
        url = s.url
    d = _assistant(url).diagnose(PASTE)  # server already shut down: connection refused
    assert d.explanation is None and d.candidates[0].failure_mode == "cuda-oom"
    assert any("LLM call failed" in w for w in d.warnings)
