"""The independent labelled evaluation sets are well-formed and cover what they claim.

Only the sets' shape is checked here (schema, ids, labels, language, coverage minimums, the generator and
README agree with the JSONL). Scoring trainfix against them is done elsewhere; nothing here reads rules.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from kb.taxonomy import MODE_IDS

DATA = Path(__file__).parent / "data"
GUIDE = Path(__file__).parent.parent / "kb" / "sources" / "000_416041118514696b.txt"
PASSAGE_IDS = frozenset({"taxonomy-overview", "checkpoint-best-practices", "pre-launch-checklist", "guide-front-matter"})
TRIAGE_KEYS = {"id", "text", "labels", "lang", "kind", "note"}
QUERY_KEYS = {"id", "text", "labels", "lang"}
KINDS = {"traceback", "log", "one-line", "question", "mixed"}


def _load(name: str) -> list[dict]:
    rows = []
    for n, line in enumerate((DATA / name).read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{name}:{n} is not valid JSON: {exc}") from exc
        assert isinstance(row, dict), f"{name}:{n} is not a JSON object"
        rows.append(row)
    return rows


TRIAGE = _load("triage_cases.jsonl")
QUERIES = _load("retrieval_queries.jsonl")


def _cjk(text: str) -> int:
    """Number of CJK ideographs and CJK punctuation characters in text."""
    return sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff" or "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef")


def _check_lang(row: dict) -> None:
    n = _cjk(row["text"])
    if row["lang"] == "zh":
        assert n >= 4, f"{row['id']}: lang zh but only {n} CJK characters"
    else:
        assert n == 0, f"{row['id']}: lang en but contains {n} CJK characters"


@pytest.mark.parametrize("row", TRIAGE, ids=[r.get("id", "?") for r in TRIAGE])
def test_triage_case_schema(row: dict):
    assert set(row) == TRIAGE_KEYS, row.get("id")
    assert isinstance(row["id"], str) and row["id"].strip() == row["id"] and row["id"]
    assert isinstance(row["text"], str) and row["text"].strip()
    assert isinstance(row["note"], str) and len(row["note"]) >= 10
    assert row["kind"] in KINDS
    assert row["lang"] in {"en", "zh"}
    assert isinstance(row["labels"], list)
    assert len(set(row["labels"])) == len(row["labels"]), "duplicate label"
    for label in row["labels"]:
        assert label in MODE_IDS, f"{row['id']}: unknown mode {label!r}"
    # Out-of-scope ids say so, in-scope ones do not.
    assert row["id"].startswith("oos-") == (not row["labels"]), row["id"]
    _check_lang(row)


@pytest.mark.parametrize("row", QUERIES, ids=[r.get("id", "?") for r in QUERIES])
def test_query_schema(row: dict):
    assert set(row) == QUERY_KEYS, row.get("id")
    assert isinstance(row["id"], str) and row["id"].startswith("q-")
    assert row["lang"] in {"en", "zh"}
    assert row["labels"], f"{row['id']}: a query needs at least one acceptable answer"
    assert len(set(row["labels"])) == len(row["labels"])
    for label in row["labels"]:
        assert label in MODE_IDS or label in PASSAGE_IDS, f"{row['id']}: unknown record/passage {label!r}"
    # Questions, not pastes.
    assert "\n" not in row["text"] and 3 <= len(row["text"]) <= 200, row["id"]
    _check_lang(row)


@pytest.mark.parametrize("rows", [TRIAGE, QUERIES], ids=["triage", "queries"])
def test_ids_are_unique(rows: list[dict]):
    dupes = [i for i, c in Counter(r["id"] for r in rows).items() if c > 1]
    assert not dupes


def test_no_duplicate_texts():
    for rows in (TRIAGE, QUERIES):
        dupes = [t for t, c in Counter(r["text"] for r in rows).items() if c > 1]
        assert not dupes


def test_triage_coverage_minimums():
    assert len(TRIAGE) >= 110
    primary = Counter(r["labels"][0] for r in TRIAGE if r["labels"])
    for mode in MODE_IDS:
        assert primary[mode] >= 5, f"{mode}: only {primary[mode]} cases with it as primary label"
    assert sum(r["lang"] == "zh" for r in TRIAGE) >= 30
    assert sum(not r["labels"] for r in TRIAGE) >= 20
    assert sum(len(r["labels"]) > 1 for r in TRIAGE) >= 10, "ambiguous cases with several labels"
    kinds = Counter(r["kind"] for r in TRIAGE)
    assert all(kinds[k] >= 5 for k in KINDS), kinds


def test_triage_has_real_terminal_artefacts():
    texts = [r["text"] for r in TRIAGE]
    assert sum("\x1b[" in t for t in texts) >= 3, "ANSI colour codes as real escape characters"
    assert sum("\r" in t for t in texts) >= 3, "tqdm carriage-return redraws"
    assert sum("\t" in t for t in texts) >= 2
    assert any("The above exception was the direct cause" in t or "During handling of the above exception" in t
               for t in texts), "a chained exception"
    interleaved = [t for t in texts if len({line.split("]", 1)[0] for line in t.splitlines()
                                            if line.startswith("[rank")}) >= 8]
    assert interleaved, "a log with eight ranks' [rankN]: prefixes"
    assert any("'grad_norm'" in t and "'loss': nan" in t for t in texts), "a Trainer dict log turning nan"


def test_query_coverage_minimums():
    assert len(QUERIES) >= 50
    langs = Counter(r["lang"] for r in QUERIES)
    assert langs["zh"] >= 20 and langs["en"] >= 20
    seen = Counter(label for r in QUERIES for label in r["labels"])
    for mode in MODE_IDS:
        assert seen[mode] >= 2, f"{mode}: only {seen[mode]} queries"
    for pid in PASSAGE_IDS:
        assert seen[pid] >= 1, f"{pid}: no query"


def test_queries_do_not_copy_guide_headings():
    lines = {line.strip().lower() for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.strip()}
    copied = [r["id"] for r in QUERIES if r["text"].strip().lower() in lines]
    assert not copied


def _generator():
    spec = importlib.util.spec_from_file_location("build_sets", DATA / "build_sets.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jsonl_is_what_the_generator_writes():
    gen = _generator()
    triage, queries = gen.build()
    assert (DATA / "triage_cases.jsonl").read_text(encoding="utf-8") == gen.render_jsonl(triage), \
        "triage_cases.jsonl is stale: run tests/data/build_sets.py"
    assert (DATA / "retrieval_queries.jsonl").read_text(encoding="utf-8") == gen.render_jsonl(queries), \
        "retrieval_queries.jsonl is stale: run tests/data/build_sets.py"


def test_readme_counts_table_is_current():
    gen = _generator()
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert gen.counts_table(TRIAGE, QUERIES) in readme, "README counts are stale: run tests/data/build_sets.py"
    # the README says honestly what these sets are since the real-world test split exists
    assert "are development data" in readme and "frozen" in readme
