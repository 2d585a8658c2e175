"""Regenerate the web chat screenshots in docs/ (``make screenshots``): a real server and Debian's headless Chromium.

States: an answer with the metric plot, the citation view, a large upload in progress, a Chinese answer.
Inputs are the web tests' own examples (tests/fixtures/web/), read as data. The Chinese picture needs a
CJK font in the system (`make screenshots` installs Debian's ``fonts-wqy-zenhei`` when none is present).
"""

from __future__ import annotations

import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.web import launch  # noqa: E402
from assistant.config import Settings  # noqa: E402

DOCS = ROOT / "docs"
WEB = ROOT / "tests" / "fixtures" / "web"
CHROMIUM = "/usr/bin/chromium"
WAIT_MS = 300_000
ZH = ("训练到第 1100 步左右 loss 突然变成 nan 了，用的是 fp16 混合精度，之前 grad_norm 一直在涨。\n"
      + "\n".join((WEB / "trainer_nan.log").read_text(encoding="utf-8").splitlines()[95:118]))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _big_log(folder: Path, mib: int = 48) -> Path:
    """A long, healthy HF Trainer log with the NaN run at its end (about ``mib`` MiB)."""
    healthy = "".join("{'loss': %.4f, 'grad_norm': %.3f, 'learning_rate': 2e-05, 'epoch': %.3f}\n"
                      % (2.4 - i * 1e-6, 1.0 + (i % 7) * 0.03, i / 1e5) for i in range(4000))
    path = folder / "sft-run-17.log"
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < mib * 1024 * 1024:
            out.write(healthy)
        out.write((WEB / "trainer_nan.log").read_text(encoding="utf-8"))
    return path


def _send(page, text: str) -> None:
    page.locator("#tf-input textarea").fill(text)
    page.locator("#tf-input button.submit-button").click()


def _show(page, locator) -> None:
    """Scroll the chat to ``locator`` but keep the page itself at the top (title and side panel in view)."""
    locator.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.evaluate("window.scrollTo(0, 0)")


def main() -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    DOCS.mkdir(exist_ok=True)
    port = _port()
    demo = launch(Settings(), host="127.0.0.1", port=port, block=False)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(600):
        try:
            urllib.request.urlopen(url, timeout=5)
            break
        except OSError:
            time.sleep(0.3)
    try:
        with sync_playwright() as pw, tempfile.TemporaryDirectory() as tmp:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
            ctx = browser.new_context(viewport={"width": 1440, "height": 1000}, device_scale_factor=1)
            ctx.set_default_timeout(WAIT_MS)

            def fresh():
                page = ctx.new_page()
                page.goto(url)
                page.locator("#tf-input textarea").wait_for()
                return page

            page = fresh()  # 1. an uploaded log: answer with the metric plot
            page.locator("#tf-input input[type=file]").set_input_files(str(WEB / "trainer_nan.log"))
            page.locator("#tf-input button.submit-button").click()
            plot = page.locator("#tf-chat .message.bot img").first
            plot.wait_for()
            page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=plot.element_handle())
            _show(page, page.locator("#tf-chat .message.bot").first)
            page.screenshot(path=DOCS / "web-answer.png")
            _show(page, plot)
            page.screenshot(path=DOCS / "web-plot.png")

            page = fresh()  # 2. a citation opened in the side panel
            _send(page, (WEB / "oom_traceback.txt").read_text(encoding="utf-8"))
            expect(page.locator("#tf-chat")).to_contain_text("(cuda-oom)")
            link = page.locator('#tf-chat a[href*="#tfcite-"]').nth(1)
            _show(page, link)
            link.click()
            page.locator("#tf-source mark").first.wait_for()
            page.screenshot(path=DOCS / "web-citation.png")

            page = fresh()  # 3. a large upload, triaged with progress
            page.locator("#tf-input input[type=file]").set_input_files(str(_big_log(Path(tmp))))
            page.locator("#tf-input button.submit-button").click()
            expect(page.locator("#tf-chat")).to_contain_text("% of")
            time.sleep(1.5)  # let the bar move past its first step for the picture
            page.screenshot(path=DOCS / "web-upload.png")
            expect(page.locator("#tf-chat")).to_contain_text("(gradient-explosion)")

            page = fresh()  # 4. a question in Chinese, answered in Chinese
            _send(page, ZH)
            expect(page.locator("#tf-chat")).to_contain_text("证据")
            _show(page, page.locator("#tf-chat .message.bot").first)
            page.screenshot(path=DOCS / "web-answer-zh.png")
            browser.close()
    finally:
        demo.close()
    for name in ("web-answer", "web-plot", "web-citation", "web-upload", "web-answer-zh"):
        print(f"wrote docs/{name}.png")


if __name__ == "__main__":
    main()
