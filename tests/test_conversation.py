"""A reply answers the follow-up question only when it reads as one; a new paste or question starts over.
Also: a file and the same text on stdin get the same answer; TRAINFIX_KB_DIR swaps every part of the KB."""

from __future__ import annotations

import shutil

import pytest

from assistant import Assistant, Exchange
from assistant.config import Settings
from assistant.intent import reads_as_answer

NAN = "\n".join(["{'loss': 2.1, 'learning_rate': 4e-05, 'epoch': %.2f}" % (i / 100) for i in range(50)]
                + ["{'loss': nan, 'learning_rate': 4e-05, 'epoch': 0.50}"])
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.6 GiB"


@pytest.fixture(scope="module")
def assistant():
    return Assistant(retrieval="never")


@pytest.mark.parametrize("reply", ["it's bf16 already", "bf16", "就是bf16", "用的 bf16", "no, fp32"])
def test_short_replies_read_as_answers(reply):
    assert reads_as_answer(reply)


@pytest.mark.parametrize("message", [
    "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    "显存不够怎么办？",
    "what does NCCL_P2P_DISABLE do?",
    "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nKeyError: 'text'",
    "x" * 400,
])
def test_pastes_and_questions_do_not(message):
    assert not reads_as_answer(message)


def test_reply_narrows_the_previous_diagnosis(assistant):
    first = assistant.diagnose(NAN)
    assert first.follow_up and first.follow_up[0].id == "precision"
    for reply in ("it's bf16 already", "就是bf16"):
        again = assistant.ask(reply, history=[Exchange(message=NAN, diagnosis=first)])
        assert again.answers == {"precision": "bf16"}
        assert again.candidates[0].failure_mode == "nan-loss"
        assert again.candidates[0].causes[0].id != "fp16-overflow"
    assert assistant.ask("就是bf16", history=[Exchange(message=NAN, diagnosis=first)]).language == "zh"


@pytest.mark.parametrize("new", [
    "json.decoder.JSONDecodeError: Extra data: line 2 column 1 (char 118)",   # contains "decod", an answer pattern
    "训练的时候 json 解析失败，数据格式错误怎么办？",
])
def test_a_new_paste_after_an_answer_is_diagnosed_on_its_own(assistant, new):
    first = assistant.diagnose(OOM)
    assert first.follow_up and first.candidates[0].failure_mode == "cuda-oom"
    nxt = assistant.ask(new, history=[Exchange(message=OOM, diagnosis=first)])
    assert not nxt.answers
    assert nxt.candidates[0].failure_mode == "data-format-error"


def test_file_and_stdin_give_the_same_answer(tmp_path):
    a = Assistant()
    text = "the tokenizer warns about the pad token and the learning rate schedule looks odd"
    path = tmp_path / "paste.txt"
    path.write_text(text, encoding="utf-8")
    from_text, from_file = a.diagnose(text), a.diagnose_file(path)
    assert from_text.model_dump() == from_file.model_dump()
    assert from_text.passages  # nearest sections (or supporting ones) included both ways
    assert "retrieval" in from_file.routes or from_file.abstained


def test_kb_dir_supplies_rules_tree_and_cases(tmp_path):
    from assistant.config import KB_DIR

    kb = tmp_path / "kb"
    shutil.copytree(KB_DIR, kb, ignore=shutil.ignore_patterns("__pycache__"))
    rules = kb / "rules" / "disk-full.yaml"
    rules.write_text(rules.read_text(encoding="utf-8") + """
  - id: disk-full.site-quota
    description: Our cluster's quota daemon message.
    strength: strong
    patterns: ['QUOTAD: hard limit reached for project']
    examples:
      match: ["QUOTAD: hard limit reached for project ml-42"]
      no_match: ["QUOTAD: usage 40%"]
""", encoding="utf-8")
    text = "QUOTAD: hard limit reached for project ml-42"
    assert not Assistant(retrieval="never").diagnose(text).candidates
    mine = Assistant(Settings(kb_dir=kb), retrieval="never").diagnose(text)
    assert mine.candidates[0].failure_mode == "disk-full"
    assert mine.candidates[0].evidence[0].source == "rule:disk-full.site-quota"
