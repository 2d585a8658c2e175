"""A log file shared with the bot: looked up and downloaded through the Slack Web API, with the web
chat's checks (:mod:`app.web_upload`: accepted types, size limit, gzip, binary sniffing).

The download is streamed to a private temporary file and stopped as soon as it passes the limit,
whatever size Slack announced; :func:`app.web_upload.prepared` deletes it after triage.
"""

from __future__ import annotations

import tempfile
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from app.web_upload import check_name, copy_capped, mib
from assistant.errors import InputError

SLACK_FILE_HOSTS = ("files.slack.com",)
TIMEOUT = 60


def _trusted(url: str, api_url: str) -> bool:
    """The bot token is sent only to Slack's file host (or the configured API host: a proxy, or tests)."""
    target, api = urlparse(url), urlparse(api_url)
    if target.hostname in SLACK_FILE_HOSTS and target.scheme == "https":
        return True
    return (target.scheme, target.netloc) == (api.scheme, api.netloc)


def download(client, file_id: str, limit: int) -> tuple[Path, str]:
    """``(path, name)`` of a shared file, downloaded with the bot token; refused when it is not a log
    or larger than ``limit`` bytes. The caller deletes the file (``prepared`` does)."""
    info = client.files_info(file=file_id)["file"]
    name = str(info.get("name") or info.get("title") or file_id)
    check_name(name)
    size = int(info.get("size") or 0)
    if size > limit:
        raise InputError(f"{name} is {mib(size)}, over the upload limit of {mib(limit)}. Share the last part of "
                         "the log (e.g. `tail -c 50M train.log > tail.log`) or run `trainfix diagnose train.log` locally")
    url = info.get("url_private_download") or info.get("url_private")
    if not url or not _trusted(url, client.base_url):
        raise InputError(f"{name}: Slack gave no usable download link for this file")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {client.token}"})
    workdir = Path(tempfile.mkdtemp(prefix="trainfix-slack-"))
    path = workdir / "upload"
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as resp, path.open("wb") as out:  # noqa: S310 - https or the API host
            copy_capped(resp, out, limit, f"{name} is over the upload limit of {mib(limit)}; share its last part, "
                                          "or run `trainfix diagnose FILE` locally")
    except OSError as err:
        _remove(path)
        raise InputError(f"{name}: the download from Slack failed ({type(err).__name__})") from None
    except InputError:
        _remove(path)
        raise
    return path, name


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass
