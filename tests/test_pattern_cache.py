"""The compiled Hyperscan database is cached per pattern set; a damaged cache is rebuilt, never trusted."""

from __future__ import annotations

import pytest

from assistant.signatures import Entry, PatternSet

pytest.importorskip("hyperscan")

ENTRIES = [
    Entry(tag="a", pattern=r"CUDA out of memory"),
    Entry(tag="b", pattern=r"No space left on device"),
    Entry(tag="c", pattern=r"(?m)^\s*Killed$"),  # embedded anchor: Hyperscan refuses it, RE2 handles it
]
TEXT = b"step 3\nRuntimeError: CUDA out of memory.\n  Killed\n"


def test_cache_is_written_then_reused_with_identical_results(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = PatternSet(ENTRIES)
    files = list((tmp_path / "trainfix").glob("hyperscan-*.db"))
    assert len(files) == 1
    second = PatternSet(ENTRIES)
    assert first.hit_indexes(TEXT) == second.hit_indexes(TEXT) == [0, 2]
    assert first._re2_always == second._re2_always


def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    PatternSet(ENTRIES)
    (path,) = (tmp_path / "trainfix").glob("hyperscan-*.db")
    path.write_bytes(b"[0]\ngarbage that is not a hyperscan database")
    again = PatternSet(ENTRIES)
    assert again.hit_indexes(TEXT) == [0, 2]


def test_different_patterns_use_a_different_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    PatternSet(ENTRIES)
    PatternSet(ENTRIES[:2])
    assert len(list((tmp_path / "trainfix").glob("hyperscan-*.db"))) == 2


def test_a_given_digest_keys_the_same_cache_as_the_entries_themselves(tmp_path, monkeypatch):
    """The engine snapshot hands PatternSet the digest it kept; it must name the database the entries would."""
    import pickle

    from assistant.signatures import entries_digest

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    PatternSet(ENTRIES)
    again = PatternSet(pickle.loads(pickle.dumps(ENTRIES)), entries_digest(ENTRIES))
    assert len(list((tmp_path / "trainfix").glob("hyperscan-*.db"))) == 1
    assert again.entries == ENTRIES and again.hit_indexes(TEXT) == [0, 2]


def test_without_hyperscan_re2_alone_gives_the_same_triage(tmp_path):
    """Where Hyperscan is unavailable (e.g. ARM), RE2 alone must find exactly the same things."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    inputs = [root / "docs" / "examples" / "multirank.log", root / "docs" / "examples" / "leak.log",
              root / "tests" / "fixtures" / "web" / "trainer_nan.log"]
    code = (
        "import json, sys\n"
        "if sys.argv[1] == 're2': sys.modules['hyperscan'] = None  # import fails as on a machine without it\n"
        "from assistant.triage import engine_for, triage_file\n"
        "out = {'engine': engine_for().patterns.engine,\n"
        "       'results': [triage_file(p).model_dump(mode='json') for p in sys.argv[2:]]}\n"
        "print(json.dumps(out, sort_keys=True))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = {}
    for engine in ("hyperscan", "re2"):
        proc = subprocess.run([sys.executable, "-c", code, engine, *map(str, inputs)], capture_output=True, text=True,
                              cwd=root, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[engine] = json.loads(proc.stdout)
    assert runs["hyperscan"]["engine"] == "hyperscan+re2" and runs["re2"]["engine"] == "re2"
    assert runs["hyperscan"]["results"] == runs["re2"]["results"]


def test_databases_of_earlier_pattern_sets_are_pruned(tmp_path, monkeypatch):
    from assistant import snapshot

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for i in range(snapshot.KEEP + 3):
        PatternSet([Entry(tag="a", pattern=f"pattern number {i}")])
    assert len(list((tmp_path / "trainfix").glob("hyperscan-*.db"))) == snapshot.KEEP
    latest = PatternSet([Entry(tag="a", pattern=f"pattern number {snapshot.KEEP + 2}")])  # still cached: loaded
    assert latest.hit_indexes(f"x pattern number {snapshot.KEEP + 2}".encode()) == [0]
