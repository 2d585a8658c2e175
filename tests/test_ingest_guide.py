"""The guide parser against the real guide: sections, sub-headings, tables, code blocks, truncation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ingest.guide import parse_guide

KB = Path(__file__).resolve().parent.parent / "kb"
GUIDE_NAME = "000_416041118514696b.txt"


@pytest.fixture(scope="module")
def guide():
    return parse_guide(GUIDE_NAME, (KB / "sources" / GUIDE_NAME).read_text(encoding="utf-8"))


def test_sections_are_numbered_in_order(guide):
    assert [s.number for s in guide.sections] == [str(n) for n in range(1, 9)]
    assert guide.section("2").heading == "NaN Loss"
    assert guide.section("4").line == 124
    assert guide.front_matter.end == 10 and guide.front_matter.blocks[0].lines == ("2026年4月19日",)


def test_sub_headings(guide):
    heads = {s.number: [sub.heading for sub in s.subsections] for s in guide.sections}
    assert heads["2"] == ["症状", "根因分析", "排障步骤", "修复方案"]
    assert heads["4"] == ["症状", "根因分析", "修复方案（按优先级）"]
    assert heads["6"] == ["诊断", "优化手段"]
    assert heads["8"] == ["训练启动前：", "训练过程中监控："]
    assert heads["1"] == [None]


def test_code_blocks_found_exactly(guide):
    spans = [(b.start, b.end) for b in guide.blocks() if b.kind == "code"]
    assert spans == [(54, 63), (65, 70), (105, 106), (108, 114), (116, 122), (149, 153), (172, 174),
                     (176, 181), (187, 188), (190, 200), (222, 227), (229, 234), (236, 237)]


def test_code_blocks_byte_for_byte_and_python_parses(guide):
    raw = (KB / "sources" / GUIDE_NAME).read_text(encoding="utf-8").split("\n")
    for block in (b for b in guide.blocks() if b.kind == "code"):
        assert block.text == "\n".join(raw[block.start - 1 : block.end])
        if block.language == "python":
            ast.parse(block.text)
    languages = {b.start: b.language for b in guide.blocks() if b.kind == "code"}
    assert languages[187] == "shell" and languages[190] == "python"


def test_error_lines_are_prose_not_code(guide):
    prose = {b.lines[0] for b in guide.blocks() if b.kind == "prose"}
    assert "torch.cuda.OutOfMemoryError: CUDA out of memory." in prose
    assert "清理碎片：torch.cuda.empty_cache()" in prose


def test_tables(guide):
    tables = [b for b in guide.blocks() if b.kind == "table"]
    assert [(t.start, t.end) for t in tables] == [(45, 50), (89, 93), (133, 137), (204, 210)]
    nan = tables[0]
    assert nan.header == ("原因", "概率", "检测方法")
    assert [r[1][1] for r in nan.rows] == ["高", "高", "中", "中", "低"]
    assert nan.rows[3] == (49, ("梯度爆炸", "中", "监控梯度范数"))


def test_tree_and_truncation(guide):
    tree = guide.section("1").subsections[0].blocks
    assert [(b.kind, b.start, b.end) for b in tree] == [("tree", 13, 33)]
    assert guide.section("8").truncated and not guide.section("7").truncated


def test_synthetic_guide_with_inline_code_and_no_truncation():
    text = "Title\n\n1. First\n\n症状\n\nplain prose line\nx = compute(1)\nprint(x)\nmore prose\n\n2. Second\n\n修复方案\n\nDone.\n"
    g = parse_guide("t.txt", text)
    kinds = [(b.kind, b.start, b.end) for b in g.blocks()]
    assert ("code", 8, 9) in kinds and ("prose", 7, 7) in kinds and ("prose", 10, 10) in kinds
    assert not g.sections[-1].truncated
