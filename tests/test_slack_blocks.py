"""Diagnosis → Block Kit without Slack: limits (checked by tests/slack_fake.py's validator, written from
Slack's documentation), splitting, mrkdwn escaping, language, declines; and the ``slack`` command's edges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.slack_blocks import (
    FEEDBACK_DOWN,
    FEEDBACK_UP,
    _split_text,
    answer_messages,
    code_block,
    escape,
    follow_up_value,
    parse_follow_up,
)
from assistant import Assistant, Settings
from assistant.diagnosis import CodeView, FixView
from assistant.models import Evidence
from tests.slack_fake import FakeSlack, block_kit_problems, event_body, send, sign

ROOT = Path(__file__).resolve().parent.parent
OOM = (ROOT / "tests" / "fixtures" / "web" / "oom_traceback.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def rules(shared_data_dir) -> Assistant:
    return Assistant(Settings(data_dir=shared_data_dir), retrieval="never")


def _texts(messages) -> str:
    return "\n".join(m.text + json.dumps(m.blocks, ensure_ascii=False) for m in messages)


def _section_texts(messages) -> list[str]:
    return [b["text"]["text"] for m in messages for b in m.blocks if b["type"] == "section"]


def test_an_answer_is_one_valid_message_with_sources_numbered_in_order(rules):
    messages = answer_messages(rules.diagnose(OOM), answer_id="a1")
    assert len(messages) == 1
    m = messages[0]
    assert block_kit_problems(m.text, m.blocks) == []
    assert m.blocks[0]["type"] == "header" and m.text.startswith("CUDA out of memory (cuda-oom)")
    shown = _texts(messages)
    sources = [s for s in _section_texts(messages) if s.startswith("*Sources*")][0]
    numbers = [int(line[1:line.index("]")]) for line in sources.splitlines()[1:]]
    assert numbers == list(range(1, len(numbers) + 1))
    assert f"[{numbers[-1]}]" in shown.split("*Sources*")[0]  # every listed source is cited above it
    buttons = [el for b in m.blocks if b["type"] == "actions" for el in b["elements"]]
    assert {b["action_id"] for b in buttons} >= {FEEDBACK_UP, FEEDBACK_DOWN}


def test_a_long_answer_is_split_within_every_limit_and_loses_nothing(rules):
    d = rules.diagnose(OOM)
    top = d.top
    code = "\n".join(f"step_{i} = torch.zeros({i}, 1024)  # " + "x" * 80 for i in range(40))
    fixes = [FixView(priority=i, text=f"Fix number {i} " + "word " * 100, code=CodeView(language="python", code=code),
                     cite=top.fixes[0].cite) for i in range(1, 6)]
    big = top.model_copy(update={"readings": [f"reading {i}: " + "r" * 400 for i in range(30)], "fixes": fixes,
                                 "title": "T" * 400})
    d = d.model_copy(update={"candidates": [big, *d.candidates[1:]], "notices": ["n" * 5000] * 12})
    messages = answer_messages(d, answer_id="a2", secret_kinds=["jwt"])
    assert len(messages) > 1
    for m in messages:
        assert block_kit_problems(m.text, m.blocks) == [], m.blocks
    shown = _texts(messages)
    for i in range(30):
        assert f"reading {i}: " in shown
    for i in range(1, 6):
        assert f"Fix number {i}" in shown
    for text in _section_texts(messages):
        fences = [ln for ln in text.splitlines() if ln.strip().startswith("```")]
        assert len(fences) % 2 == 0, text  # a code block cut in two is closed and reopened
    assert messages[-1].blocks[-1]["block_id"] == "tf_feedback"


def test_split_text_keeps_pieces_under_the_limit_and_fences_balanced():
    text = "*Fix*\n" + code_block("\n".join(f"line {i} " + "y" * 90 for i in range(200))) + "\nafter"
    pieces = _split_text(text, 2800)
    assert len(pieces) > 1 and all(len(p) <= 3000 for p in pieces)
    assert all(sum(ln.startswith("```") for ln in p.splitlines()) % 2 == 0 for p in pieces)
    joined = "\n".join(pieces)
    assert "line 0 " in joined and "line 199 " in joined and joined.rstrip().endswith("after")
    long_line = _split_text("z" * 10000, 2800)
    assert all(len(p) <= 3000 for p in long_line) and "".join(long_line).count("z") == 10000


def test_user_text_cannot_mention_link_or_break_out_of_code(rules):
    d = rules.diagnose(OOM)
    evil = "<!channel> <@U123> <http://evil.example|click> & ``` done"
    ev = Evidence(line=1, text=evil, match="x", source="rule:x", strength="strong")
    fix = FixView(priority=1, text="<!here> fix", code=CodeView(language="bash", code="echo '```' <!everyone>"),
                  cite=d.top.fixes[0].cite)
    top = d.top.model_copy(update={"evidence": [ev], "fixes": [fix], "note": "<https://x.io|y>"})
    shown = _texts(answer_messages(d.model_copy(update={"candidates": [top]})))
    for raw in ("<!channel>", "<@U123>", "<http://evil.example", "<!here>", "<!everyone>", "<https://x.io"):
        assert raw not in shown, raw
    assert "&lt;!channel&gt;" in shown and "&amp;" in shown
    code = [t for t in _section_texts(answer_messages(d.model_copy(update={"candidates": [top]}))) if "echo" in t][0]
    assert code.count("```") == 2  # the ``` inside the code no longer closes the block


def test_a_chinese_paste_is_answered_with_chinese_labels(rules):
    d = rules.diagnose("训练跑着跑着显存不够了，怎么办？\n" + OOM.splitlines()[-1])
    assert d.language == "zh"
    shown = _texts(answer_messages(d, answer_id="a3", secret_kinds=["jwt"]))
    for label in ("置信度", "证据", "本例中可能的原因", "先做什么", "来源", "有帮助", "请删除原消息"):
        assert label in shown, label


def test_a_decline_is_short_and_polite(rules):
    d = rules.diagnose("ERROR: Could not build wheels for flash-attn, which is required to install "
                       "pyproject.toml-based projects\nerror: command 'gcc' failed: No such file or directory")
    assert d.abstained
    messages = answer_messages(d, answer_id="a4")
    assert len(messages) == 1 and len(messages[0].blocks) <= 8
    assert messages[0].blocks[0]["text"]["text"] == "Not in my knowledge base"
    assert block_kit_problems(messages[0].text, messages[0].blocks) == []


def test_follow_up_values_round_trip_and_garbage_is_ignored():
    assert parse_follow_up(follow_up_value("precision", "bf16")) == ("precision", "bf16")
    for bad in ("", "nope", "[]", '{"q": 1, "v": "x"}', '{"q": "a"}'):
        assert parse_follow_up(bad) is None
    assert escape("a<b>&c") == "a&lt;b&gt;&amp;c"


# -- the command ----------------------------------------------------------------------------------


def test_the_cli_does_not_import_slack_bolt():
    code = "import sys; from app import cli; print([m for m in ('slack_bolt', 'slack_sdk') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def _trainfix(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFIX_")} | env
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], env=full, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize(("args", "env", "message"), [
    (["slack"], {}, "TRAINFIX_SLACK_BOT_TOKEN"),
    (["slack", "--mode", "http"], {"TRAINFIX_SLACK_BOT_TOKEN": "xoxb-fake"}, "TRAINFIX_SLACK_SIGNING_SECRET"),
    (["slack", "--mode", "socket"], {"TRAINFIX_SLACK_BOT_TOKEN": "xoxb-fake"}, "TRAINFIX_SLACK_APP_TOKEN"),
    (["slack", "--mode", "carrier-pigeon"], {}, "--mode must be"),
    (["slack", "--mode", "http", "--port", "0"], {"TRAINFIX_SLACK_BOT_TOKEN": "xoxb-fake", "TRAINFIX_SLACK_SIGNING_SECRET": "x",
                                                  "TRAINFIX_SLACK_API_URL": "<fake>"}, "Slack refused the bot token"),
])
def test_missing_settings_are_one_clear_line_and_exit_code_2(tmp_path, args, env, message):
    fake = FakeSlack(token_ok=False)
    try:
        env = {k: fake.api_url if v == "<fake>" else v for k, v in env.items()}
        proc = _trainfix(args, {"TRAINFIX_DATA_DIR": str(tmp_path), **env})
        out, err = proc.communicate(timeout=120)
    finally:
        fake.close()
    assert proc.returncode == 2, err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_trainfix_slack_serves_http_on_the_port_it_prints(tmp_path):
    fake = FakeSlack()
    proc = _trainfix(["slack", "--mode", "http", "--port", "0"],
                     {"TRAINFIX_DATA_DIR": str(tmp_path), "TRAINFIX_SLACK_BOT_TOKEN": "xoxb-fake",
                      "TRAINFIX_SLACK_SIGNING_SECRET": "cli-secret", "TRAINFIX_SLACK_API_URL": fake.api_url})
    try:
        line = proc.stdout.readline()  # blocks until the server is listening (or the process ended)
        assert "listening on http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        url = line.split("listening on ", 1)[1].split()[0]
        assert not url.split(":")[2].startswith("0/")
        body = json.dumps({"type": "url_verification", "token": "legacy", "challenge": "c-123"})
        assert send(url, body, sign("cli-secret", body), "application/json")[0] == 200
        assert send(url, body, sign("wrong", body), "application/json")[0] == 401
        body = event_body({"type": "app_mention", "user": "U0USER", "text": "<@UBOT> " + OOM, "ts": "1.2",
                           "channel": "C0CHAN", "event_ts": "1.2"}, "Ev-cli")
        assert send(url, body, sign("cli-secret", body), "application/json")[0] == 200
        fake.wait_for(lambda: [c for c in fake.named("chat.postMessage") if "cuda-oom" in json.dumps(c.params)],
                      "the answer from the CLI's bot")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
        fake.close()


def test_the_manifest_asks_for_exactly_the_scopes_and_events_the_bot_uses():
    import yaml

    manifest = yaml.safe_load((ROOT / "docs" / "slack-app-manifest.yaml").read_text(encoding="utf-8"))
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "app_mentions:read",  # app_mention events
        "im:history",  # message.im events
        "channels:history", "groups:history",  # message.channels/.groups: a log shared in a thread the bot is in
        "chat:write",  # chat.postMessage, chat.postEphemeral
        "commands",  # /trainfix
        "files:read",  # files.info and the download
        "files:write",  # files.getUploadURLExternal + files.completeUploadExternal (the plot)
    }
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {"app_mention", "message.im", "message.channels",
                                                                                "message.groups"}
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/trainfix"]
    assert manifest["settings"]["interactivity"]["is_enabled"] is True  # the follow-up and 👍/👎 buttons
