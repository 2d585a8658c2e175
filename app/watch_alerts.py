"""Alerts of a watched run (``trainfix watch``, the Trainer callback): a finding as a short cited answer, printed,
logged or posted to Slack.

An alert is the finding's :class:`~assistant.diagnosis.Diagnosis` cut to what someone paged needs: what was
found and at which step, the evidence, the top causes, the first fix, the alternatives, and the sources those
cite — rendered by the same :mod:`app.render` / :mod:`app.slack_blocks` as every other answer, redacted again
before it leaves the machine. Slack is reached either through an incoming webhook (a plain HTTPS POST, no
plot: webhooks take no files) or with the bot token in one channel (``chat.postMessage``, plot uploaded into
the alert's thread); slack_sdk is imported only for the latter.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass

from app.render import markdown
from app.slack_blocks import SlackMessage, answer_messages, escape, redact_blocks
from assistant.diagnosis import Diagnosis
from assistant.errors import TrainfixError
from assistant.redact import redact
from assistant.watch import WatchFinding

log = logging.getLogger("trainfix.watch")
MAX_CAUSES = 3
HEAD = {"en": {"failure": ":rotating_light: trainfix watch — {where}: {what}",
               "warning": ":warning: trainfix watch (early warning) — {where}: {what}"},
        "zh": {"failure": ":rotating_light: trainfix watch — {where}：{what}",
               "warning": ":warning: trainfix watch（预警）— {where}：{what}"}}


def alert_view(d: Diagnosis) -> Diagnosis:
    """The diagnosis cut to an alert: top causes, the first fix, no follow-up questions or reading list."""
    if not d.candidates:
        return d
    top = d.candidates[0].model_copy(update={"causes": d.candidates[0].causes[:MAX_CAUSES],
                                              "fixes": d.candidates[0].fixes[:1], "diagnosis_steps": [],
                                              "dont": [], "left_out": []})
    return d.model_copy(update={"candidates": [top, *d.candidates[1:]], "follow_up": [], "passages": [],
                                "similar": []})


def headline(finding: WatchFinding, source: str, lang: str) -> str:
    """One line: what was found, where (plain text; redacted)."""
    what = finding.zh if lang == "zh" else finding.en
    return redact(HEAD[lang][finding.kind].format(where=source, what=what)).text


def alert_markdown(finding: WatchFinding, d: Diagnosis, source: str) -> str:
    """The alert as Markdown for a terminal or a log: the headline, then the cut answer with its sources."""
    head = headline(finding, source, d.language).replace(":rotating_light: ", "").replace(":warning: ", "")
    return redact(f"### {head}\n\n" + markdown(alert_view(d))).text


def alert_messages(finding: WatchFinding, d: Diagnosis, source: str) -> list[SlackMessage]:
    """The alert as Slack messages (Block Kit), the headline first."""
    return answer_messages(alert_view(d), note=escape(headline(finding, source, d.language)))


def _redacted(msg: SlackMessage) -> dict:
    return {"text": redact(msg.text).text, "blocks": redact_blocks(msg.blocks)}


@dataclass
class SlackTarget:
    """Where alerts go: an incoming webhook URL, or a channel the bot token posts in (with ``api_url``)."""

    webhook_url: str | None = None
    token: str | None = None
    channel: str | None = None
    api_url: str = "https://slack.com/api/"
    timeout: float = 20.0

    def __post_init__(self) -> None:
        if not self.webhook_url and not (self.token and self.channel):
            raise TrainfixError("Slack alerts need TRAINFIX_SLACK_WEBHOOK_URL (an incoming webhook), or "
                                "TRAINFIX_SLACK_BOT_TOKEN and a channel (--slack-channel or TRAINFIX_SLACK_WATCH_CHANNEL)")

    def post(self, messages: list[SlackMessage], png: bytes | None = None) -> None:
        """Post an alert; raises :class:`TrainfixError` when Slack refuses it or cannot be reached."""
        if self.webhook_url:
            for msg in messages:
                self._webhook(_redacted(msg))
            return
        self._bot(messages, png)

    def _webhook(self, payload: dict) -> None:
        req = urllib.request.Request(self.webhook_url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - the configured webhook
                resp.read()
        except urllib.error.HTTPError as err:
            raise TrainfixError(f"the Slack webhook refused the alert (HTTP {err.code})") from None
        except OSError as err:
            raise TrainfixError(f"cannot reach the Slack webhook ({type(err).__name__})") from None

    def _bot(self, messages: list[SlackMessage], png: bytes | None) -> None:
        from slack_sdk import WebClient
        from slack_sdk.errors import SlackApiError

        client = WebClient(token=self.token, base_url=self.api_url, timeout=int(self.timeout))
        try:
            thread_ts = None
            for msg in messages:
                body = _redacted(msg)
                resp = client.chat_postMessage(channel=self.channel, thread_ts=thread_ts, text=body["text"],
                                               blocks=body["blocks"], unfurl_links=False, unfurl_media=False)
                thread_ts = thread_ts or resp["ts"]
            if png:
                client.files_upload_v2(channel=self.channel, thread_ts=thread_ts, content=png,
                                       filename="trainfix-watch.png", title="metrics at the alert")
        except SlackApiError as err:
            raise TrainfixError(f"Slack refused the alert ({err.response.get('error', 'error')})") from None
        except OSError as err:
            raise TrainfixError(f"cannot reach the Slack API at {self.api_url} ({type(err).__name__})") from None


def plot_png(d: Diagnosis) -> bytes | None:
    """The metric plot for the alert, or None (no series, or matplotlib missing: the alert goes without it)."""
    try:
        from app.plot import metrics_png

        return metrics_png(d.metrics)
    except ImportError:
        return None


class Reporter:
    """Turns findings into alerts: a cited answer (rules only, no model loaded), written with ``echo`` and
    posted to ``slack`` when set. A Slack failure is a warning (``warn``); the watch goes on."""

    def __init__(self, settings, *, source: str, echo, warn, slack: SlackTarget | None = None,
                 lang: str | None = None, as_json: bool = False) -> None:
        self.settings = settings
        self.source = source
        self.echo = echo
        self.warn = warn
        self.slack = slack
        self.lang = lang
        self.as_json = as_json
        self._assistant = None
        self.sent: list[tuple[WatchFinding, Diagnosis]] = []

    @property
    def assistant(self):
        if self._assistant is None:
            from assistant.api import Assistant

            self._assistant = Assistant(self.settings, retrieval="never")
        return self._assistant

    def report(self, finding: WatchFinding) -> Diagnosis:
        d = self.assistant.explain(finding.triage, lang=self.lang)
        self.sent.append((finding, d))
        if self.as_json:
            data = {"finding": finding.model_dump(exclude={"triage"}), "diagnosis": alert_view(d).model_dump()}
            self.echo(redact(json.dumps(data, ensure_ascii=False)).text)
        else:
            self.echo(alert_markdown(finding, d, self.source))
        if self.slack is not None:
            try:
                self.slack.post(alert_messages(finding, d, self.source),
                                None if self.slack.webhook_url else plot_png(d))
            except TrainfixError as err:
                self.warn(f"alert not posted to Slack: {err}")
        return d
