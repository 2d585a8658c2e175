"""trainfix check: the guide's pre-launch checklist (§8) on training configs, each item cited at its own line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assistant.checklist import check_config, load_checklist, load_config
from assistant.config import KB_DIR, Settings
from assistant.errors import InputError, KnowledgeBaseError

ROOT = Path(__file__).resolve().parent.parent
CHECKED = {"learning-rate", "grad-clipping", "bf16", "eval-interval"}
GOOD_FULL = {"output_dir": "out", "learning_rate": 2e-5, "max_grad_norm": 1.0, "bf16": True, "fp16": False,
             "eval_strategy": "steps", "eval_steps": 500, "logging_steps": 10}
GOOD_LORA = {"learning_rate": 1.5e-4, "lora_r": 16, "lora_alpha": 32, "max_grad_norm": 1.0, "bf16": "auto",
             "evals_per_epoch": 4}
BAD_LORA = {"learning_rate": 1e-3, "adapter": "lora", "max_grad_norm": 0, "fp16": True, "eval_strategy": "steps",
            "eval_steps": 10}


def status(report) -> dict[str, str]:
    return {i.id: i.status for i in report.items}


def test_every_checklist_citation_is_the_guide_line_it_quotes():
    items = load_checklist(KB_DIR.resolve())
    assert {spec.id for spec, _, _ in items} >= CHECKED | {"token-ids-in-vocab", "label-masking"}
    lines = (Settings().sources_dir / items[0][1].source).read_text(encoding="utf-8").splitlines()
    for spec, cite, english in items:
        assert cite.section == "8" and cite.source_kind == "guide" and cite.start_line == cite.end_line
        assert lines[cite.start_line - 1].strip() == cite.quote == spec.quote
        assert english


def test_a_bad_config_flags_each_checkable_item():
    report = check_config(BAD_LORA)
    assert report.regime == "lora"
    assert {i.id for i in report.flagged} == CHECKED
    by_id = {i.id: i for i in report.items}
    assert "above the LoRA range" in by_id["learning-rate"].en and by_id["learning-rate"].found == {"learning_rate": "0.001"}
    assert "off" in by_id["grad-clipping"].en and "FP16" in by_id["bf16"].en and "10" in by_id["eval-interval"].en
    assert status(report)["token-ids-in-vocab"] == status(report)["label-masking"] == "manual"


@pytest.mark.parametrize("config", [GOOD_FULL, GOOD_LORA], ids=["full", "lora"])
def test_a_good_config_passes(config):
    report = check_config(config)
    assert report.flagged == []
    assert all(status(report)[i] == "ok" for i in CHECKED)


@pytest.mark.parametrize(("change", "item"), [
    ({"learning_rate": 1.5e-4}, "learning-rate"),                    # a LoRA rate on a full fine-tune
    ({"learning_rate": 1e-6}, "learning-rate"),                      # too low
    ({"max_grad_norm": None, "gradient_clipping": 0.0}, "grad-clipping"),
    ({"max_grad_norm": 100.0}, "grad-clipping"),                     # effectively off
    ({"bf16": False, "fp16": False}, "bf16"),                        # FP32
    ({"eval_steps": 0.001}, "eval-interval"),                        # a ratio: 1000 evaluations
    ({"eval_steps": None, "logging_steps": 5}, "eval-interval"),     # eval_steps defaults to logging_steps
])
def test_one_bad_setting_flags_exactly_its_item(change, item):
    config = {k: v for k, v in {**GOOD_FULL, **change}.items() if v is not None}
    assert [i.id for i in check_config(config).flagged] == [item]


def test_nested_deepspeed_and_defaults():
    # DeepSpeed's bf16.enabled / gradient_clipping, and a TrainingArguments dict that leaves defaults alone
    ds = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-5}}}
    assert check_config(ds).flagged == []
    lora_default_lr = {"peft_config": {"r": 8}, "bf16": True}
    flagged = {i.id: i for i in check_config(lora_default_lr).flagged}
    assert list(flagged) == ["learning-rate"] and "default" in flagged["learning-rate"].en


def test_training_arguments_object():
    transformers = pytest.importorskip("transformers")
    args = transformers.TrainingArguments(output_dir="/tmp/unused", learning_rate=2e-5, bf16=False, use_cpu=True,
                                          report_to=[])
    report = check_config(args)
    assert [i.id for i in report.flagged] == ["bf16"]


def test_cli_exit_codes_and_output(tmp_path):
    bad, good = tmp_path / "bad.json", tmp_path / "good.yaml"
    bad.write_text(json.dumps(BAD_LORA))
    good.write_text(yaml.safe_dump(GOOD_FULL))
    run = [sys.executable, "-m", "app.cli", "check"]
    res = subprocess.run([*run, str(bad)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 1
    assert "4 item(s)" in res.stdout and res.stdout.count("[FLAG]") == 4 and "line 245" in res.stdout
    res = subprocess.run([*run, str(good), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0 and json.loads(res.stdout)["regime"] == "full"
    res = subprocess.run([*run, str(good), "--lang", "zh"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0 and "符合" in res.stdout
    for broken in ("[1, 2]", "{not json"):
        path = tmp_path / "broken.json"
        path.write_text(broken)
        res = subprocess.run([*run, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert res.returncode == 2 and res.stderr.startswith("trainfix: ") and "Traceback" not in res.stderr


def test_load_config_errors_are_input_errors(tmp_path):
    with pytest.raises(InputError):
        load_config(tmp_path / "missing.yaml")
    pickled = tmp_path / "training_args.bin"
    pickled.write_bytes(b"\x80\x04\x95\xff\xfe")
    with pytest.raises(InputError, match="to_json_string"):
        load_config(pickled)


def test_a_quote_not_in_the_guide_fails_at_load_time(tmp_path):
    kb = tmp_path / "kb"
    (kb / "sources").mkdir(parents=True)
    (kb / "translations").mkdir()
    src = KB_DIR / "sources" / "000_416041118514696b.txt"
    (kb / "sources" / src.name).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    (kb / "translations" / "000_416041118514696b.en.yaml").write_text(
        (KB_DIR / "translations" / "000_416041118514696b.en.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    data = yaml.safe_load((KB_DIR / "checklist.yaml").read_text(encoding="utf-8"))
    data["items"][2]["quote"] = "学习率越大越好"
    (kb / "checklist.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match="not a line of"):
        load_checklist(kb.resolve())
