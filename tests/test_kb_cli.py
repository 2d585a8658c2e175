"""`trainfix ingest`, `kb list` and `kb show` through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from app.cli import app
from assistant.errors import KnowledgeBaseError
from kb.taxonomy import MODE_IDS

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def test_kb_list_json_has_all_modes():
    result = runner.invoke(app, ["kb", "list", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["id"] for r in data["records"]] == list(MODE_IDS)
    nan = data["records"][0]
    assert nan["category"] == "numeric" and nan["counts"]["causes"] == 7 and nan["title"]["zh"] == "Loss 变为 NaN"


def test_kb_show_renders_record_in_both_languages():
    en = runner.invoke(app, ["kb", "show", "nan-loss"], env={"COLUMNS": "160"})
    assert en.exit_code == 0, en.output
    assert "Learning rate too high" in en.stdout and "lr-too-high" in en.stdout
    assert "torch.isnan(loss)" in en.stdout
    assert "000_416041118514696b.txt §2 NaN Loss, line 46 (guide)" in en.stdout
    zh = runner.invoke(app, ["kb", "show", "nan-loss", "--lang", "zh"], env={"COLUMNS": "160"})
    assert "学习率过高" in zh.stdout and "高" in zh.stdout


def test_kb_show_labels_runbook_citations():
    result = runner.invoke(app, ["kb", "show", "cpu-oom"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "team-runbook.md §cpu-oom" in result.stdout and "(team runbook)" in result.stdout


def test_kb_show_json_and_unknown_id():
    result = runner.invoke(app, ["kb", "show", "cuda-oom", "--json"])
    assert json.loads(result.stdout)["causes"][-1]["id"] == "step-tensors-kept-alive"
    unknown = runner.invoke(app, ["kb", "show", "cuda-om"])
    assert isinstance(unknown.exception, KnowledgeBaseError) and "did you mean cuda-oom" in str(unknown.exception)


def test_unknown_id_exits_2_with_message():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "kb", "show", "nan-los"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "unknown knowledge-base id 'nan-los'; did you mean nan-loss?" in proc.stderr


def test_ingest_check_json_reports_up_to_date():
    result = runner.invoke(app, ["ingest", "--check", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["check"] is True and report["skipped"] == []
    assert {c["status"] for c in report["changes"]} == {"unchanged"}


def test_ingest_check_fails_on_stale_out_dir(tmp_path):
    out = tmp_path / "records"
    assert runner.invoke(app, ["ingest", "--out", str(out), "--no-index"]).exit_code == 0
    (out / "modes" / "nan-loss.json").write_text("{}\n", encoding="utf-8")
    result = runner.invoke(app, ["ingest", "--out", str(out), "--check"])
    assert result.exit_code == 1
    assert "modes/nan-loss.json" in result.stdout
