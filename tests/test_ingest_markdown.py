"""The Markdown runbook parser and its convention ({#mode} headings, parts, cause ids, attached code)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.errors import InputError
from ingest.markdown import parse_runbook

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ingest"


@pytest.fixture(scope="module")
def runbook():
    return parse_runbook("sample-runbook.md", (FIXTURES / "sample-runbook.md").read_text(encoding="utf-8"))


def test_mode_sections_and_parts(runbook):
    modes = {s.mode: s for s in runbook.sections if s.mode}
    assert set(modes) == {"cpu-oom", "disk-full"}
    assert [p.kind for p in modes["cpu-oom"].parts] == ["symptoms", "causes", "diagnosis", "fixes"]
    assert [p.kind for p in modes["disk-full"].parts] == ["symptoms", "causes", "fixes"]


def test_items_causes_and_code(runbook):
    cpu = next(s for s in runbook.sections if s.mode == "cpu-oom")
    parts = {p.kind: p for p in cpu.parts}
    symptoms = parts["symptoms"].items
    assert symptoms[1].text == "The job exits with code 137 after a few hundred steps."
    assert (symptoms[1].start, symptoms[1].end) == (9, 10)
    first, second = parts["causes"].items
    assert first.cause() == ("dataloader-workers-memory", "high", "workers copy the dataset.")
    assert first.detection == "RSS per worker is close to the dataset size."
    assert second.cause() == ("host-memory-leak", None, "metrics kept as tensors.")
    fix = parts["fixes"].items[0]
    assert fix.code[0].language == "python" and fix.code[0].code == "loader = DataLoader(ds, num_workers=2)"
    assert fix.text == "Fewer workers." and fix.addresses == ["dataloader-workers-memory", "not-a-cause"]
    assert parts["diagnosis"].items[0].code[0].language == "shell"
    disk = next(s for s in runbook.sections if s.mode == "disk-full")
    assert disk.parts[1].items[0].cause() == ("checkpoints-accumulate", "high", "保留了所有 checkpoint")


def test_other_sections_become_passages_and_unknown_mode_warns(runbook):
    plain = {s.heading: s for s in runbook.sections if not s.mode}
    assert set(plain) == {"Sample user runbook", "Background", "Mystery"}
    assert plain["Background"].parent_mode == "cpu-oom"
    assert any("not-a-mode" in w for w in runbook.warnings)


def test_no_headings_is_rejected_with_file_name():
    with pytest.raises(InputError, match="no-headings.md: no Markdown headings"):
        parse_runbook("no-headings.md", (FIXTURES / "no-headings.md").read_text(encoding="utf-8"))


def test_indented_fence_inside_list_item_keeps_relative_indentation():
    text = "## X {#cpu-oom}\n\n### Fixes\n1. Do it:\n   ```python\n   def f():\n       return 1\n   ```\n2. Next\n"
    rb = parse_runbook("t.md", text)
    items = rb.sections[0].parts[0].items
    assert [i.text for i in items] == ["Do it:", "Next"]
    code = items[0].code[0]
    assert code.code == "def f():\n    return 1"
    assert code.raw == "   def f():\n       return 1" and (code.start, code.end) == (6, 7)


def test_unclosed_fence_warns_and_heading_inside_fence_is_not_a_heading():
    text = "## X {#disk-full}\n\n### Fixes\n- clean\n```bash\n# not a heading\ndf -h\n"
    rb = parse_runbook("t.md", text)
    assert [s.heading for s in rb.sections] == ["X"]
    assert rb.sections[0].parts[0].items[0].code[0].code == "# not a heading\ndf -h"
    assert any("never closed" in w for w in rb.warnings)


def test_team_runbook_python_snippets_parse():
    import ast

    kb = Path(__file__).resolve().parent.parent / "kb" / "sources" / "team-runbook.md"
    rb = parse_runbook(kb.name, kb.read_text(encoding="utf-8"))
    snippets = [c for s in rb.sections for p in s.parts for i in p.items for c in i.code]
    assert len(snippets) > 40 and not rb.warnings
    for c in snippets:
        assert c.code == c.raw  # fences are not indented in the team runbook
        if c.language == "python":
            ast.parse(c.code)


def _all_items(rb):
    for s in rb.sections:
        yield from s.intro
        for p in s.parts:
            yield from p.items


def test_property_any_markdown_parses_with_verbatim_quotes():
    """Arbitrary line soup either has no heading (InputError) or parses with every quote inside its lines."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ingest.assemble import assemble
    from ingest.overlay import load_overlay

    overlay = load_overlay(Path(__file__).resolve().parent.parent / "kb" / "overlay.yaml")

    pieces = st.sampled_from([
        "", "# T", "## M {#cpu-oom}", "### Causes", "### Fixes", "### Symptoms", "#### Other", "- item",
        "1. step", "  continued", "```python", "```", "~~~", "x = 1", "- `host-memory-leak` (low): leak",
        "  Check: rss", "\tTabbed", "## {#nope}", "* star", "plain words 中文",
    ])

    @settings(max_examples=200, deadline=None)
    @given(st.lists(pieces, max_size=30))
    def check(lines):
        text = "\n".join(lines)
        try:
            rb = parse_runbook("p.md", text)
        except InputError:
            return
        for item in _all_items(rb):
            assert item.quote in rb.span_text(item.start, item.end)
            for code in item.code:
                assert code.raw == rb.span_text(code.start, code.end)
        # Assembly never raises on a parsed runbook, and what it cites is really in the runbook.
        result = assemble({}, {}, [rb], overlay)
        for record in result.records.values():
            for cit in [c.citation for c in record.causes] + [f.citation for f in record.fixes] + record.citations:
                assert cit.source_kind == "runbook" and cit.quote in rb.span_text(cit.start_line, cit.end_line)

    check()
