"""The Slack bot's Bolt app: listeners for mentions, DMs, ``/trainfix``, shared log files, follow-up and
feedback buttons. It parses what Slack sends, calls the :class:`~assistant.api.Assistant` and posts what
:mod:`app.slack_blocks` renders; errors become messages in the thread here, never tracebacks.

Every paste is redacted (:func:`assistant.redact.redact`) before the Assistant sees it, and everything
posted passes the redactor once more. Event retries are dropped by :class:`app.slack_events.EventLog`.
Bolt acknowledges events before the listener runs, and the other listeners call ``ack()`` first, so
Slack's 3-second deadline holds however long a diagnosis takes. Imports slack_bolt: only the ``slack``
command (and tests) import this module.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from concurrent.futures import Executor
from dataclasses import dataclass

from slack_bolt import App, BoltResponse
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from app.feedback import FeedbackStore
from app.plot import metrics_png
from app.slack_blocks import (
    FEEDBACK_DOWN,
    FEEDBACK_UP,
    FOLLOW_UP_ACTION,
    MAX_FOLLOW_UP_BUTTONS,
    SLACK_LABELS,
    SlackMessage,
    answer_messages,
    code_block,
    escape,
    notice_message,
    parse_follow_up,
    redact_blocks,
)
from app.slack_events import EventLog
from app.slack_files import download
from app.slack_settings import SlackSettings
from app.slack_threads import ThreadStore
from app.web_session import FEEDBACK_TAIL, NARROW_BYTES
from app.web_upload import prepared
from assistant.api import Assistant, Exchange
from assistant.diagnosis import Diagnosis
from assistant.errors import TrainfixError
from assistant.normalise import text_language
from assistant.redact import redact

log = logging.getLogger("trainfix.slack")
MAX_PASTE = 4 * 1024 * 1024  # as the web chat
ASKED_EXCERPT = 600  # characters of a /trainfix paste quoted above its answer
RATE_LIMIT_RETRIES = 3

ERRORS = {
    "en": {"empty": "Paste a traceback, log lines or a question after the mention (or share a log file with it).",
           "too_long": "The paste is {n:,} characters; paste at most {max:,}, or share the log as a file.",
           "failed": "Something went wrong ({kind}); nothing was stored. Try again, or run `trainfix diagnose` on the input.",
           "no_history": "There is nothing to narrow in this thread any more: paste the error or log again.",
           "expired": "This answer is too old to rate.", "thanks": "Thanks — feedback saved (the input is stored redacted).",
           "plot_failed": "(the metric plot could not be posted: {kind})",
           "not_in_channel": "I cannot post in this channel: invite me first (`/invite @trainfix`), or DM me."},
    "zh": {"empty": "请在提及之后贴出 traceback、日志或问题（或者在同一条消息里附上日志文件）。",
           "too_long": "贴出的内容有 {n:,} 个字符；最多 {max:,} 个，或者把日志作为文件分享。",
           "failed": "出错了（{kind}），没有保存任何内容。请重试，或在本地运行 `trainfix diagnose`。",
           "no_history": "这个话题里已经没有可以缩小范围的诊断了：请重新贴出报错或日志。",
           "expired": "这个回答太久了，无法评价。", "thanks": "谢谢，反馈已保存（输入内容已隐去密钥）。",
           "plot_failed": "（指标曲线无法发送：{kind}）",
           "not_in_channel": "我无法在这个频道发消息：请先邀请我（`/invite @trainfix`），或者私信我。"},
}


def slack_text(text: str, bot_user_id: str | None = None) -> str:
    """What the user typed, from Slack's message format: the bot's own mention dropped, ``<url|label>``,
    ``<@U…>``, ``<#C…|name>`` and ``<!here>`` back to plain text, ``&amp; &lt; &gt;`` unescaped and code
    fences removed. Plain string scanning: linear in the input, whatever it holds."""
    out: list[str] = []
    pos = 0
    while (start := text.find("<", pos)) != -1:
        end = text.find(">", start)
        if end == -1:
            break
        out.append(text[pos:start])
        inner = text[start + 1:end]
        target, _, label = inner.partition("|")
        if bot_user_id and target == f"@{bot_user_id}":
            pass  # "@trainfix" itself is not part of the paste
        elif target.startswith(("@", "#")):
            out.append(target[0] + label if label else target)
        elif target.startswith("!"):
            out.append("@" + (label or target[1:].split("^", 1)[0]))
        else:
            out.append(label or target)
        pos = end + 1
    out.append(text[pos:])
    plain = "".join(out).replace("```", "\n")
    return plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()


@dataclass
class Where:
    """Where an answer goes: a channel and the thread (``thread_ts`` None = start a new thread)."""

    channel: str
    thread_ts: str | None


class SlackBot:
    """The listeners' work, sharing one Assistant (one call at a time) and the bot's stores."""

    def __init__(self, settings: SlackSettings, assistant: Assistant) -> None:
        self.settings = settings
        self.assistant = assistant
        self.events = EventLog(settings.data_dir)
        self.threads = ThreadStore(settings.data_dir)
        self.feedback = FeedbackStore(settings.data_dir)
        self.lock = threading.Lock()  # the Assistant builds its index lazily on first use

    # -- posting -------------------------------------------------------------------------------

    def post(self, client: WebClient, where: Where, messages: list[SlackMessage]) -> str | None:
        """Post ``messages`` in order in the thread (the first one starts it when there is none); returns the thread ts."""
        thread_ts = where.thread_ts
        for msg in messages:
            resp = client.chat_postMessage(channel=where.channel, thread_ts=thread_ts, text=redact(msg.text).text,
                                           blocks=redact_blocks(msg.blocks), unfurl_links=False, unfurl_media=False)
            thread_ts = thread_ts or resp["ts"]
        return thread_ts

    def post_answer(self, client: WebClient, where: Where, d: Diagnosis, input_text: str, *, input_kind: str = "paste",
                    secret_kinds: list[str] = (), note: str | None = None) -> str | None:
        """The answer's messages, then its metric plot (when the input has a series) in the same thread.

        The thread's conversation is stored before this is called: a button can be clicked as soon as it shows.
        """
        answer_id = self.threads.save_answer(d, input_text, input_kind)
        thread_ts = self.post(client, where, answer_messages(d, answer_id=answer_id, secret_kinds=secret_kinds,
                                                             note=note))
        try:
            png = metrics_png(d.metrics)
            if png:
                client.files_upload_v2(channel=where.channel, thread_ts=thread_ts, content=png,
                                       filename="trainfix-metrics.png", title=SLACK_LABELS[d.language]["plot"])
        except Exception as err:  # noqa: BLE001 - a failed plot must not lose the answer already posted
            log.warning("metric plot not posted: %s", type(err).__name__)
            self.post(client, Where(where.channel, thread_ts),
                      [notice_message(escape(ERRORS[d.language]["plot_failed"].format(kind=type(err).__name__)))])
        return thread_ts

    def notice(self, client: WebClient, where: Where, text: str) -> None:
        """A short message (an error) in the thread; the text is escaped here."""
        self.post(client, where, [notice_message(":warning: " + escape(text))])

    # -- work ----------------------------------------------------------------------------------

    def answer_text(self, client: WebClient, where: Where, raw: str, *, lead_user: str | None = None) -> None:
        """A paste, a question or a reply in a thread; ``lead_user`` (slash command) quotes the paste first."""
        lang = text_language(raw[:4000])
        if not raw.strip():
            self.notice(client, where, ERRORS[lang]["empty"])
            return
        if len(raw) > MAX_PASTE:
            self.notice(client, where, ERRORS[lang]["too_long"].format(n=len(raw), max=MAX_PASTE))
            return
        red = redact(raw)
        lead: list[SlackMessage] = []
        if lead_user:
            excerpt = red.text if len(red.text) <= ASKED_EXCERPT else red.text[:ASKED_EXCERPT] + "\n…"
            lead = [notice_message(SLACK_LABELS[lang]["asked"].format(user=escape(lead_user)) + "\n" + code_block(excerpt))]
        history = self.threads.history(where.channel, where.thread_ts) if where.thread_ts else []
        with self.lock:
            d = self.assistant.ask(red.text, history)
        if lead:  # a slash command: the quoted paste opens the thread the answer goes in
            where = Where(where.channel, self.post(client, where, lead))
        self.threads.append(where.channel, where.thread_ts or "", red.text, d)
        self.post_answer(client, where, d, red.text, secret_kinds=red.kinds)

    def answer_file(self, client: WebClient, where: Where, file_id: str) -> None:
        """A shared log file: downloaded with the web chat's limits, triaged streamed, deleted afterwards."""
        path, name = download(client, file_id, self.settings.slack_upload_limit)
        with prepared(path, name, self.settings.slack_upload_limit) as upload:
            with self.lock:
                d = self.assistant.diagnose_file(upload.path)
            narrowable = upload.size <= NARROW_BYTES
            with upload.path.open("rb") as fh:
                if not narrowable:
                    fh.seek(max(0, upload.size - FEEDBACK_TAIL))
                text = fh.read().decode("utf-8", errors="replace")
        red = redact(text)
        # A small log is kept so that a reply narrows it; a large one starts over (as in the web chat).
        self.threads.append(where.channel, where.thread_ts or "", red.text, d, narrowable=narrowable)
        self.post_answer(client, where, d, red.text, input_kind="file", secret_kinds=red.kinds)

    def narrow(self, client: WebClient, where: Where, follow_up_id: str, value: str) -> None:
        """A follow-up button: the thread's diagnosis re-run with that answer, posted in the thread."""
        history = self.threads.history(where.channel, where.thread_ts or "")
        origin = _origin(history)
        if not history or origin is None:
            self.notice(client, where, ERRORS["en"]["no_history"])
            return
        last = history[-1].diagnosis
        with self.lock:
            d = self.assistant.diagnose(origin, answers={**last.answers, follow_up_id: value}, lang=last.language)
        note = escape(SLACK_LABELS[d.language]["narrowed"].format(q=follow_up_id, v=value))
        self.threads.append(where.channel, where.thread_ts or "", value, d)
        self.post_answer(client, where, d, origin, note=note)

    def rate(self, client: WebClient, answer_id: str, rating: int, channel: str, user: str, thread_ts: str | None) -> None:
        """A 👍/👎 click: the answer and its redacted input go to the web chat's feedback store."""
        answer = self.threads.answer(answer_id)
        lang = answer.diagnosis.language if answer else "en"
        if answer is None:
            text = ERRORS[lang]["expired"]
        else:
            feedback_id = answer.feedback_id or self.feedback.record(answer.diagnosis, answer.input,
                                                                    input_kind=answer.input_kind)
            if answer.feedback_id is None:
                self.threads.set_feedback_id(answer.id, feedback_id)
            self.feedback.rate(feedback_id, rating)
            text = ERRORS[lang]["thanks"]
        client.chat_postEphemeral(channel=channel, user=user, thread_ts=thread_ts, text=text)

    def guarded(self, client: WebClient, where: Where, work, lang_hint: str = "") -> None:
        """Run ``work()``; any failure becomes a message in the thread (the edge: never a traceback in Slack)."""
        lang = text_language(lang_hint[:4000]) if lang_hint else "en"
        try:
            work()
        except TrainfixError as err:
            self._notice_safely(client, where, str(err))
        except SlackApiError as err:
            log.warning("Slack API error: %s", err.response.get("error"))
            if err.response.get("error") == "not_in_channel":
                raise
        except Exception as err:  # noqa: BLE001 - the edge
            log.exception("slack handler failed")
            self._notice_safely(client, where, ERRORS[lang]["failed"].format(kind=type(err).__name__))

    def _notice_safely(self, client: WebClient, where: Where, text: str) -> None:
        with contextlib.suppress(Exception):  # Slack itself may be what failed: the log has it
            self.notice(client, where, text)


def _origin(history: list[Exchange]) -> str | None:
    for ex in reversed(history):
        if not ex.diagnosis.answers and ex.diagnosis.kind == "diagnosis":
            return ex.message
    return None


def web_client(settings: SlackSettings) -> WebClient:
    """The Web API client: the bot token, the configured base URL, and HTTP 429 retried after ``Retry-After``."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    client = WebClient(token=token, base_url=settings.slack_api_url)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES))
    return client


def build_app(settings: SlackSettings, assistant: Assistant, *, client: WebClient | None = None,
              socket_mode: bool = False, executor: Executor | None = None) -> tuple[App, SlackBot]:
    """The Bolt app with trainfix's listeners, and the :class:`SlackBot` behind them.

    HTTP mode needs ``settings.slack_signing_secret`` (Bolt checks every request's signature and its
    5-minute timestamp window); Socket Mode needs none (the WebSocket is authenticated by the app token).
    ``executor`` runs the listeners after the ack (default: Bolt's own pool); a caller that passes one can
    wait for the work in flight when it stops.
    """
    if settings.slack_bot_token is None:
        raise TrainfixError("set TRAINFIX_SLACK_BOT_TOKEN (the bot token, xoxb-…) to run the Slack bot")
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else ""
    if not socket_mode and not secret:
        raise TrainfixError("HTTP mode needs TRAINFIX_SLACK_SIGNING_SECRET; or set TRAINFIX_SLACK_APP_TOKEN for Socket Mode")
    bot = SlackBot(settings, assistant)
    try:  # Bolt checks the bot token (auth.test) right here
        app = App(client=client or web_client(settings), signing_secret=secret, process_before_response=False,
                  request_verification_enabled=not socket_mode, logger=logging.getLogger("trainfix.slack.bolt"),
                  **({"listener_executor": executor} if executor is not None else {}))
    except BoltError as err:
        raise TrainfixError(f"Slack refused the bot token: {err}") from None
    except OSError as err:  # URLError, refused connection, DNS
        raise TrainfixError(f"cannot reach the Slack API at {settings.slack_api_url} ({err})") from None

    @app.middleware
    def drop_retries(body, next):  # noqa: A002 - Bolt passes arguments by name
        """A retried event (same event id) was claimed already: acknowledge it and do nothing."""
        event_id = body.get("event_id") if isinstance(body, dict) and body.get("type") == "event_callback" else None
        if event_id and not bot.events.claim(str(event_id)):
            log.info("dropped a retry of event %s", event_id)
            # Slack ignores the header; it makes the drop visible to whoever reads the response (tests, proxies).
            return BoltResponse(status=200, body="", headers={"x-trainfix-duplicate": "1"})
        return next()

    def answer(client, event: dict, text: str) -> None:
        where = Where(event["channel"], event.get("thread_ts") or event["ts"])
        files = event.get("files") or []
        if files:
            # One message can arrive twice (app_mention and message.channels): its file is answered once.
            if bot.events.claim(f"message:{event['channel']}:{event['ts']}"):
                bot.guarded(client, where, lambda: bot.answer_file(client, where, files[0]["id"]), text)
        else:
            bot.guarded(client, where, lambda: bot.answer_text(client, where, text), text)

    @app.event("app_mention")
    def on_mention(event, context, client):
        if str(event.get("channel", "")).startswith("D") or event.get("channel_type") == "im":
            return  # a mention in a DM also arrives as a message event, handled there
        answer(client, event, slack_text(event.get("text") or "", context.get("bot_user_id")))

    @app.event("message")
    def on_message(event, context, client):
        if event.get("bot_id") or event.get("subtype") not in (None, "file_share"):
            return  # only people's own messages
        if event.get("channel_type") == "im":  # a DM with the bot: every message is for it
            answer(client, event, slack_text(event.get("text") or "", context.get("bot_user_id")))
            return
        # In a channel, only a log file shared in a thread where the bot was mentioned (and answered), or
        # with a mention (in case Slack sends no app_mention for a file share); other messages are not read.
        thread_ts = event.get("thread_ts")
        mentioned = f"<@{context.get('bot_user_id')}>" in (event.get("text") or "")
        if event.get("files") and (mentioned or (thread_ts and bot.threads.known(event["channel"], thread_ts))):
            answer(client, event, slack_text(event.get("text") or "", context.get("bot_user_id")))

    @app.command("/trainfix")
    def on_command(ack, command, client, respond):
        ack()
        where = Where(command["channel_id"], None)
        text = slack_text(command.get("text") or "")
        try:
            bot.guarded(client, where, lambda: bot.answer_text(client, where, text, lead_user=command["user_id"]), text)
        except SlackApiError:  # not a member of the channel: tell the user privately
            lang = text_language(text[:4000]) if text else "en"
            with contextlib.suppress(Exception):
                respond(text=ERRORS[lang]["not_in_channel"], response_type="ephemeral")

    def on_follow_up(ack, body, action, client):
        ack()
        parsed = parse_follow_up(action.get("value") or "")
        message = body.get("message") or {}
        container = body.get("container") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
        thread_ts = message.get("thread_ts") or container.get("thread_ts") or container.get("message_ts")
        if parsed is None or not channel or not thread_ts:
            return
        where = Where(channel, thread_ts)
        bot.guarded(client, where, lambda: bot.narrow(client, where, *parsed))

    for n in range(MAX_FOLLOW_UP_BUTTONS):  # exact action ids: no pattern matching on what Slack sends
        app.action(f"{FOLLOW_UP_ACTION}{n}")(on_follow_up)

    def on_feedback(ack, body, action, client):
        ack()
        message = body.get("message") or {}
        container = body.get("container") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
        user = (body.get("user") or {}).get("id")
        if not channel or not user:
            return
        rating = 1 if action.get("action_id") == FEEDBACK_UP else -1
        where = Where(channel, message.get("thread_ts") or container.get("thread_ts"))
        bot.guarded(client, where, lambda: bot.rate(client, str(action.get("value") or ""), rating, channel, user,
                                                     where.thread_ts))

    app.action(FEEDBACK_UP)(on_feedback)
    app.action(FEEDBACK_DOWN)(on_feedback)
    return app, bot
