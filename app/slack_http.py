"""HTTP mode: Slack's requests (events, slash commands, button clicks) served on a port, handed to Bolt.

A :class:`~http.server.ThreadingHTTPServer` around :meth:`slack_bolt.App.dispatch` rather than
``App.start()``: it binds any port, 0 included, and tells which one it got (tests never race for a port).
Bolt verifies each request's signature and timestamp; a bad one gets 401 here.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from slack_bolt import App, BoltRequest

PATH = "/slack/events"
MAX_BODY = 1024 * 1024  # Slack's payloads are a few KiB; anything larger is not from Slack


class _Handler(BaseHTTPRequestHandler):
    server: SlackHTTPServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        if url.path != PATH:
            self._reply(404, b"Not Found", "text/plain")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self._reply(413, b"Payload Too Large", "text/plain")
            return
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        headers = {k.lower(): self.headers.get_all(k) or [] for k in set(self.headers.keys())}
        resp = self.server.app.dispatch(BoltRequest(body=body, query=url.query, headers=headers))
        self.send_response(resp.status)
        payload = (resp.body or "").encode("utf-8")
        for name, values in resp.headers.items():
            if name.lower() != "content-length":
                for value in values:
                    self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802
        self._reply(404, b"Not Found", "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet: request lines are not worth a log line each
        pass


class SlackHTTPServer(ThreadingHTTPServer):
    """Serves ``POST /slack/events`` for a Bolt app; ``port`` is the bound port (pass 0 to pick a free one)."""

    daemon_threads = True

    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 3000) -> None:
        self.app = app
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> threading.Thread:
        """Serve in a background thread (tests, or a caller that blocks elsewhere); ``shutdown()`` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="trainfix-slack-http", daemon=True)
        thread.start()
        return thread
