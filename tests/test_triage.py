"""The triage pipeline end to end: API shape, evidence lines, ranking, abstention, streaming, CLI, light imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.errors import KnowledgeBaseError

from assistant.models import Triage
from assistant.triage import triage, triage_file, triage_stream

ROOT = Path(__file__).resolve().parent.parent

MULTIRANK = "\n".join([
    "\x1b[32m[INFO]\x1b[0m starting training",                                   # 1
    "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}",    # 2
    "[rank3]: Traceback (most recent call last):",                               # 3
    '[rank3]:   File "train.py", line 88, in <module>',                          # 4
    "[rank3]:     trainer.train()",                                              # 5
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 1.25 GiB is free.",  # 6
    "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600085 milliseconds before timing out.",  # 7
])


def test_result_shape_and_evidence_points_into_the_input():
    result = triage(MULTIRANK)
    assert isinstance(result, Triage) and not result.abstained
    assert result.input_lines == 7 and result.language == "en"
    top = result.candidates[0]
    assert top.failure_mode == "cuda-oom" and top.route == "rule"
    assert 0.85 <= top.confidence <= 0.99
    ev = top.evidence[0]
    assert ev.line == 6 and ev.rank == "3" and ev.match in MULTIRANK.split("\n")[5]
    assert ev.source.startswith("rule:cuda-oom.") and ev.strength == "strong"
    for cand in result.candidates:
        for e in cand.evidence:
            assert e.match in MULTIRANK.split("\n")[e.line - 1]
    assert any(t.rank == "3" and t.exc_type == "torch.OutOfMemoryError" for t in result.tracebacks)


def test_a_timeout_caused_by_a_crashed_rank_ranks_below_the_crash():
    result = triage(MULTIRANK)
    modes = [c.failure_mode for c in result.candidates]
    assert modes.index("cuda-oom") < modes.index("network-timeout")
    timeout = result.candidates[modes.index("network-timeout")]
    assert timeout.confidence < 0.9
    assert timeout.causes and timeout.causes[0].cause_id == "collective-timeout-too-short" or any(
        "rank failed first" in r for c in timeout.causes for r in c.reasons)


def test_ansi_is_stripped_from_evidence_text():
    result = triage("\x1b[31mOSError: [Errno 28] No space left on device\x1b[0m")
    ev = result.candidates[0].evidence[0]
    assert result.candidates[0].failure_mode == "disk-full"
    assert "\x1b" not in ev.text and ev.text.startswith("OSError")


def test_unrelated_python_error_abstains():
    web = "\n".join([
        "Traceback (most recent call last):",
        '  File "/app/views.py", line 41, in get_user',
        "    return USERS[request.args['id']]",
        "KeyError: 'user_42'",
    ])
    result = triage(web)
    assert result.abstained and result.candidates == []
    assert result.tracebacks and result.tracebacks[0].exc_type == "KeyError"


def test_nan_in_a_metric_series_is_found_by_rule_and_metrics():
    lines = [f"step={i * 10} loss={2.0 - i * 0.01:.3f} lr=1e-4" for i in range(20)] + ["step=200 loss=NaN lr=1e-4"]
    result = triage("\n".join(lines))
    nan = next(c for c in result.candidates if c.failure_mode == "nan-loss")
    assert nan.evidence[0].line == 21 and nan.confidence > 0.9  # rule and metric finding combine
    finding = result.metrics.findings[0]
    assert (finding.kind, finding.step, finding.line) == ("nan-onset", 200, 21)


def test_metrics_only_route_for_a_loss_spike():
    lines = [f"{{'loss': {2.0 + 0.01 * (i % 4):.3f}, 'grad_norm': 1.0, 'epoch': {i / 100:.2f}}}" for i in range(30)]
    lines[25] = "{'loss': 7.9, 'grad_norm': 1.0, 'epoch': 0.25}"
    result = triage("\n".join(lines))
    spike = next(c for c in result.candidates if c.failure_mode == "loss-spike")
    assert spike.route == "metrics" and spike.evidence[0].line == 26
    assert "metrics" in result.routes


def test_chinese_question_is_recognised_and_language_is_zh():
    result = triage("训练到一半显存不足，batch size 已经是 1 了")
    assert result.language == "zh" and result.candidates[0].failure_mode == "cuda-oom"


def test_streaming_matches_one_shot_and_file_path(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text(MULTIRANK, encoding="utf-8")
    data = MULTIRANK.encode()
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    one = triage(MULTIRANK).model_dump()
    assert triage_stream(pieces).model_dump() == one
    assert triage_file(p).model_dump() == one


def test_long_log_is_scanned_fully_but_only_part_kept(tmp_path):
    body = "".join(f"{{'loss': {2.0 + 0.01 * (i % 5):.3f}, 'epoch': {i / 1000:.3f}}}\n" for i in range(20000))
    middle_error = "OSError: [Errno 28] No space left on device\n"
    text = body + middle_error + body
    result = triage(text)
    disk = next(c for c in result.candidates if c.failure_mode == "disk-full")
    assert disk.evidence[0].line == 20001
    assert any("were kept for traceback analysis" in n for n in result.notices)


def test_cli_triage_json_and_answers(tmp_path):
    from app.cli import app

    p = tmp_path / "log.txt"
    p.write_text("{'loss': nan}\nGradient overflow.  Skipping step, reducing loss scale to 1\n", encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["triage", str(p), "--json", "--answer", "precision=bf16"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["candidates"][0]["failure_mode"] == "nan-loss" and data["facts"]["precision"] == "bf16"
    res = runner.invoke(app, ["triage", "-"], input="RuntimeError: CUDA error: device-side assert triggered\n")
    assert res.exit_code == 0 and "token-out-of-range" in res.output


def test_cli_missing_file_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "app.cli", "triage", str(tmp_path / "nope.log")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "file not found" in proc.stderr


def test_cli_eval_rules_on_a_case_file(tmp_path):
    from app.cli import app

    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in [
        {"text": "CUDA out of memory", "labels": ["cuda-oom"], "lang": "en"},
        {"text": "KeyError: 'user_1'", "labels": [], "lang": "en"},
        {"text": "磁盘满了", "labels": ["disk-full"], "lang": "zh"},
    ]), encoding="utf-8")
    res = CliRunner().invoke(app, ["eval-rules", "--cases", str(cases), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["top1"] == 1.0 and report["abstention_recall"] == 1.0 and report["abstention_precision"] == 1.0


def test_triage_path_does_not_import_heavy_libraries():
    code = (
        "import sys\nfrom assistant.triage import triage\ntriage(open(sys.argv[1]).read())\n"
        "heavy = [m for m in ('torch', 'chromadb', 'sentence_transformers', 'gradio', 'transformers') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    log = ROOT / "tests" / "_light_import_log.txt"
    try:
        log.write_text(MULTIRANK, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, cwd=ROOT)
    finally:
        log.unlink(missing_ok=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_a_failing_stage_adds_a_warning_and_the_rest_runs(monkeypatch):
    import importlib

    triage_module = importlib.import_module("assistant.triage")  # the package re-exports the function

    def broken(_lines):
        raise ValueError("parser exploded")  # what odd input can make a parser raise

    monkeypatch.setattr(triage_module, "extract", broken)
    result = triage_module.triage(MULTIRANK)
    assert any("traceback stage failed: parser exploded" in w for w in result.warnings)
    assert result.candidates[0].failure_mode == "cuda-oom" and result.tracebacks == []


@pytest.mark.parametrize("error", [RuntimeError("a bug"), TypeError("a bug"), KnowledgeBaseError("kb/tree.yaml, line 3: x")])
def test_a_bug_or_a_broken_knowledge_base_is_not_turned_into_an_abstention(monkeypatch, error):
    import importlib

    triage_module = importlib.import_module("assistant.triage")

    def broken(_lines):
        raise error

    monkeypatch.setattr(triage_module, "extract", broken)
    with pytest.raises(type(error)):
        triage_module.triage(MULTIRANK)
