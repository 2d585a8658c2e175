"""The bad-input matrix of issue #14: every hostile input (tests/bad_inputs.py) through every front-end.

Front-ends, each the real code path a user reaches:
- ``api``: :class:`assistant.Assistant` (``diagnose`` on the bytes or text);
- ``cli``: ``trainfix diagnose -`` in a subprocess, the input on stdin (as ``kubectl logs … | trainfix diagnose``);
- ``web``: the Gradio chat's submit handler (:meth:`app.web.WebApp.submit`, what the page's send button runs):
  text as a paste, non-text bytes as an uploaded file; the injection cases also through the real page in
  headless Chromium (:func:`test_injection_through_the_rendered_page`);
- ``slack``: the real Bolt app served over HTTP, signed requests, a fake Slack Web API on 127.0.0.1: text as a
  mention (escaped as Slack escapes it), non-text bytes as a shared file.

Each input must get a clear answer or message — never a traceback — and afterwards the same app (the same
Assistant, WebApp, bot) must still answer a normal paste normally. The Python API and the CLI get the full sizes
(50 MB paste, 20 MB line); the web chat and Slack get inputs that exercise their caps. Time and memory are
measured by bench/bench_bad_input.py, not asserted here. The LLM case runs against a fake OpenAI-compatible
server (tests/llm_fake.py) that answers as a model that obeyed the paste would.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.web_session import MAX_PASTE
from assistant import Assistant, Settings
from kb.taxonomy import MODE_IDS
from tests.bad_inputs import LLM_OBEYED, OOM, cases
from tests.llm_fake import FakeChatServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CASES = cases()
FRONTS = ("api", "cli", "web", "slack")
MIB = 1024 * 1024
# Input sizes per front-end (bytes, roughly): the API and CLI take the big ones; the web chat and Slack get
# inputs just over their caps (4 Mi characters a paste; the upload limit, 1 MiB here) and quick ones otherwise.
SIZES = {
    "api": {"huge-paste": 50_000_000, "one-long-line": 20_000_000, "binary-noise": 2_000_000, "backtracking": 2_000_000},
    "cli": {"huge-paste": 50_000_000, "one-long-line": 20_000_000, "binary-noise": 2_000_000, "backtracking": 2_000_000},
    "web": {"huge-paste": MAX_PASTE + 1, "one-long-line": 1_000_000, "binary-noise": 256_000, "backtracking": 1_000_000},
    "slack": {"huge-paste": MIB + MIB // 2, "one-long-line": 300_000, "binary-noise": 256_000, "backtracking": 300_000},
}
# Where a front-end's cap answers instead of the triage: the message it must show.
CAPPED = {("huge-paste", "web"): ("paste at most",), ("huge-paste", "slack"): ("over the upload limit",)}
AS_FILE = {("huge-paste", "slack")}  # a paste over Slack's own limits can only arrive as a shared file
TRACEBACK = "Traceback (most recent call last)"
FAILED = "Something went wrong"  # the front-ends' last-resort message: an unexpected exception got that far


def size(case_id: str, front: str) -> int:
    return SIZES[front].get(case_id, 0)


class Outcome:
    """What a front-end showed for one input: all its text, and the failure mode its answer names (or None)."""

    def __init__(self, shown: str, mode: str | None) -> None:
        self.shown, self.mode = shown, mode


def _markdown_mode(md: str) -> str | None:
    m = re.search(r"^## .*\(`([a-z0-9-]+)`\)", md, re.M)
    return m.group(1) if m else None


def _outside_code(md: str) -> str:
    """Markdown minus fenced blocks and inline code spans (where anything shows as text)."""
    out: list[str] = []
    fence = None
    for line in md.splitlines():
        s = line.lstrip()
        if fence:
            if s.startswith(fence) and not s.strip("`"):
                fence = None
            continue
        if s.startswith("```"):
            fence = s[: len(s) - len(s.lstrip("`"))]
            continue
        out.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(out)


# -- the four front-ends ---------------------------------------------------------------------------------------


def run_api(assistant: Assistant, data: bytes, as_file: bool) -> Outcome:
    from app.render import markdown

    try:
        payload: str | bytes = data.decode("utf-8")
    except UnicodeDecodeError:
        payload = data
    d = assistant.diagnose(payload)
    shown = markdown(d) + "\n" + "\n".join(d.notices) + "\n" + "\n".join(d.warnings)
    return Outcome(shown, d.candidates[0].failure_mode if d.candidates else None)


def run_cli(data: bytes, env: dict[str, str]) -> Outcome:
    proc = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", "--plain", "--retrieval", "never", "-"],
                          input=data, capture_output=True, env=env, timeout=600)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert proc.returncode in (0, 2), (proc.returncode, err[-2000:])
    assert TRACEBACK not in err, err[-2000:]
    return Outcome(out + "\n" + err, _markdown_mode(out))


class Web:
    """One WebApp (one Assistant, one feedback store), driven through its submit handler."""

    def __init__(self, settings: Settings, assistant: Assistant, uploads: Path) -> None:
        from app.web import WebApp

        self.app = WebApp(settings, assistant)
        self.uploads = uploads
        self.n = itertools.count()

    def send(self, data: bytes, as_file: bool, conv=None) -> tuple[Outcome, object]:
        if as_file:
            folder = self.uploads / f"u{next(self.n)}"  # the upload and its folder are deleted after triage
            folder.mkdir()
            path = folder / "input.log"
            path.write_bytes(data)
            box = {"text": "", "files": [str(path)]}
        else:
            box = {"text": data.decode("utf-8"), "files": []}
        chat, last = [], None
        for last in self.app.submit(box, chat, conv, "auto"):
            pass
        chat, conv, _ = last
        said = [m["content"] for m in chat if m["role"] == "assistant" and isinstance(m["content"], str)]
        shown = "\n".join(said)
        mode = next((x for x in map(_markdown_mode, said) if x), None)
        return Outcome(shown, mode), conv


class Slack:
    """The real Bolt app over HTTP with a fake Slack Web API; every message in its own thread."""

    def __init__(self, data_dir: Path, assistant: Assistant) -> None:
        from tests.slack_fake import Bot, FakeSlack

        self.fake = FakeSlack()
        self.bot = Bot(self.fake, data_dir, assistant)
        self.bot.bot.settings = self.bot.settings.model_copy(update={"slack_max_upload_mb": 1})
        self.ts = itertools.count(1)

    def send(self, data: bytes, as_file: bool) -> Outcome:
        from app.slack_blocks import FEEDBACK_UP
        from tests.slack_fake import BOT_USER, post_blocks, post_text

        n = next(self.ts)
        ts = f"1700100{n:03d}.000100"
        if as_file:
            self.fake.files[f"F{n}"] = ("input.log", data)
            event = {"files": [{"id": f"F{n}"}]}
            text = "look at this log"
        else:
            event = {}
            # Slack delivers what the user typed with its three control characters escaped.
            text = data.decode("utf-8").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        status, _ = self.bot.event({"type": "app_mention", "user": "U0USER", "text": f"<@{BOT_USER}> {text}", "ts": ts,
                                    "channel": "C0CHAN", "event_ts": ts, **event}, f"Ev-matrix-{n}")
        assert status == 200, status

        def done():
            posts = [c for c in self.fake.posts() if c.params.get("thread_ts") == ts]
            texts = [post_text(p) for p in posts]
            if any(FEEDBACK_UP in json.dumps(post_blocks(p)) for p in posts) or any(":warning:" in t for t in texts):
                return posts
            return None

        posts = self.fake.wait_for(done, f"the reply in thread {ts}", deadline=300)
        shown = "\n".join(post_text(p) for p in posts)
        mode = None
        for p in posts:
            for b in post_blocks(p):
                if b.get("type") == "header":
                    mode = next((m for m in MODE_IDS if f"({m})" in b["text"]["text"]), mode)
            if mode:
                break
        return Outcome(shown, mode)

    def close(self) -> None:
        self.bot.stop()
        self.fake.close()


# -- fixtures: one app per front-end, shared by every input (the service must keep serving) ------------------


@pytest.fixture(scope="module")
def llm():
    pytest.importorskip("langchain_openai")
    with FakeChatServer() as server:
        server.reply = LLM_OBEYED
        yield server


def _settings(data_dir: Path, llm_url: str | None = None) -> Settings:
    extra = dict(llm_model="openai:trainfix-test-model", llm_base_url=llm_url, llm_api_key="test-key",
                 llm_timeout=30) if llm_url else dict(llm_model=None)
    return Settings(data_dir=data_dir, web_max_upload_mb=1, web_user=None, web_password=None, chroma_url=None, **extra)


@pytest.fixture(scope="module")
def apps(shared_data_dir, tmp_path_factory, llm):
    """Per front-end, per 'plain' or 'llm' (the optional model configured): the app the inputs go to."""
    built: dict = {}
    slacks: list[Slack] = []
    for flavour, url in (("plain", None), ("llm", llm.url)):
        settings = _settings(shared_data_dir, url)
        # Retrieval runs where the rules are unsure (the default): hostile input reaches the index too.
        assistant = Assistant(settings, retrieval="auto")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFIX_")}
        env["TRAINFIX_DATA_DIR"] = str(shared_data_dir)
        if url:
            env.update(TRAINFIX_LLM_MODEL="openai:trainfix-test-model", TRAINFIX_LLM_BASE_URL=url,
                       TRAINFIX_LLM_API_KEY="test-key")
        slack = Slack(tmp_path_factory.mktemp(f"slack-{flavour}"), assistant)
        slacks.append(slack)
        built[flavour] = {"api": assistant, "cli": env,
                          "web": Web(settings, assistant, tmp_path_factory.mktemp(f"web-{flavour}")), "slack": slack}
    try:
        yield built
    finally:
        for s in slacks:
            s.close()


def _params():
    for case_id, front in itertools.product(CASES, FRONTS):
        yield pytest.param(case_id, front, id=f"{front}-{case_id}")


@pytest.mark.parametrize(("case_id", "front"), list(_params()))
def test_bad_input_gets_a_clear_answer_and_the_service_keeps_serving(apps, llm, case_id, front):
    case = CASES[case_id]
    data = case.make(size(case_id, front))
    as_file = case.as_file or (case_id, front) in AS_FILE
    flavour = "llm" if case_id == "llm-injection" else "plain"
    app = apps[flavour][front]
    asked_before = len(llm.requests)

    out, conv = _send(front, app, data, as_file)

    assert FAILED not in out.shown, out.shown[-3000:]  # (the CLI's stderr is checked for a traceback in run_cli)
    says = CAPPED.get((case_id, front), case.says)
    if (case_id, front) in CAPPED:
        assert out.mode is None
    elif case.mode:
        assert out.mode == case.mode, out.shown[:3000]
    if says:
        assert any(s in out.shown for s in says), (says, out.shown[:3000])
    assert out.shown.strip(), "an answer or a message, never nothing"
    if case_id == "html-injection":
        _shown_as_text(front, out.shown)
    if case_id == "llm-injection":
        _llm_did_not_get_through(front, out.shown, llm.requests[asked_before:])

    # The same app answers a normal paste normally afterwards (the CLI is a new process each time).
    if front != "cli":
        again, _ = _send(front, app, OOM.encode(), False, conv)
        assert again.mode == "cuda-oom", again.shown[:3000]


def _send(front: str, app, data: bytes, as_file: bool, conv=None):
    if front == "api":
        return run_api(app, data, as_file), None
    if front == "cli":
        return run_cli(data, app), None
    if front == "web":
        return app.send(data, as_file, conv)
    return app.send(data, as_file), None


def _shown_as_text(front: str, shown: str) -> None:
    """Markup from the paste is shown as text: no tag, mention or link outside code."""
    if front == "slack":
        for live in ("<!channel>", "<!here>", "<@U0ADMIN>", "<http://evil", "<a href"):
            assert live not in shown, live
        return
    prose = _outside_code(shown).lower()
    for live in ("<script", "<img", "<a href", "](javascript:", "](http://evil"):
        assert live not in prose, live


def _llm_did_not_get_through(front: str, shown: str, requests: list[dict]) -> None:
    """The model was asked (with the paste as the engineer's message, never as instructions), and what it
    answered on the paste's behalf (markup, a link, an image) was discarded: none of it is shown."""
    assert "OBEYED-THE-PASTE" not in shown and "evil.example/fix.sh | sh` [" not in shown
    if front == "api":
        assert "LLM answer discarded: the model's answer contains HTML, a link or an image" in shown
    if front == "cli":
        return  # a separate process: its requests are in the fake server's list too, but not this test's to pair
    assert requests, "the LLM was asked"
    messages = requests[0]["body"]["messages"]
    system = [m for m in messages if m["role"] == "system"]
    assert system and "Ignore all previous instructions" not in system[0]["content"]
    assert "Ignore all previous instructions" in messages[-1]["content"]  # the paste: the engineer's message


# -- the injection cases through the real page ------------------------------------------------------------------


@pytest.mark.web
@pytest.mark.parametrize("case_id", ["html-injection", "llm-injection"])
def test_injection_through_the_rendered_page(shared_data_dir, llm, case_id):
    """In headless Chromium: the answer shows, no script runs and no ``<img>`` or link from the paste or the
    model exists in the page; the same page then answers a normal paste."""
    from playwright.sync_api import expect, sync_playwright

    from tests.test_web_browser import CHROMIUM, running_app, send

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh dev (it installs Debian's chromium)")
    settings = _settings(shared_data_dir, llm.url if case_id == "llm-injection" else None)
    with running_app(settings) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(180_000)
            page.goto(url)
            page.locator("#tf-input textarea").wait_for()
            send(page, CASES[case_id].make(0).decode())
            expect(page.locator("#tf-chat")).to_contain_text("(cuda-oom)", timeout=180_000)
            assert page.evaluate("window.__pwned") is None
            chat = page.locator("#tf-chat")
            assert chat.locator("script").count() == 0
            assert chat.locator('img[src="x"]').count() == 0
            assert chat.locator('img[src*="evil.example"]').count() == 0
            assert chat.locator('a[href*="evil.example"], a[href^="javascript:"]').count() == 0
            assert "OBEYED-THE-PASTE" not in chat.inner_text()
            page.locator("#tf-new").click()
            send(page, OOM)
            expect(chat).to_contain_text("(cuda-oom)", timeout=180_000)
        finally:
            browser.close()
