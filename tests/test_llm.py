"""Optional LLM rephrasing against a real HTTP server on 127.0.0.1 speaking the OpenAI chat API.

The server is a local stand-in for a hosted model (the only fake allowed: the SaaS border). It
records what it receives, so the tests can check redaction and what the prompt carries.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("langchain_openai")

from app.render import markdown, source_label  # noqa: E402
from assistant.api import Assistant  # noqa: E402
from assistant.config import Settings  # noqa: E402

TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
PASTE = f"HF_TOKEN={TOKEN}\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


class FakeChatServer:
    """OpenAI-compatible /v1/chat/completions that answers with ``reply`` and keeps the requests."""

    def __init__(self) -> None:
        self.reply = ""
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                payload = json.dumps({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": outer.reply}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


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
