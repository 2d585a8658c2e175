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
