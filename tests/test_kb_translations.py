"""The team's translations: the guide's English and the runbook's Chinese cover every unit, have no stale
keys, keep code verbatim, land in the records as the other language, and are never quoted as the source."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from assistant.config import KB_DIR
from ingest.assemble import assemble
from ingest.guide import parse_guide
from ingest.markdown import parse_runbook
from ingest.overlay import load_overlay
from ingest.translations import (
    Translations,
    has_cjk,
    needs_translation,
    runbook_units,
    text_language,
    translatable_units,
    translations_path,
)
from kb.store import load_passages, load_records

GUIDE = "000_416041118514696b.txt"
RUNBOOK = "team-runbook.md"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ingest"


def _guide():
    return parse_guide(GUIDE, (KB_DIR / "sources" / GUIDE).read_text(encoding="utf-8"))


def _runbook():
    return parse_runbook(RUNBOOK, (KB_DIR / "sources" / RUNBOOK).read_text(encoding="utf-8"))


def _code_spans(text: str) -> Counter:
    return Counter(text.split("`")[1::2])


def test_every_unit_translated_and_no_stale_keys():
    guide = _guide()
    tr = Translations.load(translations_path(KB_DIR, GUIDE))
    assert len(translatable_units(guide)) > 100
    assert tr.missing(guide) == []
    assert tr.stale(guide) == []


def test_every_runbook_unit_has_chinese_and_no_stale_keys():
    rb = _runbook()
    path = translations_path(KB_DIR, RUNBOOK, "zh")
    assert path.name == "team-runbook.zh.yaml"
    tr = Translations.load(path)
    assert tr.target == "zh"
    assert len(translatable_units(rb, "zh")) > 150
    assert tr.missing(rb) == []
    assert tr.stale(rb) == []
    # The runbook is English: nothing in it needs an English translation.
    assert translatable_units(rb, "en") == []


def test_runbook_translations_are_chinese_and_keep_code_verbatim():
    tr = Translations.load(translations_path(KB_DIR, RUNBOOK, "zh"))
    for en, zh in tr.mapping.items():
        assert text_language(zh) == "zh", en
        # Identifiers, flags and error strings in `code` spans are never translated or dropped.
        assert _code_spans(zh) == _code_spans(en), en


def test_missing_and_stale_runbook_keys_are_reported_and_warned():
    rb = _runbook()
    full = Translations.load(translations_path(KB_DIR, RUNBOOK, "zh"))
    dropped = "Enable gradient clipping at 1.0."
    mapping = {k: v for k, v in full.mapping.items() if k != dropped}
    mapping["Enable gradient clipping at 0.5."] = "启用梯度裁剪，阈值设为 0.5。"
    tr = Translations(full.path, mapping, "zh")
    assert [u for u, _ in tr.missing(rb)] == [dropped]
    assert tr.stale(rb) == ["Enable gradient clipping at 0.5."]
    result = assemble({}, {}, [rb], load_overlay(KB_DIR / "overlay.yaml"), {RUNBOOK: {"zh": tr}})
    assert any("team-runbook.zh.yaml: no Chinese translation for 'Enable gradient clipping at 1.0.'" in w
               for w in result.warnings)
    fix = next(f for f in result.records["gradient-explosion"].fixes if f.text and f.text.en == dropped)
    assert fix.text.zh is None and fix.text.get("zh") == dropped  # falls back to the English


def test_records_carry_english_and_quotes_stay_chinese():
    checked = 0
    for record in load_records(KB_DIR / "records"):
        items = record.symptoms + record.causes + record.diagnosis + record.fixes
        for item in items:
            if item.citation.source != GUIDE or item.text is None:
                continue
            assert item.text.zh and item.text.en, item.citation.label()
            if has_cjk(item.text.zh):
                # The quote is the guide's Chinese; the team's English is never presented as the quote.
                assert item.text.en not in item.citation.quote, item.citation.label()
                checked += 1
    assert checked > 40


def test_runbook_records_carry_chinese_and_quotes_stay_english():
    translated = 0
    per_part: Counter = Counter()
    for record in load_records(KB_DIR / "records"):
        parts = {"symptoms": record.symptoms, "causes": record.causes, "diagnosis": record.diagnosis,
                 "fixes": record.fixes}
        for part, items in parts.items():
            for item in items:
                if item.citation.source != RUNBOOK or item.text is None:
                    continue
                texts = [item.text] + ([item.detection] if part == "causes" and item.detection else [])
                for text in texts:
                    assert text.zh and text.en, item.citation.label()
                    if needs_translation(text.en, "zh"):
                        assert has_cjk(text.zh) and text.zh != text.en, item.citation.label()
                        # The quote is the runbook's English; the team's Chinese is never the quote.
                        assert text.zh not in item.citation.quote, item.citation.label()
                        translated += 1
                per_part[part] += 1
    assert translated > 150
    assert min(per_part.values()) > 15 and set(per_part) == {"symptoms", "causes", "diagnosis", "fixes"}


@pytest.mark.parametrize("mode", ["cpu-oom", "disk-full", "gradient-explosion", "network-timeout",
                                  "communication-bottleneck", "token-out-of-range"])
def test_runbook_filled_record_reads_in_chinese(mode):
    record = next(r for r in load_records(KB_DIR / "records") if r.id == mode)
    for item in record.symptoms + record.causes + [f for f in record.fixes if f.text]:
        assert item.text.zh and item.text.en
    assert all(has_cjk(c.text.get("zh")) for c in record.causes)
    assert all(has_cjk(c.detection.get("zh")) for c in record.causes if c.detection
               and needs_translation(c.detection.get("en"), "zh"))


def test_runbook_passages_have_chinese_title_and_text():
    passages = {p.id: p for p in load_passages(KB_DIR / "records") if p.citation.source == RUNBOOK}
    assert set(passages) == {"team-runbook-overview", "team-runbook-how-this-file-is-read"}
    for p in passages.values():
        assert p.title.en and has_cjk(p.title.zh or "")
        assert p.text_zh and has_cjk(p.text_zh) and p.text_en is None
        assert p.body("zh") == p.text_zh and p.body("en") == p.text
        assert p.text_zh.startswith("#") and p.text_zh not in p.text
    assert "`{#failure-mode-id}`" in passages["team-runbook-how-this-file-is-read"].text_zh


def test_language_of_a_unit():
    assert text_language("保留了所有 checkpoint") == "zh"
    assert text_language("设置 save_total_limit") == "zh"
    assert text_language("Loss 尖峰（Spike）") == "zh"
    # An English sentence that names Chinese headings is still English.
    assert text_language("Sub-headings `Symptoms` or 症状 hold one list item per symptom, cause, step or fix.") == "en"
    assert text_language("`OSError: [Errno 28] No space left on device`") == "en"
    assert needs_translation("Move caches to a large volume.", "zh")
    assert not needs_translation("`du -sh ~/.cache/huggingface/*`.", "zh")  # only code: it is its own Chinese
    assert not needs_translation("把缓存目录迁到大容量的磁盘上。", "zh")
    assert needs_translation("保留了所有 checkpoint", "en") and not needs_translation("Move caches.", "en")


def test_chinese_units_of_a_runbook_take_english_from_an_en_file():
    rb = parse_runbook("sample-runbook.md", (FIXTURES / "sample-runbook.md").read_text(encoding="utf-8"))
    overlay = load_overlay(KB_DIR / "overlay.yaml")
    assert ("保留了所有 checkpoint", 40) in runbook_units(rb)
    plain = assemble({}, {}, [rb], overlay)
    cause = plain.records["disk-full"].causes[0]
    assert (cause.text.zh, cause.text.en) == ("保留了所有 checkpoint", None)
    assert not any("translation" in w for w in plain.warnings)  # no file: single-language, no noise
    en = Translations(Path("sample-runbook.en.yaml"), {"保留了所有 checkpoint": "Every checkpoint is kept"}, "en")
    result = assemble({}, {}, [rb], overlay, {"sample-runbook.md": {"en": en}})
    cause = result.records["disk-full"].causes[0]
    assert (cause.text.zh, cause.text.en) == ("保留了所有 checkpoint", "Every checkpoint is kept")
    assert cause.citation.quote == "`checkpoints-accumulate` (高): 保留了所有 checkpoint"
    assert any("sample-runbook.en.yaml: no English translation for '设置 save_total_limit'" in w
               for w in result.warnings)


def test_translation_file_name_gives_its_language(tmp_path):
    from assistant.errors import KnowledgeBaseError

    bad = tmp_path / "notes.fr.yaml"
    bad.write_text("a: b\n", encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match="notes.fr.yaml"):
        Translations.load(bad)
    assert Translations.load(tmp_path / "missing.zh.yaml").mapping == {}
