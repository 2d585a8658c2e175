"""Ingest end to end: committed records match a fresh ingest, output is deterministic, bad files are skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from assistant.config import KB_DIR, Settings
from ingest.pipeline import build_outputs, run_ingest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ingest"


def _settings() -> Settings:
    return Settings(kb_dir=KB_DIR)


def test_committed_records_equal_fresh_ingest():
    report = run_ingest(_settings(), check=True)
    stale = [c.path for c in report.changes if c.status != "unchanged"]
    assert stale == [], f"kb/records is stale, run `trainfix ingest`: {stale}"
    assert report.written is False
    assert report.warnings == [] and report.skipped == []


def test_ingest_is_deterministic(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    run_ingest(_settings(), out_dir=first)
    run_ingest(_settings(), out_dir=second)
    files = sorted(p.relative_to(first) for p in first.rglob("*.json"))
    assert len(files) > 15
    assert files == sorted(p.relative_to(second) for p in second.rglob("*.json"))
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes()
    again = run_ingest(_settings(), out_dir=first)
    assert again.up_to_date and again.counts()["unchanged"] == len(files)


def test_check_detects_changed_and_removed_outputs(tmp_path):
    out = tmp_path / "records"
    run_ingest(_settings(), out_dir=out)
    (out / "modes" / "nan-loss.json").write_text("{}\n", encoding="utf-8")
    (out / "passages" / "pre-launch-checklist.json").unlink()
    (out / "passages" / "stale.json").write_text("{}\n", encoding="utf-8")
    report = run_ingest(_settings(), out_dir=out, check=True)
    status = {c.path: c.status for c in report.changes}
    assert status["modes/nan-loss.json"] == "changed"
    assert status["passages/pre-launch-checklist.json"] == "added"
    assert status["passages/stale.json"] == "removed"
    assert not report.up_to_date
    assert (out / "passages" / "stale.json").exists()  # --check writes nothing


def test_bad_inputs_are_skipped_by_name_and_the_rest_ingests(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    for src in (KB_DIR / "sources").iterdir():
        shutil.copy(src, sources / src.name)
    shutil.copy(FIXTURES / "no-headings.md", sources / "no-headings.md")
    (sources / "empty.md").write_bytes(b"")
    (sources / "blob.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (sources / "latin1.md").write_bytes("# Titre\n\nprobl\xe8me\n".encode("latin-1"))
    (sources / "slides.pdf").write_bytes(b"%PDF-1.4\n")
    report = run_ingest(_settings(), sources_dir=sources, out_dir=tmp_path / "out")
    reasons = {s.file: s.reason for s in report.skipped}
    assert set(reasons) == {"no-headings.md", "empty.md", "blob.md", "latin1.md", "slides.pdf"}
    assert "empty file" in reasons["empty.md"]
    assert "binary" in reasons["blob.md"]
    assert "not valid UTF-8" in reasons["latin1.md"] and "0xe8" in reasons["latin1.md"]
    assert "no Markdown headings" in reasons["no-headings.md"]
    assert "unsupported file type '.pdf'" in reasons["slides.pdf"]
    assert all(reason.startswith(name) for name, reason in reasons.items())
    assert report.counts("record")["added"] == 15
    assert len(list((tmp_path / "out" / "modes").glob("*.json"))) == 15


def test_user_runbook_adds_to_records_and_passages(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    for src in (KB_DIR / "sources").iterdir():
        shutil.copy(src, sources / src.name)
    shutil.copy(FIXTURES / "sample-runbook.md", sources / "sample-runbook.md")
    outputs, sources_read, skipped, warnings = build_outputs(_settings(), sources)
    assert skipped == []
    assert "passages/sample-runbook-background.json" in outputs
    assert "passages/sample-runbook-not-a-mode.json" in outputs
    assert any("not-a-mode" in w for w in warnings)
    assert any("addresses unknown cause not-a-cause" in w for w in warnings)
    assert "sample-runbook.md" in outputs["modes/cpu-oom.json"]
    by_file = {s.file: s for s in sources_read}
    assert by_file["sample-runbook.md"].records == ["cpu-oom", "disk-full"]


def test_plain_text_without_overlay_is_skipped(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "notes.txt").write_text("1. Something\n\ntext\n", encoding="utf-8")
    shutil.copy(KB_DIR / "sources" / "team-runbook.md", sources / "team-runbook.md")
    report = run_ingest(_settings(), sources_dir=sources, out_dir=tmp_path / "out")
    assert [s.file for s in report.skipped] == ["notes.txt"]
    assert "no mapping in kb/overlay.yaml" in report.skipped[0].reason
    assert report.counts("record")["added"] == 15
    # Without the guide, nan-loss holds only the runbook's additions: no guide citations, no table causes.
    nan = json.loads((tmp_path / "out" / "modes" / "nan-loss.json").read_text(encoding="utf-8"))
    assert [c["id"] for c in nan.get("causes", [])] == ["no-label-tokens", "log-of-softmax"]
    assert {c["source_kind"] for c in nan["citations"]} == {"runbook"}


def test_report_counts_per_source(tmp_path):
    out = tmp_path / "records"
    first = run_ingest(_settings(), out_dir=out)
    guide = next(s for s in first.sources if s.kind == "guide")
    assert guide.counts()["added"] == len(guide.records) + len(guide.passages) == 10
    (out / "modes" / "cuda-oom.json").write_text("{}\n", encoding="utf-8")
    second = run_ingest(_settings(), out_dir=out)
    by_file = {s.file: s.counts() for s in second.sources}
    assert by_file["000_416041118514696b.txt"]["changed"] == 1
    assert by_file["team-runbook.md"]["changed"] == 1  # cuda-oom draws on both sources
    assert second.counts("record") == {"added": 0, "changed": 1, "removed": 0, "unchanged": 14}


def test_guide_that_no_longer_fits_the_overlay_is_skipped_not_fatal(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    guide = (KB_DIR / "sources" / "000_416041118514696b.txt").read_text(encoding="utf-8")
    (sources / "000_416041118514696b.txt").write_text(guide.replace("学习率过高\t高", "学习率太高\t高"), encoding="utf-8")
    shutil.copy(KB_DIR / "sources" / "team-runbook.md", sources / "team-runbook.md")
    report = run_ingest(_settings(), sources_dir=sources, out_dir=tmp_path / "out")
    assert [s.file for s in report.skipped] == ["000_416041118514696b.txt"]
    assert "no cause id for '学习率太高'" in report.skipped[0].reason
    assert report.counts("record")["added"] == 15
    assert [s.file for s in report.sources] == ["team-runbook.md"]


def test_odd_markdown_never_breaks_ingest(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    shutil.copy(KB_DIR / "sources" / "team-runbook.md", sources / "team-runbook.md")
    oddities = {
        "crlf.md": "## Host {#cpu-oom}\r\n\r\n### Causes\r\n- `host-memory-leak` (low): leak\r\n",
        "hash-only.md": "#\n\n##\n",
        "bad-cause.md": "## X {#disk-full}\n### Causes\n- no id here\n- `` empty\n### Symptoms\n```\n```\n",
        "deep.md": "###### {#nan-loss}\n#### Fixes\n1)\n",
        "tabs.md": "# T\n\t- item\n\t```python\n\tx = 1\n\t```\n",
    }
    for name, text in oddities.items():
        (sources / name).write_text(text, encoding="utf-8")
    report = run_ingest(_settings(), sources_dir=sources, out_dir=tmp_path / "out")
    assert report.counts("record")["added"] == 15
    assert {s.file for s in report.sources} >= {"crlf.md", "team-runbook.md"}
    crlf = next(s for s in report.sources if s.file == "crlf.md")
    assert crlf.records == ["cpu-oom"]
    assert any("cause item has no `cause-id`" in w for w in report.warnings)


def test_runbook_passage_ids_never_repeat_the_file_stem():
    from ingest.assemble import assemble
    from ingest.markdown import parse_runbook
    from ingest.overlay import load_overlay

    text = ("# Team notes: on-call\n\nWho writes this.\n\n## Team notes on tooling\n\nMore.\n\n"
            "## Background\n\nWhy.\n\n## Empty\n\n## Overview\n\nA section that happens to be called that.\n")
    result = assemble({}, {}, [parse_runbook("team-notes.md", text)], load_overlay(KB_DIR / "overlay.yaml"))
    assert list(result.passages) == ["team-notes-overview", "team-notes-on-tooling", "team-notes-background",
                                     "team-notes-overview-15"]
    assert result.passages["team-notes-overview"].citation.section == "team-notes-on-call"
    # A runbook that opens with a level-2 heading has no title section.
    other = assemble({}, {}, [parse_runbook("x.md", "## Notes\n\ntext\n")], load_overlay(KB_DIR / "overlay.yaml"))
    assert list(other.passages) == ["x-notes"]
    committed = {s.file: s.passages for s in run_ingest(_settings(), check=True).sources}
    assert committed["team-runbook.md"] == ["team-runbook-overview", "team-runbook-how-this-file-is-read"]


def test_unchanged_inputs_are_not_parsed_again(tmp_path, monkeypatch):
    """A re-ingest with no source, translation, overlay or ingest code changed only hashes them; any change parses."""
    from ingest import pipeline

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sources, out = tmp_path / "sources", tmp_path / "records"
    shutil.copytree(KB_DIR / "sources", sources)
    first = run_ingest(_settings(), sources_dir=sources, out_dir=out)
    parsed: list[Path] = []
    real = pipeline._build_outputs

    def counting(settings, sources_dir, progress):
        parsed.append(sources_dir)
        return real(settings, sources_dir, progress)

    monkeypatch.setattr(pipeline, "_build_outputs", counting)
    again = run_ingest(_settings(), sources_dir=sources, out_dir=out)
    assert parsed == [] and again.up_to_date
    assert [s.model_copy(update={"statuses": {}}) for s in again.sources] == \
        [s.model_copy(update={"statuses": {}}) for s in first.sources]
    runbook = sources / "team-runbook.md"
    runbook.write_text(runbook.read_text(encoding="utf-8") + "\n## A new section\n\nCheck the disk first.\n",
                       encoding="utf-8")
    changed = run_ingest(_settings(), sources_dir=sources, out_dir=out, check=True)
    assert parsed == [sources] and not changed.up_to_date
