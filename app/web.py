"""The Gradio web chat (``trainfix web``): paste or drop a log, get a cited answer with the metric plot.

This module only builds the page and wires events; conversations live in :mod:`app.web_session`,
rendering in :mod:`app.web_render`, uploads in :mod:`app.web_upload`, feedback in :mod:`app.feedback`.
It imports Gradio, so only the ``web`` command (and tests) import it.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import threading
from pathlib import Path

import gradio as gr

from app.feedback import OUT_OF_SCOPE, FeedbackStore
from app.render import source_label
from app.web_render import source_html, user_markdown
from app.web_session import NARROW_BYTES, Answer, Conversation
from app.web_upload import EXTENSIONS, Progress, mib, prepared
from assistant.api import Assistant
from assistant.config import Settings
from assistant.errors import InputError, TrainfixError
from kb.taxonomy import modes

SOURCE_HINT = ('<div class="tf-source-empty">Click a numbered citation such as <b>[1]</b> in an answer to see the '
               "cited lines of the source here.</div>")
FOLLOW_UP_SEP = "="
SESSION_TTL = 4 * 3600  # seconds an idle conversation (and the pastes it holds) stays in memory

# Citation markers are Markdown links to "#tfcite-<answer>-<n>"; a click hands the key to Python
# through a hidden textbox and button (Gradio has no per-link events), so the page never navigates.
JS = """
() => {
  const limit = __LIMIT__;
  // Citation markers are Markdown links to "#tfcite-<answer>-<n>"; a click hands the key to Python through a
  // hidden textbox and button (Gradio has no per-link events), so the page never navigates away.
  const send = (boxId, buttonId, value) => {
    const box = document.querySelector(`#${boxId} textarea, #${boxId} input`);
    if (!box) return;
    box.value = value + '@' + Date.now();
    box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(() => document.querySelector(`#${buttonId}`)?.click(), 50);
  };
  document.addEventListener('click', (ev) => {
    const a = ev.target.closest ? ev.target.closest('a[href*="#tfcite-"]') : null;
    if (!a) return;
    ev.preventDefault();
    ev.stopPropagation();
    send('tf-cite-key', 'tf-cite-open', a.getAttribute('href').split('#tfcite-')[1]);
  }, true);
  // An upload over the limit is stopped before it is sent, and the chat says why (the server refuses it too).
  const tooLarge = (files) => Array.from(files || []).find((f) => f.size > limit);
  const refuse = (ev, file) => {
    ev.preventDefault();
    ev.stopImmediatePropagation();
    if (ev.target && ev.target.type === 'file') ev.target.value = '';
    send('tf-notice-key', 'tf-notice-open', JSON.stringify({name: file.name, size: file.size}));
  };
  document.addEventListener('change', (ev) => {
    if (!ev.target.closest || !ev.target.closest('#tf-input') || ev.target.type !== 'file') return;
    const big = tooLarge(ev.target.files);
    if (big) refuse(ev, big);
  }, true);
  document.addEventListener('drop', (ev) => {
    if (!ev.target.closest || !ev.target.closest('#tf-input')) return;
    const big = tooLarge(ev.dataTransfer && ev.dataTransfer.files);
    if (big) refuse(ev, big);
  }, true);
}
"""

CSS = """
#tf-source .tf-source-body { max-height: 70vh; overflow: auto; font-size: 12px; line-height: 1.45;
  white-space: pre-wrap; word-break: break-word; padding: 8px; }
#tf-source .tf-row { display: block; }
#tf-source .tf-hl { background: #fff3b0; color: #111; }
#tf-source .tf-ln { color: #888; user-select: none; }
#tf-source .tf-kind { color: #666; font-size: 0.9em; }
#tf-source .tf-gap { color: #888; }
.tf-limits { font-size: 0.9em; color: var(--body-text-color-subdued); }
"""


def _system(text: str) -> dict:
    return {"role": "assistant", "content": text}


def _error(err: Exception) -> dict:
    return _system(f"⚠️ {err}")


def _progress_text(name: str, p: Progress) -> str:
    shown = name.replace("`", "ʼ")
    if p.read is not None and p.total:
        share = min(1.0, p.read / p.total)
        bar = "█" * int(share * 20) + "░" * (20 - int(share * 20))
        return f"Triaging `{shown}`: {bar} {share:.0%} of {mib(p.total)} read · {p.elapsed:.0f} s"
    return f"Triaging `{shown}` ({mib(p.total)}), one streaming pass · {p.elapsed:.0f} s"


class WebApp:
    """The page's event handlers, sharing one :class:`Assistant` and one feedback store."""

    def __init__(self, settings: Settings | None = None, assistant: Assistant | None = None) -> None:
        self.settings = settings or Settings()
        self.assistant = assistant or Assistant(self.settings)
        self.store = FeedbackStore(self.settings.data_dir)
        self.limit = int(self.settings.web_max_upload_mb * 1024 * 1024)
        self.lock = threading.Lock()

    # -- helpers --------------------------------------------------------------------------------

    def _conversation(self, conv: Conversation | None) -> Conversation:
        return conv if conv is not None else Conversation(self.assistant, lock=self.lock)

    def _messages(self, answer: Answer) -> list[dict]:
        """The chat messages of one answer: the text (with follow-up buttons), then the plot if any."""
        out: list[dict] = [{"role": "assistant", "content": answer.markdown}]
        if answer.plot:
            # Handed over in memory: Gradio writes it to its own cache (cleaned by delete_cache), no file of ours.
            from PIL import Image

            picture = Image.open(io.BytesIO(answer.plot))
            out.append({"role": "assistant", "content": gr.Image(picture, show_label=False, label="metric plot",
                                                                    buttons=["download", "fullscreen"])})
        d = answer.diagnosis
        if d.follow_up and answer.narrowable:
            # The questions are in the answer text; with several, each button names its question's id.
            # Gradio shows the options of the chat's last message, so they go on the answer's last one.
            several = len(d.follow_up) > 1
            out[-1]["options"] = [{"label": f"{fu.id}: {opt}" if several else opt,
                                   "value": f"{fu.id}{FOLLOW_UP_SEP}{opt}"} for fu in d.follow_up for opt in fu.options]
        return out

    def _index(self, conv: Conversation, chat: list, answer: Answer, new: list[dict]) -> None:
        """Remember which chat messages show which answer (for thumbs up/down)."""
        start = len(chat)
        for i in range(len(new)):
            conv.message_answers[start + i] = answer.key

    # -- events ---------------------------------------------------------------------------------

    def submit(self, box: dict | None, chat: list | None, conv: Conversation | None, lang: str):
        """Send a paste/question, or triage an uploaded log with progress (a generator: the chat streams).

        Any failure ends as a message in the chat and the input box is usable again: the app keeps serving.
        """
        conv = self._conversation(conv)
        chat = list(chat or [])
        try:
            yield from self._submit(box, chat, conv, lang)
        except Exception as err:  # noqa: BLE001 - the edge: never a traceback in the page
            chat.append(_system(f"⚠️ Something went wrong ({type(err).__name__}); nothing was stored. "
                                "Try again, or run `trainfix diagnose` on the input."))
            yield chat, conv, gr.MultimodalTextbox(value=None, interactive=True)

    def _submit(self, box: dict | None, chat: list, conv: Conversation, lang: str):
        box = box or {}
        text = (box.get("text") or "").strip("\n")
        files = box.get("files") or []
        cleared = gr.MultimodalTextbox(value=None, interactive=False)
        if files:
            yield from self._upload(files[0], text, chat, conv, lang, cleared)
            return
        if not text.strip():
            chat.append(_error(InputError("The message is empty: paste a traceback or log lines, drop a log file, "
                                          "or ask a question.")))
            yield chat, conv, gr.MultimodalTextbox(value=None, interactive=True)
            return
        chat.append({"role": "user", "content": user_markdown(text)})
        chat.append(_system("…"))
        yield chat, conv, cleared
        chat.pop()
        self._answer_into(chat, conv, lambda: conv.send(text, lang))  # type: ignore[arg-type]
        yield chat, conv, gr.MultimodalTextbox(value=None, interactive=True)

    def _answer_into(self, chat: list, conv: Conversation, ask) -> None:
        """Append the answer ``ask()`` returns to ``chat`` (indexed for citations and feedback), or its error."""
        try:
            answer = ask()
        except TrainfixError as err:
            chat.append(_error(err))
        else:
            new = self._messages(answer)
            self._index(conv, chat, answer, new)
            chat.extend(new)

    def _upload(self, file: str | dict, text: str, chat: list, conv: Conversation, lang: str, cleared):
        path = Path(file["path"] if isinstance(file, dict) else file)
        name = (file.get("orig_name") if isinstance(file, dict) else None) or path.name
        size = path.stat().st_size if path.exists() else 0
        chat.append({"role": "user", "content": f"File `{name.replace('`', 'ʼ')}` ({mib(size)})"})
        if text.strip():
            chat.append({"role": "user", "content": user_markdown(text)})
        chat.append(_system(f"Reading `{name.replace('`', 'ʼ')}`…"))
        yield chat, conv, cleared
        try:
            with prepared(path, name, self.limit) as upload:
                answer = None
                for item in conv.upload(upload, lang):  # type: ignore[arg-type]
                    if isinstance(item, Progress):
                        chat[-1] = _system(_progress_text(upload.name, item))
                        yield chat, conv, cleared
                    else:
                        answer = item
        except TrainfixError as err:
            chat[-1] = _error(err)
        else:
            chat.pop()
            new = self._messages(answer)
            if not answer.narrowable:
                new[0]["content"] += (f"\n\n*This log is over {mib(NARROW_BYTES)}: follow-up answers cannot narrow "
                                      "it here; run `trainfix diagnose FILE --answer id=value` locally.*")
            self._index(conv, chat, answer, new)
            chat.extend(new)
        yield chat, conv, gr.MultimodalTextbox(value=None, interactive=True)

    def refuse_upload(self, notice: str, chat: list | None) -> list:
        """The page stopped an upload over the limit: say so in the chat."""
        import json

        chat = list(chat or [])
        try:
            info = json.loads(notice.rsplit("@", 1)[0])
            name, size = str(info["name"]), int(info["size"])
        except (ValueError, KeyError, TypeError):
            return chat
        shown = name.replace("`", "ʼ")
        chat.append({"role": "user", "content": f"File `{shown}` ({mib(size)})"})
        chat.append(_error(InputError(
            f"{shown} is {mib(size)}, over the upload limit of {mib(self.limit)}; it was not uploaded. "
            "Upload the last part of the log (e.g. `tail -c 50M train.log > tail.log`) or run "
            "`trainfix diagnose train.log` locally")))
        return chat

    def js(self) -> str:
        """The page script, with this server's upload limit."""
        return JS.replace("__LIMIT__", str(self.limit))

    def follow_up(self, chat: list | None, conv: Conversation | None, lang: str, evt: gr.SelectData):
        """A click on a follow-up option: narrow the last diagnosis with that answer."""
        conv = self._conversation(conv)
        chat = list(chat or [])
        fu_id, _, value = str(evt.value).partition(FOLLOW_UP_SEP)
        chat.append({"role": "user", "content": user_markdown(value)})
        self._answer_into(chat, conv, lambda: conv.follow_up(fu_id, value, lang))  # type: ignore[arg-type]
        return chat, conv

    def new_incident(self, conv: Conversation | None):
        """Clear the conversation: the next message starts a new diagnosis."""
        if conv is not None:
            conv.reset()
        return [], conv, SOURCE_HINT

    def open_citation(self, key: str, conv: Conversation | None) -> str:
        """The cited section of the source, cited lines highlighted, for the side panel."""
        answer_key, _, rest = (key or "").partition("-")
        number = rest.split("@", 1)[0]
        answer = conv.answers.get(answer_key) if conv else None
        if answer is None or not number.isdigit() or int(number) not in answer.citations:
            return SOURCE_HINT
        c = answer.citations[int(number)]
        return source_html(c, self.settings.sources_dir, title=source_label(c, answer.diagnosis, answer.diagnosis.language))

    def rate(self, conv: Conversation | None, evt: gr.LikeData) -> str:
        """Thumbs up/down on an answer: stored with the redacted input."""
        answer = self._answer_at(conv, evt.index)
        if answer is None:
            return ""
        rating = None if evt.liked is None else (1 if evt.liked is True or evt.liked == "Like" else -1)
        try:
            if answer.feedback_id is None:
                answer.feedback_id = self.store.record(answer.diagnosis, answer.input_text, input_kind=answer.input_kind)
            self.store.rate(answer.feedback_id, rating)
        except TrainfixError as err:  # locked, read-only or full: say so; the answer stays
            return str(err)
        return "Thanks — feedback saved (the input is stored redacted)."

    def correct(self, conv: Conversation | None, real_mode: str | None, real_cause: str) -> str:
        """The user's account of the real cause, for the latest answer."""
        answer = conv.last if conv else None
        if answer is None:
            return "There is no answer yet to give feedback on."
        if not real_mode and not (real_cause or "").strip():
            return "Pick the failure mode or describe the real cause first."
        try:
            if answer.feedback_id is None:
                answer.feedback_id = self.store.record(answer.diagnosis, answer.input_text, input_kind=answer.input_kind)
            self.store.correct(answer.feedback_id, real_mode, real_cause)
        except TrainfixError as err:
            return str(err)
        return "Thanks — the real cause was saved with the last answer (redacted)."

    @staticmethod
    def _answer_at(conv: Conversation | None, index) -> Answer | None:
        if conv is None:
            return None
        i = index[0] if isinstance(index, (list, tuple)) else index
        key = conv.message_answers.get(i)
        return conv.answers.get(key) if key is not None else None

    def api_diagnose(self, text: str, lang: str = "auto") -> dict:
        """Diagnose one paste (no conversation): ``{"markdown": ..., "diagnosis": Diagnosis as JSON}``."""
        if lang not in ("auto", "en", "zh"):
            raise gr.Error("lang must be auto, en or zh")
        try:
            if not text or not text.strip():
                raise InputError("The message is empty: pass a traceback, log lines or a question.")
            if len(text) > self.limit:  # the upload limit: a JSON body is not bounded by Gradio's max_file_size
                raise InputError(f"The text is {len(text):,} characters; the API accepts at most {self.limit:,} "
                                 f"(the upload limit, {self.settings.web_max_upload_mb:g} MiB). Send the last part of "
                                 "the log, or run `trainfix diagnose FILE`, which streams a file of any size.")
            d = self.assistant.diagnose(text, lang=None if lang == "auto" else lang)  # type: ignore[arg-type]
        except TrainfixError as err:
            raise gr.Error(str(err)) from None
        from app.render import markdown

        return {"markdown": markdown(d), "diagnosis": d.model_dump(mode="json")}

    # -- page -----------------------------------------------------------------------------------

    def build(self) -> gr.Blocks:
        """The Blocks page."""
        limit = f"{self.settings.web_max_upload_mb:g} MiB"
        with gr.Blocks(title="trainfix", analytics_enabled=False, delete_cache=(3600, 3600)) as demo:
            conv = gr.State(None, time_to_live=SESSION_TTL)  # a paste is kept in memory only while it may be narrowed
            gr.Markdown("## trainfix — diagnose a failed training run\nPaste a traceback, log lines or a question "
                        "(English or 中文), or drop a log file. Answers cite the knowledge base.")
            with gr.Row(equal_height=False):
                with gr.Column(scale=3):
                    chat = gr.Chatbot(elem_id="tf-chat", height=620, sanitize_html=True, allow_tags=False,
                                      render_markdown=True, latex_delimiters=[], buttons=["copy"],
                                      feedback_options=("Like", "Dislike"), show_label=False,
                                      placeholder="Paste an error or drop a log to start.")
                    gr.Markdown(f"Log files: {' '.join(EXTENSIONS)}, or the same gzipped (.gz); up to **{limit}** "
                                "per upload (larger: upload the tail, or run `trainfix diagnose FILE`). "
                                "Uploads are deleted right after triage.", elem_classes="tf-limits")
                    box = gr.MultimodalTextbox(
                        elem_id="tf-input", show_label=False, lines=4, max_lines=16, file_count="single",
                        file_types=[*EXTENSIONS, ".gz"], max_plain_text_length=4 * 1024 * 1024,
                        placeholder="Paste a traceback, log lines or a question — Shift+Enter or the arrow sends",
                    )
                    with gr.Row():
                        lang = gr.Radio(["auto", "en", "zh"], value="auto", label="Answer language",
                                        elem_id="tf-lang", scale=3)
                        new = gr.Button("New incident", elem_id="tf-new", scale=1)
                    with gr.Accordion("What was the real cause? (optional, about the last answer)", open=False,
                                      elem_id="tf-feedback"):
                        choices = [(f"{m.en} ({m.id})", m.id) for m in modes()]
                        real_mode = gr.Dropdown([*choices, ("not a training failure", OUT_OF_SCOPE)],
                                                label="Failure mode", value=None, elem_id="tf-real-mode")
                        real_cause = gr.Textbox(label="In your words", lines=2, elem_id="tf-real-cause")
                        send_fb = gr.Button("Send", elem_id="tf-send-feedback")
                    status = gr.Markdown(elem_id="tf-status")
                with gr.Column(scale=2):
                    gr.Markdown("#### Source")
                    source = gr.HTML(SOURCE_HINT, elem_id="tf-source")
            cite_key = gr.Textbox(visible="hidden", elem_id="tf-cite-key")
            cite_open = gr.Button(visible="hidden", elem_id="tf-cite-open")
            notice_key = gr.Textbox(visible="hidden", elem_id="tf-notice-key")
            notice_open = gr.Button(visible="hidden", elem_id="tf-notice-open")

            private = {"api_visibility": "private"}
            box.submit(self.submit, [box, chat, conv, lang], [chat, conv, box], **private)
            chat.option_select(self.follow_up, [chat, conv, lang], [chat, conv], **private)
            chat.like(self.rate, [conv], [status], **private)
            new.click(self.new_incident, [conv], [chat, conv, source], **private)
            chat.clear(self.new_incident, [conv], [chat, conv, source], **private)  # the chat's own bin icon
            cite_open.click(self.open_citation, [cite_key, conv], [source], **private)
            notice_open.click(self.refuse_upload, [notice_key, chat], [chat], **private)
            send_fb.click(self.correct, [conv, real_mode, real_cause], [status], **private)
            gr.api(self.api_diagnose, api_name="diagnose")
        return demo


def is_loopback(host: str) -> bool:
    """True for 127.0.0.1, ::1 and localhost."""
    if host == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def auth_for(settings: Settings, host: str) -> tuple[str, str] | None:
    """Gradio ``auth`` from settings; binding beyond loopback without a login is refused."""
    if settings.web_user and settings.web_password:
        return settings.web_user, settings.web_password.get_secret_value()
    if not is_loopback(host):
        raise TrainfixError(f"binding to {host} makes the chat reachable from other machines: set a login first "
                            "(TRAINFIX_WEB_USER and TRAINFIX_WEB_PASSWORD, e.g. in .env)")
    return None


def launch(settings: Settings, *, host: str = "127.0.0.1", port: int = 7860, block: bool = True,
           assistant: Assistant | None = None) -> gr.Blocks:
    """Build and serve the page (never a share link). ``block=False`` returns once it is serving."""
    auth = auth_for(settings, host)
    web = WebApp(settings, assistant)
    demo = web.build()
    demo.queue(default_concurrency_limit=4).launch(
        server_name=host, server_port=port, share=False, auth=auth, max_file_size=web.limit,
        state_session_capacity=500,
        prevent_thread_lock=not block, quiet=True, show_error=False, js=web.js(), css=CSS,
        footer_links=["api"], ssr_mode=False, enable_monitoring=False, pwa=False, mcp_server=False,
    )
    return demo
