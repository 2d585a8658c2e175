"""The decision tree data (kb/tree.yaml) and engine: cause ids, re-ranking, follow-ups, free-text answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from assistant.errors import KnowledgeBaseError
from assistant.tree import load_tree, parse_answer
from assistant.triage import triage
from kb.taxonomy import MODE_IDS

ROOT = Path(__file__).resolve().parent.parent
TREE = load_tree()


def test_tree_covers_every_mode():
    assert set(TREE.modes) == set(MODE_IDS)


def test_tree_and_records_know_the_same_causes():
    """Every cause the tree can rank exists in that mode's record, and every recorded cause is ranked."""
    by_mode: dict[str, set[str]] = {}
    for p in (ROOT / "kb" / "records" / "modes").glob("*.json"):
        data = json.loads(p.read_text(encoding="utf-8"))
        by_mode[data["failure_mode"]] = {c["id"] for c in data["causes"]}
    assert set(by_mode) == set(MODE_IDS)
    for mode, ids in TREE.cause_ids().items():
        assert set(ids) == by_mode[mode], f"{mode}: tree-only {set(ids) - by_mode[mode]}, record-only {by_mode[mode] - set(ids)}"


def test_guide_likelihoods_order_nan_causes():
    scores = {c.id: TREE.base_score(c) for c in TREE.modes["nan-loss"].causes}
    assert scores["lr-too-high"] == scores["fp16-overflow"] > scores["nan-inf-in-data"] > scores["embedding-index-out-of-range"]


def test_tree_with_unknown_cause_in_adjust_does_not_load(tmp_path):
    data = yaml.safe_load((ROOT / "kb" / "tree.yaml").read_text(encoding="utf-8"))
    data["modes"]["nan-loss"]["adjust"].append({"when": {"precision": "bf16"}, "cause": "cosmic-rays", "delta": 0.1,
                                                "reason": "x", "reason_zh": "宇宙射线"})
    p = tmp_path / "tree.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match="cosmic-rays"):
        load_tree(p)


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [("adjust", "reason_zh", None), ("hints", "reason_zh", None), ("causes", "basis_zh", None),
     ("hints", "reason_zh", "index out of range")],
)
def test_tree_without_a_chinese_reason_does_not_load(tmp_path, section, field, value):
    """Every reason / basis needs its Chinese: missing (or English copied over) fails at load."""
    data = yaml.safe_load((ROOT / "kb" / "tree.yaml").read_text(encoding="utf-8"))
    item = data["modes"]["nan-loss"][section][0]
    if value is None:
        del item[field]
    else:
        item[field] = value
    p = tmp_path / "tree.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match=field):
        load_tree(p)


def test_fact_detectors_need_a_chinese_reason(tmp_path):
    data = yaml.safe_load((ROOT / "kb" / "tree.yaml").read_text(encoding="utf-8"))
    del data["facts"]["precision"]["detect"][0]["reason_zh"]
    p = tmp_path / "tree.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match="reason_zh"):
        load_tree(p)


@pytest.mark.parametrize(
    ("fid", "text", "expected"),
    [
        ("precision", "it's bf16 already", "bf16"),
        ("precision", "就是bf16", "bf16"),
        ("precision", "not fp16, we use bf16", "bf16"),
        ("precision", "FP16 with GradScaler", "fp16"),
        ("precision", "no idea", None),
        ("oom-when", "right at the first step", "start"),
        ("oom-when", "跑了两个小时之后", "mid"),
        ("oom-when", "during generate()", "inference"),
        ("oom-when", "always at the same step", "specific-step"),
        ("ddp-unused", "yes, LoRA adapters", "yes"),
        ("ddp-unused", "不是", "no"),
        ("unknown-question", "bf16", None),
    ],
)
def test_parse_answer(fid, text, expected):
    assert parse_answer(fid, text) == expected


def _causes(result, mode):
    cand = next(c for c in result.candidates if c.failure_mode == mode)
    return [c.cause_id for c in cand.causes], {c.cause_id: c for c in cand.causes}


def test_fp16_evidence_raises_fp16_overflow_and_bf16_answer_drops_it():
    text = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1024\n{'loss': nan, 'epoch': 1.2}"
    first = triage(text)
    order, by_id = _causes(first, "nan-loss")
    assert order[0] == "fp16-overflow"
    assert any("line 1" in r for r in by_id["fp16-overflow"].reasons)
    answered = triage(text, answers={"precision": "bf16"})
    order2, by_id2 = _causes(answered, "nan-loss")
    assert by_id2["fp16-overflow"].score < by_id["fp16-overflow"].score
    assert order2[0] != "fp16-overflow"
    assert answered.facts["precision"] == "bf16"


def test_nan_at_first_steps_raises_lr_too_high():
    lines = ["{'loss': 2.5, 'epoch': 0.01}", "{'loss': nan, 'epoch': 0.02}", "{'loss': nan, 'epoch': 0.03}"]
    result = triage("\n".join(lines))
    order, by_id = _causes(result, "nan-loss")
    assert result.facts["nan-onset"] == "early"
    assert order[0] == "lr-too-high"


def test_oom_timing_answers_follow_the_guide_table():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    expected = {"start": "model-or-batch-too-large", "mid": "variable-seq-len-or-leak",
                "specific-step": "long-samples", "inference": "kv-cache-growth"}
    for answer, cause in expected.items():
        order, _ = _causes(triage(oom, answers={"oom-when": answer}), "cuda-oom")
        assert order[0] == cause, answer


def test_oom_follow_up_is_asked_until_answered():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert "oom-when" in [q.id for q in triage(oom).follow_up]
    assert "oom-when" not in [q.id for q in triage(oom, answers={"oom-when": "step 0"}).follow_up]


def test_unused_parameters_error_ranks_unused_parameters_first():
    text = ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
            "... `find_unused_parameters=True` ...")
    order, _ = _causes(triage(text), "distributed-sync-failure")
    assert order[0] == "unused-parameters"


def test_killed_dataloader_ranks_dataloader_workers_first():
    order, _ = _causes(triage("RuntimeError: DataLoader worker (pid 24157) is killed by signal: Killed."), "cpu-oom")
    assert order[0] == "dataloader-workers-memory"


def test_ddp_warning_about_no_unused_parameters_is_not_evidence_for_them():
    text = "\n".join([
        "[rank0]:[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified in DDP constructor, but did "
        "not find any unused parameters in the forward pass.",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    ])
    result = triage(text)
    assert "ddp-unused" not in result.facts
    order, by_id = _causes(result, "distributed-sync-failure")
    assert order[0] == "rank-crashed"
    assert all("line 1" not in r for r in by_id["unused-parameters"].reasons)


def test_step_mentioned_in_text_settles_nan_onset():
    assert triage("训练到 3000 步 loss 变成 nan 了，用的 fp16").facts.get("nan-onset") == "late"
    assert triage("loss becomes NaN after 12000 steps").facts.get("nan-onset") == "late"


def test_nan_onset_follows_the_logged_step_or_epoch_not_the_paste_length():
    assert triage("step 3000: loss nan").facts["nan-onset"] == "late"
    assert triage("step 12: loss nan").facts["nan-onset"] == "early"
    late_epoch = "{'loss': 1.8731, 'epoch': 2.97}\n{'loss': nan, 'epoch': 2.98}"
    assert triage(late_epoch).facts["nan-onset"] == "late"
    order, _ = _causes(triage(late_epoch), "nan-loss")
    assert order[0] != "lr-too-high"
    # Two lines with neither step nor epoch say nothing about when the run started: no fact claimed.
    assert "nan-onset" not in triage("loss: 2.31\nloss: nan").facts


_CJK = re.compile(r"[\u4e00-\u9fff]")
_DDP_UNUSED = ("[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new "
               "one. This error indicates that your module has parameters that were not used in producing loss. You can "
               "enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
               "`torch.nn.parallel.DistributedDataParallel`")


@pytest.mark.parametrize(
    ("text", "answers"),
    [
        ("model.half()  # fp16\n{'loss': 2.1, 'step': 1}\n{'loss': nan, 'step': 2}\n"
         "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1024", None),
        ("{'loss': 2.1, 'step': 1}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
         {"oom-when": "start"}),
        (_DDP_UNUSED, {"ddp-unused": "yes, LoRA"}),
        ("step 3000: loss nan", None),
        ("{'loss': 2.1, 'step': 1}\ntorch.OutOfMemoryError: CUDA out of memory.\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", None),
    ],
    ids=["nan-fp16", "oom-start", "ddp-unused", "nan-step-3000", "oom-then-rank-crashed"],
)
def test_every_reason_has_its_chinese_with_the_same_lines(text, answers):
    result = triage(text, answers=answers)
    causes = [rc for cand in result.candidates for rc in cand.causes]
    assert causes
    for rc in causes:
        assert len(rc.reasons_zh) == len(rc.reasons), rc.cause_id
        for en, zh in zip(rc.reasons, rc.reasons_zh, strict=True):
            assert _CJK.search(zh), zh
            for n in re.findall(r"\bline (\d+)", en):
                assert f"第 {n} 行" in zh, (en, zh)
            for n in re.findall(r"\(step (\d+)\)", en):
                assert f"第 {n} 步" in zh, (en, zh)
