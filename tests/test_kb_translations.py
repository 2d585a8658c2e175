"""The team's English for the guide: every Chinese unit translated, no stale keys, English never quoted."""

from __future__ import annotations

from assistant.config import KB_DIR
from ingest.guide import parse_guide
from ingest.translations import Translations, has_cjk, translatable_units, translations_path
from kb.store import load_records

GUIDE = "000_416041118514696b.txt"


def _guide():
    return parse_guide(GUIDE, (KB_DIR / "sources" / GUIDE).read_text(encoding="utf-8"))


def test_every_unit_translated_and_no_stale_keys():
    guide = _guide()
    tr = Translations.load(translations_path(KB_DIR, GUIDE))
    assert len(translatable_units(guide)) > 100
    assert tr.missing(guide) == []
    assert tr.stale(guide) == []


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
