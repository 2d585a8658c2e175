"""The Slack bot end to end: the real Bolt app in HTTP mode (and Socket Mode) with the real Assistant,
against a fake Slack Web API server on 127.0.0.1 that each test starts (tests/slack_fake.py).

Requests are signed as Slack signs them; replies are awaited by polling the fake server's recorded
calls (generous deadline, no fixed sleeps); every server binds port 0.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from pydantic import SecretStr

from app.slack_blocks import FEEDBACK_UP, FOLLOW_UP_ACTION
from app.slack_bot import build_app, slack_text, web_client
from app.slack_settings import SlackSettings
from assistant import Assistant, Settings
from assistant.redact import patterns
from tests.slack_fake import (
    BOT_USER,
    SIGNING_SECRET,
    Bot,
    NOT_A_MEMBER,
    FakeSlack,
    action_body,
    block_kit_problems,
    command_body,
    event_body,
    post_blocks,
    post_text,
    send,
    sign,
)

SECRET = SIGNING_SECRET
WEB = Path(__file__).parent / "fixtures" / "web"
OOM = (WEB / "oom_traceback.txt").read_text(encoding="utf-8")
TRAINER_LOG = (WEB / "trainer_nan.log").read_bytes()
NAN_PASTE = "\n".join(["{'loss': 2.1, 'learning_rate': 4e-05, 'epoch': %.2f}" % (i / 100) for i in range(50)]
                      + ["{'loss': nan, 'learning_rate': 4e-05, 'epoch': 0.50}"])
FRAGMENTED = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
              "79.15 GiB of which 1.10 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and "
              "5.90 GiB is reserved by PyTorch but unallocated.")
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def rules(shared_data_dir) -> Assistant:
    """One rules-only Assistant for the module (real rules, tree, cases; no index needed)."""
    return Assistant(Settings(data_dir=shared_data_dir), retrieval="never")


@pytest.fixture(scope="module")
def with_retrieval(shared_data_dir) -> Assistant:
    """The full Assistant, its index built here (once per session dir; minutes on a fresh one) and not
    inside a test's reply deadline."""
    assistant = Assistant(Settings(data_dir=shared_data_dir), retrieval="auto")
    assistant.search("warm up")
    return assistant


@pytest.fixture
def fake():
    f = FakeSlack()
    yield f
    f.close()


@pytest.fixture
def bot(fake, tmp_path, rules):
    b = Bot(fake, tmp_path, rules)
    yield b
    b.stop()


def mention(text: str, ts: str = "1700000100.000100", channel: str = "C0CHAN", **extra) -> dict:
    return {"type": "app_mention", "user": "U0USER", "text": f"<@{BOT_USER}> {text}", "ts": ts, "channel": channel,
            "event_ts": ts, **extra}


def posts_in(fake: FakeSlack, thread_ts: str) -> list:
    return [c for c in fake.posts() if c.params.get("thread_ts") == thread_ts]


def answered(fake: FakeSlack, thread_ts: str) -> list:
    """The thread's posts once the answer is complete (its 👍/👎 buttons are in the last message)."""
    def done():
        posts = posts_in(fake, thread_ts)
        return posts if any(FEEDBACK_UP in json.dumps(post_blocks(p)) for p in posts) else None
    return fake.wait_for(done, f"an answer in thread {thread_ts}")


def assert_valid(posts: list) -> None:
    for p in posts:
        assert block_kit_problems(p.params.get("text"), post_blocks(p)) == [], post_text(p)[:2000]


# -- triggers ------------------------------------------------------------------------------------


def test_mention_in_a_channel_replies_in_its_thread_with_the_diagnosis(bot, fake):
    status, _ = bot.event(mention(OOM), "Ev-mention")
    assert status == 200
    posts = answered(fake, "1700000100.000100")
    assert_valid(posts)
    assert all(p.params["channel"] == "C0CHAN" for p in posts)
    shown = "\n".join(post_text(p) for p in posts)
    first = post_blocks(posts[0])
    assert first[0]["type"] == "header" and "cuda-oom" in first[0]["text"]["text"]
    for part in ("confidence", "Evidence", "Likely causes in this case", "What to do first", "Similar past incidents",
                 "Sources", "[1]"):
        assert part in shown, part
    assert "Tried to allocate 3.50 GiB" in shown  # the evidence line, verbatim


def test_a_mention_inside_a_thread_answers_in_that_thread(bot, fake):
    bot.event(mention(OOM, ts="1700000200.000200", thread_ts="1700000150.000150"), "Ev-in-thread")
    posts = answered(fake, "1700000150.000150")
    assert posts and not posts_in(fake, "1700000200.000200")


def test_direct_message_is_answered_in_its_thread(bot, fake):
    dm = {"type": "message", "channel_type": "im", "channel": "D0DM", "user": "U0USER", "text": FRAGMENTED,
          "ts": "1700000300.000300", "event_ts": "1700000300.000300"}
    bot.event(dm, "Ev-dm")
    posts = answered(fake, "1700000300.000300")
    assert_valid(posts)
    assert {p.params["channel"] for p in posts} == {"D0DM"}
    shown = post_text(posts[0])
    assert "cuda-oom" in shown
    assert "```\\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in shown  # fix #1 with its code block


def test_bot_messages_and_edits_in_a_dm_get_no_reply(bot, fake):
    own = {"type": "message", "channel_type": "im", "channel": "D0DM", "bot_id": "BBOT", "user": BOT_USER,
           "text": OOM, "ts": "1700000310.000310"}
    edit = {"type": "message", "subtype": "message_changed", "channel_type": "im", "channel": "D0DM",
            "ts": "1700000320.000320", "message": {"text": OOM}}
    assert bot.event(own, "Ev-own")[0] == 200
    assert bot.event(edit, "Ev-edit")[0] == 200
    bot.event(mention(OOM, ts="1700000330.000330"), "Ev-sentinel")  # answered after the two above were dispatched
    answered(fake, "1700000330.000330")
    assert not posts_in(fake, "1700000310.000310") and not posts_in(fake, "1700000320.000320")


def test_slash_command_posts_the_question_then_answers_in_its_thread(bot, fake):
    status, _ = bot.form(command_body(OOM, fake.url + "/respond"))
    assert status == 200
    first = fake.wait_for(lambda: [p for p in fake.posts() if not p.params.get("thread_ts")], "the opening post")[0]
    assert first.params["channel"] == "C0CHAN" and "<@U0USER>" in post_text(first)
    assert "out of memory" in post_text(first)  # the paste, quoted (Slack does not show a command's text)
    posts = answered(fake, first.reply["ts"])  # the rest in the thread the opening post started
    assert_valid([first, *posts])
    assert "cuda-oom" in post_text(posts[0])


def test_a_slash_command_where_the_bot_is_not_a_member_gets_a_private_hint(bot, fake):
    bot.form(command_body(OOM, fake.url + "/respond", channel=NOT_A_MEMBER))
    hint = fake.wait_for(lambda: [c for c in fake.calls if c.method == "/respond"], "the ephemeral hint")[0]
    assert json.loads(hint.body)["response_type"] == "ephemeral" and "/invite @trainfix" in hint.body.decode()


@pytest.mark.parametrize(("name", "content", "message"), [
    ("photo.png", b"\x89PNG....", "not a log file"),
    ("dump.log", b"\x00\x01\x02" * 1000, "binary file"),
    ("empty.log", b"", "empty"),
    ("broken.log.gz", b"\x1f\x8b not really gzip", "not a readable .gz"),
])
def test_a_shared_file_that_is_not_a_readable_log_gets_a_clear_message(bot, fake, name, content, message):
    fake.files["F0BAD"] = (name, content)
    bot.event(mention("look", ts="1700000420.000420", files=[{"id": "F0BAD"}]), f"Ev-bad-{name}")
    post = fake.wait_for(lambda: posts_in(fake, "1700000420.000420"), "the message")[0]
    assert message in post_text(post) and "Traceback" not in post_text(post)


def test_a_log_file_shared_with_a_mention_is_downloaded_answered_and_plotted(bot, fake):
    fake.files["F0LOG"] = ("trainer.log", TRAINER_LOG)
    bot.event(mention("what happened here?", ts="1700000400.000400", files=[{"id": "F0LOG"}]), "Ev-file")
    posts = answered(fake, "1700000400.000400")
    assert_valid(posts)
    download = fake.wait_for(lambda: [c for c in fake.calls if c.method.startswith("/files-pri/F0LOG")], "the download")
    assert download[0].headers["authorization"] == "Bearer xoxb-fake"
    assert "nan" in post_text(posts[0]).lower()
    done = fake.wait_for(lambda: fake.named("files.completeUploadExternal"), "the plot upload")
    assert done[0].params["thread_ts"] == "1700000400.000400" and done[0].params["channel_id"] == "C0CHAN"
    uploaded = [c for c in fake.calls if c.method.startswith("/upload/")]
    assert uploaded and uploaded[0].body.startswith(b"\x89PNG")  # through files.getUploadURLExternal's URL
    assert fake.named("files.getUploadURLExternal")


def _file_message(ts: str, thread_ts: str | None, text: str = "here is the log", channel_type: str = "channel") -> dict:
    return {"type": "message", "subtype": "file_share", "channel_type": channel_type, "channel": "C0CHAN",
            "user": "U0USER", "text": text, "ts": ts, "event_ts": ts, "files": [{"id": "F0LOG"}],
            **({"thread_ts": thread_ts} if thread_ts else {})}


def test_a_log_shared_later_in_a_thread_where_the_bot_was_mentioned_is_answered(bot, fake):
    fake.files["F0LOG"] = ("trainer.log", TRAINER_LOG)
    bot.event(mention(OOM, ts="1700000460.000460"), "Ev-thread-start")
    first = answered(fake, "1700000460.000460")
    bot.event(_file_message("1700000470.000470", "1700000460.000460"), "Ev-thread-file")
    later = fake.wait_for(lambda: (lambda ps: ps if any(FEEDBACK_UP in json.dumps(post_blocks(p)) for p in ps) else None)(
        posts_in(fake, "1700000460.000460")[len(first):]), "the answer to the shared log")
    assert_valid(later)
    assert "nan" in post_text(later[0]).lower()
    assert [c for c in fake.calls if c.method.startswith("/files-pri/F0LOG")]


def test_channel_messages_outside_the_bots_threads_are_not_read(bot, fake):
    fake.files["F0LOG"] = ("trainer.log", TRAINER_LOG)
    bot.event(_file_message("1700000480.000480", "1700000475.000475"), "Ev-other-thread-file")  # never mentioned
    bot.event({**_file_message("1700000485.000485", None), "subtype": None, "files": []}, "Ev-chatter")
    bot.event(mention(OOM, ts="1700000490.000490"), "Ev-thread-sentinel")
    answered(fake, "1700000490.000490")
    assert not posts_in(fake, "1700000475.000475") and not posts_in(fake, "1700000485.000485")
    assert not fake.named("files.info")


def test_a_mention_with_a_file_delivered_as_two_events_is_answered_once(bot, fake):
    fake.files["F0LOG"] = ("trainer.log", TRAINER_LOG)
    msg = _file_message("1700000495.000495", None, text=f"<@{BOT_USER}> this one")
    bot.event(mention("this one", ts="1700000495.000495", files=[{"id": "F0LOG"}]), "Ev-both-mention")
    bot.event(msg, "Ev-both-message")
    answered(fake, "1700000495.000495")
    bot.event(mention(OOM, ts="1700000499.000499"), "Ev-both-sentinel")
    answered(fake, "1700000499.000499")
    assert len(fake.named("files.info")) == 1
    feedback_rows = [p for p in posts_in(fake, "1700000495.000495") if FEEDBACK_UP in json.dumps(post_blocks(p))]
    assert len(feedback_rows) == 1


def test_a_file_over_the_limit_is_refused_with_a_message_and_not_downloaded(fake, tmp_path, rules):
    b = Bot(fake, tmp_path, rules)
    b.bot.settings = b.settings.model_copy(update={"slack_max_upload_mb": 0.001})
    try:
        fake.files["F0BIG"] = ("big.log", b"x" * 4096)
        b.event(mention("look", ts="1700000450.000450", files=[{"id": "F0BIG"}]), "Ev-big")
        post = fake.wait_for(lambda: posts_in(fake, "1700000450.000450"), "the refusal")[0]
        assert "over the upload limit" in post_text(post)
        assert not [c for c in fake.calls if c.method.startswith("/files-pri/")]
    finally:
        b.stop()


def test_a_pasted_log_with_a_series_uploads_its_plot(bot, fake):
    bot.event(mention(TRAINER_LOG.decode(), ts="1700000500.000500"), "Ev-series")
    answered(fake, "1700000500.000500")
    done = fake.wait_for(lambda: fake.named("files.completeUploadExternal"), "the plot upload")
    assert done[0].params["thread_ts"] == "1700000500.000500"


# -- follow-ups and feedback ---------------------------------------------------------------------


def _buttons(posts) -> list[dict]:
    return [el for p in posts for b in post_blocks(p) if b["type"] == "actions" for el in b["elements"]]


def test_a_follow_up_button_narrows_the_answer_in_the_same_thread(bot, fake):
    bot.event(mention(NAN_PASTE, ts="1700000600.000600"), "Ev-nan")
    posts = answered(fake, "1700000600.000600")
    first_causes = post_text(posts[0])
    bf16 = [el for el in _buttons(posts) if el["action_id"].startswith(FOLLOW_UP_ACTION) and "bf16" in el["value"]]
    assert bf16, "a follow-up button for bf16"
    n_before = len(posts)
    status, _ = bot.form(action_body({"action_id": bf16[0]["action_id"], "block_id": "b", "value": bf16[0]["value"]},
                                     "C0CHAN", posts[-1].reply["ts"], "1700000600.000600"))
    assert status == 200
    narrowed = fake.wait_for(lambda: (lambda ps: ps[n_before:] if any(
        "precision = bf16" in post_text(p) for p in ps[n_before:]) and any(
        FEEDBACK_UP in json.dumps(post_blocks(p)) for p in ps[n_before:]) else None)(posts_in(fake, "1700000600.000600")),
        "the narrowed answer")
    assert_valid(narrowed)
    text = post_text(narrowed[0])
    assert "nan-loss" in text
    # The FP16-overflow cause led before; with bf16 answered it no longer does.
    lead_before = first_causes.split("Likely causes in this case")[1].split("\\n")[1]
    lead_after = text.split("Likely causes in this case")[1].split("\\n")[1]
    assert lead_before != lead_after


def test_a_typed_reply_in_a_dm_thread_narrows_the_answer(bot, fake):
    def dm(text: str, ts: str, thread_ts: str | None = None) -> dict:
        return {"type": "message", "channel_type": "im", "channel": "D0DM", "user": "U0USER", "text": text, "ts": ts,
                "event_ts": ts, **({"thread_ts": thread_ts} if thread_ts else {})}

    bot.event(dm(NAN_PASTE, "1700000650.000650"), "Ev-dm-nan")
    before = answered(fake, "1700000650.000650")
    assert "Are you training in FP16 or BF16" in post_text(before[0])
    bot.event(dm("it's bf16 already", "1700000660.000660", thread_ts="1700000650.000650"), "Ev-dm-reply")
    after = fake.wait_for(lambda: (lambda ps: ps if any(FEEDBACK_UP in json.dumps(post_blocks(p)) for p in ps) else None)(
        posts_in(fake, "1700000650.000650")[len(before):]), "the narrowed answer")
    text = post_text(after[0])
    assert "nan-loss" in text
    lead = lambda t: t.split("Likely causes in this case")[1].split("\\n")[1]  # noqa: E731
    assert lead(text) != lead(post_text(before[0]))  # FP16 overflow no longer leads once bf16 is said


def _thumbs_up(bot, fake, paste: str, ts: str, event_id: str) -> list:
    """Mention the bot with ``paste``, click 👍 on its answer, and return the ephemeral thanks once it is posted."""
    bot.event(mention(paste, ts=ts), event_id)
    posts = answered(fake, ts)
    up = [el for el in _buttons(posts) if el["action_id"] == FEEDBACK_UP][0]
    bot.form(action_body({"action_id": FEEDBACK_UP, "block_id": "tf_feedback", "value": up["value"]},
                         "C0CHAN", posts[-1].reply["ts"], ts))
    return fake.wait_for(lambda: fake.named("chat.postEphemeral"), "the thanks")


def test_thumbs_up_feeds_the_web_chats_feedback_store(bot, fake, tmp_path):
    _thumbs_up(bot, fake, OOM, "1700000700.000700", "Ev-fb")
    from app.feedback import FeedbackStore, export_cases

    rows = list(FeedbackStore(tmp_path).rows())
    assert len(rows) == 1 and rows[0].rating == 1 and "CUDA out of memory" in rows[0].input
    cases, _ = export_cases(FeedbackStore(tmp_path))
    assert cases[0]["labels"] == ["cuda-oom"]


def test_thumbs_up_on_a_nan_loss_answer_is_stored(bot, fake, tmp_path):
    # The NaN-onset finding's value is NaN: the stored answer must read back (found by bench/bench_load.py).
    thanks = _thumbs_up(bot, fake, NAN_PASTE, "1700000750.000750", "Ev-fb-nan")
    assert "Thanks" in thanks[0].params["text"]
    from app.feedback import FeedbackStore

    rows = list(FeedbackStore(tmp_path).rows())
    assert len(rows) == 1 and rows[0].rating == 1


# -- security: signatures, retries, secrets, injection --------------------------------------------


@pytest.mark.parametrize("case", ["forged", "missing", "stale"])
def test_unsigned_forged_or_stale_requests_get_401_and_no_reply(bot, fake, case):
    body = event_body(mention(OOM, ts="1700000800.000800"), f"Ev-{case}")
    headers = {"forged": sign("not-the-secret", body), "missing": {},
               "stale": sign(SECRET, body, timestamp=int(time.time()) - 6 * 60)}[case]
    status, _ = send(bot.url, body, headers, JSON_TYPE)
    assert status == 401
    bot.event(mention(OOM, ts="1700000810.000810"), f"Ev-{case}-sentinel")
    answered(fake, "1700000810.000810")
    assert not posts_in(fake, "1700000800.000800")


def test_a_retried_event_gets_no_second_reply_even_after_a_restart(fake, tmp_path, rules):
    first = Bot(fake, tmp_path, rules)
    try:
        status, headers = first.event(mention(OOM, ts="1700000900.000900"), "Ev-retried")
        assert status == 200 and "x-trainfix-duplicate" not in headers
        answered(fake, "1700000900.000900")
        status, headers = first.event(mention(OOM, ts="1700000900.000900"), "Ev-retried",
                                      **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
        assert status == 200 and headers.get("x-trainfix-duplicate") == "1"  # dropped before any listener runs
    finally:
        first.stop()
    n = len(posts_in(fake, "1700000900.000900"))
    restarted = Bot(fake, tmp_path, rules)  # a new process would open the same SQLite file
    try:
        status, headers = restarted.event(mention(OOM, ts="1700000900.000900"), "Ev-retried",
                                          **{"X-Slack-Retry-Num": "2", "X-Slack-Retry-Reason": "http_timeout"})
        assert status == 200 and headers.get("x-trainfix-duplicate") == "1"
        restarted.event(mention(OOM, ts="1700000950.000950"), "Ev-after-restart")
        answered(fake, "1700000950.000950")
        assert len(posts_in(fake, "1700000900.000900")) == n
    finally:
        restarted.stop()


def test_a_rate_limited_post_is_retried_after_retry_after(bot, fake):
    fake.rate_limit_next["chat.postMessage"] = 1
    bot.event(mention(OOM, ts="1700001000.001000"), "Ev-429")
    answered(fake, "1700001000.001000")
    attempts = [c for c in fake.named("chat.postMessage") if c.params.get("thread_ts") == "1700001000.001000"]
    assert attempts[0].params.get("_rate_limited") and not attempts[1].params.get("_rate_limited")
    assert attempts[1].params["blocks"] == attempts[0].params["blocks"]  # the same message, sent again
    assert attempts[1].at - attempts[0].at >= 1.0  # not before Retry-After: 1


def _secret(kind: str) -> tuple[str, str]:
    """``(line to paste, the secret part that must never be shown)``, built so no live-looking token is committed."""
    a36 = "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
    built = {
        "private-key-block": ("-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow" + "IBAAKCAQEAs3cr3tK3yB0dy\n-----END RSA "
                              "PRIVATE KEY-----", "MIIEow" + "IBAAKCAQEAs3cr3tK3yB0dy"),
        "huggingface-token": ("HF_TOKEN=" + "hf" + "_" + a36, "hf_" + a36),
        "openai-key": ("OPENAI_API_KEY=" + "sk" + "-proj-" + a36, "sk-proj-" + a36),
        "slack-token": ("SLACK_TOKEN " + "xo" + "xb-" + "1234567890-" + a36[:14], "xoxb-1234567890-" + a36[:14]),
        "slack-webhook": ("post to https://hooks." + "slack.com/services/" + "T0AAA/B0BBB/" + a36[:20],
                          "T0AAA/B0BBB/" + a36[:20]),
        "github-token": ("token " + "gh" + "p_" + a36, "p_" + a36),
        "aws-access-key-id": ("aws_access_key_id = " + "AK" + "IA" + "Q7XK3M9PZ2W8RT5B", "Q7XK3M9PZ2W8RT5B"),
        "google-api-key": ("key=" + "AI" + "za" + "Sy" + a36[:33], "Sy" + a36[:33]),
        "jwt": ("Authorization: " + "ey" + "JhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + a36,
                "JhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + a36),
        "bearer-token": ("curl -H 'Authorization: " + "Bearer " + a36 + "'", a36),
        "url-credentials": ("git clone https://" + "deploy:" + "Pw" + a36[:12] + "@git.example.com/repo.git",
                            "Pw" + a36[:12]),
        "signed-url-signature": ("https://bucket.s3.amazonaws.com/ckpt.pt?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
                                 "X-Amz-Signature=" + "3f9a0c1d" + a36, "3f9a0c1d" + a36),
        "assignment": ("export WANDB_API_KEY=" + "w4nd8" + a36, "w4nd8" + a36),
        "slack-app-token": ("TRAINFIX_SLACK_APP_TOKEN=" + "xa" + "pp-1-A0B1C2D3E4F-5566778899001-" + a36[:30],
                            "xapp-1-A0B1C2D3E4F-5566778899001"),
        "gcp-private-key-id": ('  "private_key_id": "' + "a1b2c3d4e5f6" + "0718293a4b5c6d7e8f9012345678" + '",',
                               "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"),
        "wandb-key": ("$ wandb login " + "9f8e7d6c5b4a" + "39281706f5e4d3c2b1a098765432",
                      "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"),
        "authorization-header": ("> Authorization: " + "Basic " + "bWxvcHM6aHVudGVyMjAyNA==", "bWxvcHM6aHVudGVyMjAyNA=="),
        "api-key-header": ("x-api-key: " + "4f3e2d1c0b9a" + "88776655", "4f3e2d1c0b9a88776655"),
        "assignment-password": ("psycopg2: host=db.internal port=5432 user=app " + "password=" + "Tr0ub4dorX3" + " dbname=runs",
                                "Tr0ub4dorX3"),
    }
    return built[kind]


def test_every_redactor_kind_is_covered_below():
    assert {p.id for p in patterns()} == set(_KINDS), "a new secret pattern needs a case in _secret()"


_KINDS = ["private-key-block", "huggingface-token", "openai-key", "slack-token", "slack-webhook", "github-token",
          "aws-access-key-id", "google-api-key", "jwt", "bearer-token", "url-credentials", "signed-url-signature",
          "assignment", "slack-app-token", "gcp-private-key-id", "wandb-key", "authorization-header", "api-key-header",
          "assignment-password"]


@pytest.mark.parametrize("kind", _KINDS)
def test_a_secret_in_the_paste_is_in_nothing_posted_or_stored(bot, fake, tmp_path, kind):
    line, secret = _secret(kind)
    paste = "export TRAINING=1\n" + line + "\n" + OOM
    ts = "1700001100.001100"
    bot.event(mention(paste, ts=ts), f"Ev-secret-{kind}")
    posts = answered(fake, ts)
    up = [el for el in _buttons(posts) if el["action_id"] == FEEDBACK_UP][0]
    bot.form(action_body({"action_id": FEEDBACK_UP, "block_id": "tf_feedback", "value": up["value"]},
                         "C0CHAN", posts[-1].reply["ts"], ts))
    fake.wait_for(lambda: fake.named("chat.postEphemeral"), "the thanks")
    shown = "\n".join(post_text(p) for p in fake.posts())
    assert secret not in shown
    assert "please delete it" in shown and kind in shown  # the user is told, and what kind it was
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("*.sqlite3*"))
    assert secret.encode() not in stored
    with sqlite3.connect(tmp_path / "feedback.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM feedback WHERE input LIKE '%REDACTED%'").fetchone()[0] == 1


def test_secrets_in_a_slash_command_or_a_shared_file_are_not_posted(bot, fake, tmp_path):
    token = "gh" + "p_" + "Zz9" * 12
    bot.form(command_body("GITHUB_TOKEN " + token + "\n" + OOM, fake.url + "/respond"))
    fake.files["F0SEC"] = ("train.log", ("export TOKEN " + token + "\n" + OOM).encode())
    bot.event(mention("see log", ts="1700001150.001150", files=[{"id": "F0SEC"}]), "Ev-secret-file")
    answered(fake, "1700001150.001150")
    opening = fake.wait_for(lambda: [p for p in fake.posts() if not p.params.get("thread_ts")], "the opening post")[0]
    answered(fake, opening.reply["ts"])
    shown = "\n".join(post_text(p) for p in fake.posts())
    assert token not in shown and shown.count("please delete it") == 2
    assert token.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("*.sqlite3*"))


def test_slack_control_sequences_in_a_paste_are_shown_as_text(bot, fake):
    # Slack delivers a literal "<!channel>" typed by the user escaped; the bot unescapes it to read the paste...
    paste = "&lt;!channel&gt; &lt;http://evil.example|click me&gt; " + OOM.splitlines()[-1]
    bot.event(mention(paste, ts="1700001200.001200"), "Ev-inject")
    posts = answered(fake, "1700001200.001200")
    shown = "\n".join(post_text(p) for p in posts)
    # ...and escapes it again in everything it posts: shown as text, never a mention or a link.
    assert "<!channel>" not in shown and "<http://evil.example" not in shown
    assert "&lt;!channel&gt;" in shown


def test_slack_text_reads_what_the_user_typed():
    assert slack_text(f"<@{BOT_USER}> why &lt;module&gt; &amp; <https://x.io/a|x.io/a> <@U1> <!here> <#C1|ml>",
                      BOT_USER) == "why <module> & x.io/a @U1 @here #ml"
    assert slack_text("```Traceback\nerror```") == "Traceback\nerror"


# -- language and scope ---------------------------------------------------------------------------


def test_a_chinese_paste_gets_a_chinese_answer(bot, fake):
    bot.event(mention("训练的时候报错了，怎么办？\n" + OOM.splitlines()[-1], ts="1700001300.001300"), "Ev-zh")
    posts = answered(fake, "1700001300.001300")
    shown = post_text(posts[0])
    assert "置信度" in shown and "证据" in shown


@pytest.mark.slow
def test_out_of_scope_input_gets_a_short_polite_decline_with_the_nearest_sections(fake, tmp_path, with_retrieval):
    b = Bot(fake, tmp_path, with_retrieval)  # retrieval finds the nearest sections
    try:
        b.event(mention("How do I install vllm on Windows? pip fails to build the wheel.", ts="1700001400.001400"),
                "Ev-oos")
        posts = answered(fake, "1700001400.001400")
    finally:
        b.stop()
    assert_valid(posts)
    blocks = post_blocks(posts[0])
    assert blocks[0]["type"] == "header" and blocks[0]["text"]["text"] == "Not in my knowledge base"
    shown = post_text(posts[0])
    assert "Nearest sections" in shown and "[1]" in shown
    assert len(posts) == 1 and len(blocks) <= 8  # short


# -- Socket Mode ----------------------------------------------------------------------------------


def test_socket_mode_acks_the_envelope_and_replies(fake, tmp_path, rules):
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from websockets.sync.server import serve

    acks: list[dict] = []
    done = threading.Event()
    envelope = {"envelope_id": "env-1", "type": "events_api", "accepts_response_payload": False, "retry_attempt": 0,
                "payload": json.loads(event_body(mention(OOM, ts="1700001500.001500"), "Ev-socket"))}

    def session(ws):
        ws.send(json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0TEST"}}))
        ws.send(json.dumps(envelope))
        while not done.is_set():
            try:
                message = json.loads(ws.recv(timeout=0.5))
            except TimeoutError:
                continue
            except Exception:  # noqa: BLE001 - the client went away
                return
            if message.get("envelope_id"):
                acks.append(message)

    with serve(session, "127.0.0.1", 0) as ws_server:
        threading.Thread(target=ws_server.serve_forever, daemon=True).start()
        fake.socket_url = f"ws://127.0.0.1:{ws_server.socket.getsockname()[1]}/link/?ticket=t"
        settings = SlackSettings(data_dir=tmp_path, slack_bot_token=SecretStr("xoxb-fake"),
                                 slack_app_token=SecretStr("xapp-fake"), slack_api_url=fake.api_url)
        app, _ = build_app(settings, rules, client=web_client(settings), socket_mode=True)
        handler = SocketModeHandler(app, "xapp-fake")
        handler.connect()
        try:
            posts = answered(fake, "1700001500.001500")
            fake.wait_for(lambda: acks, "the ack envelope")
        finally:
            done.set()
            handler.close()
            ws_server.shutdown()
    assert acks[0]["envelope_id"] == "env-1"
    assert fake.named("apps.connections.open")[0].headers["authorization"] == "Bearer xapp-fake"
    assert "cuda-oom" in post_text(posts[0])
