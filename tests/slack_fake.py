"""A fake Slack at the border, for the Slack bot's tests: a Web API server on 127.0.0.1 (port 0) that
records every call, a signer for Slack's HTTP requests, a WebSocket server for Socket Mode, and a
Block Kit validator written from Slack's documented limits (independent of app.slack_blocks).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

BOT_USER = "UBOT"
TEAM = "T0TEST"
NOT_A_MEMBER = "C0NOTIN"  # a channel the bot was not invited to: chat.postMessage fails there
DEADLINE = 60.0  # seconds: generous, the tests poll and never assume a speed


@dataclass
class Call:
    method: str
    params: dict
    headers: dict
    at: float  # time.monotonic() when received
    body: bytes = b""
    reply: dict | None = None  # the JSON the fake answered with


@dataclass
class FakeSlack:
    """Slack's Web API on 127.0.0.1:<port>; ``calls`` is every request in order."""

    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # file id -> (name, content)
    socket_url: str | None = None
    rate_limit_next: dict[str, int] = field(default_factory=dict)  # method -> Retry-After for its next call
    token_ok: bool = True  # False: auth.test answers invalid_auth
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._ts = itertools.count(1)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                fake._handle(self)

            def do_GET(self):  # noqa: N802
                fake._handle(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.api_url = self.url + "/api/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- recorded calls ---------------------------------------------------------------------------

    def named(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def hooks(self) -> list[Call]:
        """Incoming-webhook posts (path ``/hooks/...``), their JSON body in ``params``."""
        with self.lock:
            return [c for c in self.calls if c.method.startswith("/hooks/")]

    def posts(self) -> list[Call]:
        """Successful chat.postMessage calls (a 429'd attempt is recorded but not counted)."""
        return [c for c in self.named("chat.postMessage") if not c.params.get("_rate_limited")]

    def wait_for(self, predicate, what: str, deadline: float = DEADLINE):
        """Poll until ``predicate()`` is truthy (returns it) or fail after ``deadline`` seconds."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {deadline:.0f} s waiting for {what}; calls: "
                             f"{[c.method for c in self.calls]}")

    # -- the server -------------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlparse(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        ctype = h.headers.get("Content-Type", "")
        params: dict = {}
        if url.path.startswith("/api/"):
            if "json" in ctype and raw:
                params = json.loads(raw)
            else:
                params = {k: v[0] for k, v in parse_qs(raw.decode() or url.query).items()}
        method = url.path[len("/api/"):] if url.path.startswith("/api/") else url.path
        call = Call(method=method, params=params, headers={k.lower(): v for k, v in h.headers.items()},
                    at=time.monotonic(), body=raw)
        with self.lock:
            self.calls.append(call)
            retry_after = self.rate_limit_next.pop(method, None)
        if retry_after is not None:
            call.params["_rate_limited"] = True
            self._send(h, 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)})
            return
        status, body = self._answer(method, params, call)
        call.reply = body if isinstance(body, dict) else None
        self._send(h, status, body)

    def _answer(self, method: str, params: dict, call: Call) -> tuple[int, dict | bytes]:
        if method == "auth.test" and not self.token_ok:
            return 200, {"ok": False, "error": "invalid_auth"}
        if method == "auth.test":
            return 200, {"ok": True, "url": "https://test.slack.com/", "team": "test", "user": "trainfix",
                         "team_id": TEAM, "user_id": BOT_USER, "bot_id": "BBOT", "is_enterprise_install": False}
        if method == "chat.postMessage" and params.get("channel") == NOT_A_MEMBER:
            return 200, {"ok": False, "error": "not_in_channel"}
        if method in ("chat.postMessage", "chat.postEphemeral"):
            ts = f"1700000000.{next(self._ts):06d}"
            return 200, {"ok": True, "channel": params.get("channel"), "ts": ts, "message_ts": ts}
        if method == "files.info":
            name, content = self.files[params["file"]]
            return 200, {"ok": True, "file": {"id": params["file"], "name": name, "size": len(content),
                                              "url_private_download": f"{self.url}/files-pri/{params['file']}/{name}"}}
        if method.startswith("/files-pri/"):
            if call.headers.get("authorization") != "Bearer xoxb-fake":
                return 403, b"forbidden"
            return 200, self.files[method.split("/")[2]][1]
        if method == "files.getUploadURLExternal":
            fid = f"FUP{next(self._ts)}"
            return 200, {"ok": True, "upload_url": f"{self.url}/upload/{fid}", "file_id": fid}
        if method.startswith("/upload/"):
            return 200, f"OK - {len(call.body)}".encode()
        if method == "files.completeUploadExternal":
            files = json.loads(params.get("files", "[]"))
            return 200, {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in files]}
        if method == "apps.connections.open":
            return 200, {"ok": True, "url": self.socket_url}
        if method.startswith("/respond"):
            return 200, b"ok"
        if method.startswith("/hooks/"):  # an incoming webhook: JSON {text, blocks} in, "ok" out
            call.params = json.loads(call.body or b"{}")
            return 200, b"ok"
        return 404, {"ok": False, "error": "unknown_method"}

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: dict | bytes, headers: dict | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream" if isinstance(body, bytes) else "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)


# -- requests from "Slack" to the bot -------------------------------------------------------------


def sign(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's request signature (v0, HMAC-SHA256 of ``v0:<timestamp>:<body>``) as headers."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def send(url: str, body: str, headers: dict[str, str], content_type: str) -> tuple[int, dict[str, str]]:
    """POST to the bot; ``(status, response headers)``."""
    req = urllib.request.Request(url, data=body.encode(), method="POST",
                                 headers={**headers, "Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}


def event_body(event: dict, event_id: str) -> str:
    return json.dumps({"token": "legacy", "team_id": TEAM, "api_app_id": "A0TEST", "type": "event_callback",
                       "event_id": event_id, "event_time": int(time.time()), "event": event,
                       "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}]})


def command_body(text: str, response_url: str, channel: str = "C0CHAN") -> str:
    return urlencode({"token": "legacy", "team_id": TEAM, "channel_id": channel, "channel_name": "ml", "user_id": "U0USER",
                      "user_name": "asker", "command": "/trainfix", "text": text, "api_app_id": "A0TEST",
                      "response_url": response_url, "trigger_id": "1.2.3"})


def action_body(action: dict, channel: str, message_ts: str, thread_ts: str | None) -> str:
    message = {"type": "message", "ts": message_ts, "text": "", **({"thread_ts": thread_ts} if thread_ts else {})}
    payload = {"type": "block_actions", "team": {"id": TEAM}, "user": {"id": "U0USER"}, "api_app_id": "A0TEST",
               "token": "legacy", "trigger_id": "1.2.3", "channel": {"id": channel},
               "container": {"type": "message", "message_ts": message_ts, "channel_id": channel,
                             **({"thread_ts": thread_ts} if thread_ts else {})},
               "message": message, "actions": [{**action, "type": "button", "action_ts": "1700000001.1"}],
               "response_url": "https://hooks.invalid/respond"}
    return urlencode({"payload": json.dumps(payload)})


# -- Block Kit limits, from Slack's documentation -------------------------------------------------

LIMITS = {"blocks": 50, "section_text": 3000, "header_text": 150, "button_text": 75, "action_id": 255,
          "button_value": 2000, "actions_elements": 25, "context_elements": 10, "message_text": 40000,
          "block_id": 255}


def block_kit_problems(text: str | None, blocks: list[dict]) -> list[str]:
    """Every way one message breaks Slack's documented Block Kit limits ([] when it is valid)."""
    bad: list[str] = []
    if not text:
        bad.append("no fallback text")
    elif len(text) > LIMITS["message_text"]:
        bad.append(f"text {len(text)} > {LIMITS['message_text']}")
    if len(blocks) > LIMITS["blocks"]:
        bad.append(f"{len(blocks)} blocks > {LIMITS['blocks']}")
    action_ids: list[str] = []
    for i, b in enumerate(blocks):
        kind = b.get("type")
        if len(b.get("block_id", "")) > LIMITS["block_id"]:
            bad.append(f"block {i}: block_id too long")
        if kind == "section":
            t = b.get("text") or {}
            if t.get("type") not in ("mrkdwn", "plain_text") or not t.get("text"):
                bad.append(f"block {i}: section without text")
            elif len(t["text"]) > LIMITS["section_text"]:
                bad.append(f"block {i}: section text {len(t['text'])} > {LIMITS['section_text']}")
        elif kind == "header":
            t = b.get("text") or {}
            if t.get("type") != "plain_text" or not t.get("text") or len(t["text"]) > LIMITS["header_text"]:
                bad.append(f"block {i}: header must be plain_text of 1..{LIMITS['header_text']} chars")
        elif kind == "context":
            els = b.get("elements") or []
            if not 1 <= len(els) <= LIMITS["context_elements"]:
                bad.append(f"block {i}: context has {len(els)} elements")
            for el in els:
                if el.get("type") in ("mrkdwn", "plain_text") and not 1 <= len(el.get("text", "")) <= 3000:
                    bad.append(f"block {i}: context text length {len(el.get('text', ''))}")
        elif kind == "actions":
            els = b.get("elements") or []
            if not 1 <= len(els) <= LIMITS["actions_elements"]:
                bad.append(f"block {i}: actions has {len(els)} elements")
            for el in els:
                if el.get("type") == "button":
                    label = (el.get("text") or {})
                    if label.get("type") != "plain_text" or not 1 <= len(label.get("text", "")) <= LIMITS["button_text"]:
                        bad.append(f"block {i}: button text must be plain_text of 1..{LIMITS['button_text']}")
                    if len(el.get("value", "")) > LIMITS["button_value"]:
                        bad.append(f"block {i}: button value too long")
                aid = el.get("action_id", "")
                if not aid or len(aid) > LIMITS["action_id"]:
                    bad.append(f"block {i}: action_id missing or too long")
                action_ids.append(aid)
        elif kind not in ("divider", "image"):
            bad.append(f"block {i}: unexpected type {kind}")
    if len(action_ids) != len(set(action_ids)):
        bad.append("action_ids are not unique in the message")
    return bad


def post_blocks(call: Call) -> list[dict]:
    blocks = call.params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else blocks


def post_text(call: Call) -> str:
    """Everything a post shows: its fallback text and every string in its blocks."""
    return call.params.get("text", "") + "\n" + json.dumps(post_blocks(call), ensure_ascii=False)


# -- the real bot, served over HTTP --------------------------------------------------------------

SIGNING_SECRET = "test-signing-secret"
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"


class Bot:
    """A running bot: Bolt app + our HTTP server on 127.0.0.1:0, talking to ``fake``."""

    def __init__(self, fake: FakeSlack, data_dir, assistant) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from pydantic import SecretStr

        from app.slack_bot import build_app, web_client
        from app.slack_http import PATH, SlackHTTPServer
        from app.slack_settings import SlackSettings

        self.settings = SlackSettings(data_dir=data_dir, slack_bot_token=SecretStr("xoxb-fake"),
                                      slack_signing_secret=SecretStr(SIGNING_SECRET), slack_api_url=fake.api_url)
        self.executor = ThreadPoolExecutor(max_workers=4)
        self.app, self.bot = build_app(self.settings, assistant, client=web_client(self.settings), executor=self.executor)
        self.server = SlackHTTPServer(self.app, "127.0.0.1", 0)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.port}{PATH}"

    def event(self, event: dict, event_id: str, **headers: str) -> tuple[int, dict]:
        body = event_body(event, event_id)
        return send(self.url, body, {**sign(SIGNING_SECRET, body), **headers}, JSON_TYPE)

    def form(self, body: str) -> tuple[int, dict]:
        return send(self.url, body, sign(SIGNING_SECRET, body), FORM_TYPE)

    def stop(self) -> None:
        self.server.shutdown()
        self.executor.shutdown(wait=True)  # the work still in flight ends before the fake Slack goes away
        self.server.server_close()
