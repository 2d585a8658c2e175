"""The taxonomy is a fixed contract: 15 ids in 5 categories, matching the guide's tree."""

from __future__ import annotations

import typing

import pytest

from kb import taxonomy


def test_fifteen_modes_in_five_categories():
    modes = taxonomy.modes()
    assert [m.id for m in modes] == list(taxonomy.MODE_IDS)
    assert len(modes) == 15
    assert {m.category for m in modes} == set(taxonomy.categories())
    assert len(taxonomy.categories()) == 5
    for cat in taxonomy.categories():
        assert sum(m.category == cat for m in modes) == 3


def test_literal_type_matches_yaml():
    assert set(typing.get_args(taxonomy.FailureMode)) == set(taxonomy.MODE_IDS)


def test_zh_names_are_the_guides_tree_labels():
    guide = (taxonomy._FILE.parent / "sources" / "000_416041118514696b.txt").read_text(encoding="utf-8")
    tree_lines = {line.split("── ", 1)[1].strip() for line in guide.splitlines() if "── " in line}
    for m in taxonomy.modes():
        assert m.zh in tree_lines, m
    for cat in taxonomy.categories().values():
        assert cat["zh"] in tree_lines


def test_unknown_mode_raises_key_error():
    with pytest.raises(KeyError):
        taxonomy.mode("not-a-mode")
