"""`trainfix index`, `trainfix search` and `trainfix eval-retrieval` on a small knowledge base."""

from __future__ import annotations

import json
import shutil

import pytest
from retrieval_fixtures import sample_passages, sample_records
from typer.testing import CliRunner

from app.cli import app
from kb.store import dump

pytestmark = pytest.mark.slow


@pytest.fixture
def kb_env(tmp_path, monkeypatch):
    kb = tmp_path / "kb"
    for sub, items in (("modes", sample_records()), ("passages", sample_passages())):
        (kb / "records" / sub).mkdir(parents=True)
        for item in items:
            (kb / "records" / sub / f"{item.id}.json").write_text(dump(item), encoding="utf-8")
    shutil.copytree(__import__("assistant.config", fromlist=["KB_DIR"]).KB_DIR / "sources", kb / "sources")
    monkeypatch.setenv("TRAINFIX_KB_DIR", str(kb))
    monkeypatch.setenv("TRAINFIX_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def test_index_build_status_search_eval(kb_env):
    runner = CliRunner()
    status = runner.invoke(app, ["index", "status", "--json"])
    assert status.exit_code == 1 and json.loads(status.stdout)["state"] == "missing"

    built = runner.invoke(app, ["index", "build", "--json"])
    assert built.exit_code == 0, built.output
    report = json.loads(built.stdout)
    assert report["embedded"] == report["chunks"] > 0
    again = json.loads(runner.invoke(app, ["index", "build", "--json"]).stdout)
    assert again["embedded"] == 0 and again["reused"] == report["chunks"]
    assert runner.invoke(app, ["index", "status"]).exit_code == 0

    found = runner.invoke(app, ["search", "显存不足", "-k", "2", "--json"])
    hits = json.loads(found.stdout)
    assert [h["id"] for h in hits][0] == "cuda-oom" and hits[0]["citation"]["section"] == "4"
    text = runner.invoke(app, ["search", "NCCL timeout"]).stdout
    assert text.startswith("1. distributed-sync-failure") and "§5" in text

    cases = kb_env / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in [
        {"text": "CUDA out of memory", "labels": ["cuda-oom"], "lang": "en"},
        {"text": "加载 Checkpoint 报错", "labels": ["checkpoint-corruption"], "lang": "zh"},
        {"text": "completely unrelated words about cooking pasta", "labels": ["disk-full"], "lang": "en"},
    ]), encoding="utf-8")
    result = runner.invoke(app, ["eval-retrieval", "--cases", str(cases), "--json"])
    assert result.exit_code == 0, result.output
    ev = json.loads(result.stdout)
    assert ev["queries"] == 3 and ev["recall_at_1"] == pytest.approx(2 / 3, abs=1e-3)
    assert [m["labels"] for m in ev["misses"]] == [["disk-full"]]
