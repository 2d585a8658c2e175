"""Settings of the Slack bot: the :class:`~assistant.config.Settings` fields plus Slack's tokens (``SecretStr``).

A subclass rather than new fields on the core's settings: the same ``TRAINFIX_`` environment
variables and ``.env`` file, read when called, while the core stays free of front-end settings it
never reads.
"""

from __future__ import annotations

from pydantic import Field, SecretStr

from assistant.config import Settings


class SlackSettings(Settings):
    """``TRAINFIX_SLACK_*``: the bot token, and an app token (Socket Mode) or a signing secret (HTTP mode)."""

    slack_bot_token: SecretStr | None = Field(default=None, description="bot token (xoxb-…) for the Web API")
    slack_app_token: SecretStr | None = Field(default=None, description="app-level token (xapp-…): Socket Mode")
    slack_signing_secret: SecretStr | None = Field(default=None, description="signing secret: HTTP mode")
    slack_api_url: str = Field(default="https://slack.com/api/", description="Web API base URL (a proxy, or tests)")
    slack_max_upload_mb: float | None = Field(
        default=None, gt=0, description="largest shared log the bot downloads, in MiB; default: web_max_upload_mb")

    slack_webhook_url: SecretStr | None = Field(default=None, description="incoming webhook `trainfix watch` and "
                                                "the Trainer callback post alerts to")
    slack_watch_channel: str | None = Field(default=None, description="channel the bot token posts watch alerts in "
                                            "(when no webhook is set)")

    def watch_target(self, channel: str | None = None):
        """Where watch alerts go (:class:`app.watch_alerts.SlackTarget`); refuses an incomplete configuration."""
        from app.watch_alerts import SlackTarget

        return SlackTarget(webhook_url=self.slack_webhook_url.get_secret_value() if self.slack_webhook_url else None,
                           token=self.slack_bot_token.get_secret_value() if self.slack_bot_token else None,
                           channel=channel or self.slack_watch_channel, api_url=self.slack_api_url)

    @property
    def slack_upload_limit(self) -> int:
        """Bytes: the same limit as the web chat unless set for Slack."""
        return int((self.slack_max_upload_mb or self.web_max_upload_mb) * 1024 * 1024)
