"""Every signature rule's inline examples, one test per rule (``pytest -k <rule id>``), plus registry checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from assistant.errors import KnowledgeBaseError
from assistant.signatures import Entry, PatternSet, load_rules, rule_entries
from kb.taxonomy import MODE_IDS

RULES = load_rules()
IDS = [r.id for r in RULES]


def _modes_firing(text: str) -> set[str]:
    return {r.failure_mode for r in RULES if r.first_match(text)}


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_examples(rule):
    for text in rule.examples.match:
        assert rule.first_match(text), f"{rule.id} should match: {text!r}"
    for text in rule.examples.no_match:
        assert rule.first_match(text) is None, f"{rule.id} should not match: {text!r}"
    for text in rule.examples.todo:
        # Known gaps: once a rule learns to match one, move it to `match` (this fails loudly until then).
        assert rule.first_match(text) is None, f"{rule.id} now matches a todo example, move it to match: {text!r}"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_examples_do_not_fire_other_modes(rule):
    allowed = {rule.failure_mode, *rule.also_fires}
    for text in rule.examples.match:
        extra = _modes_firing(text) - allowed
        assert not extra, f"{rule.id} example {text!r} also fires {sorted(extra)}; declare also_fires or fix a rule"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_one_pass_scanner_agrees_with_rule(rule):
    """The Hyperscan prefilter + RE2 path finds what line-by-line RE2 finds."""
    ps = PatternSet([Entry(f"rule:{rule.id}", p, rule.case_sensitive) for p in rule.patterns])
    for text in rule.examples.match:
        assert list(ps.scan(text.encode())), f"one-pass scan missed {text!r}"


def test_every_mode_has_rules():
    assert {r.failure_mode for r in RULES} == set(MODE_IDS)


def test_every_rule_has_description_and_both_kinds_of_example():
    for r in RULES:
        assert r.description.strip()
        assert r.examples.match and r.examples.no_match


def test_rule_causes_belong_to_the_mode():
    from assistant.tree import load_tree

    causes = load_tree().cause_ids()
    for r in RULES:
        for cause in r.causes:
            assert cause in causes[r.failure_mode], f"{r.id}: cause {cause} is not a {r.failure_mode} cause"


def test_hyperscan_database_holds_every_pattern():
    ps = PatternSet(rule_entries(RULES))
    assert ps.engine == "hyperscan+re2"
    assert ps._re2_always == []  # every rule pattern compiles in Hyperscan too


def _write(tmp_path: Path, rule: dict) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "cuda-oom.yaml").write_text(yaml.safe_dump({"failure_mode": "cuda-oom", "rules": [rule]}), encoding="utf-8")
    return d


BASE = {
    "id": "cuda-oom.test-rule",
    "description": "test",
    "strength": "strong",
    "patterns": ["CUDA out of memory"],
    "examples": {"match": ["CUDA out of memory"], "no_match": ["fine"]},
}


def test_rule_without_no_match_example_does_not_load(tmp_path):
    bad = {**BASE, "examples": {"match": ["CUDA out of memory"], "no_match": []}}
    with pytest.raises(KnowledgeBaseError, match=r"cuda-oom\.yaml, line \d+: rule cuda-oom\.test-rule"):
        load_rules(_write(tmp_path, bad))


def test_rule_without_match_example_does_not_load(tmp_path):
    bad = {**BASE, "examples": {"no_match": ["x"]}}
    with pytest.raises(KnowledgeBaseError, match="cuda-oom.test-rule"):
        load_rules(_write(tmp_path, bad))


def test_rule_with_non_re2_pattern_does_not_load(tmp_path):
    bad = {**BASE, "patterns": [r"(?<=CUDA) out of memory"]}  # look-behind is not RE2
    with pytest.raises(KnowledgeBaseError, match="not valid RE2"):
        load_rules(_write(tmp_path, bad))


def test_rule_with_unknown_field_does_not_load(tmp_path):
    with pytest.raises(KnowledgeBaseError, match="cuda-oom.test-rule"):
        load_rules(_write(tmp_path, {**BASE, "severity": "high"}))


def test_valid_rule_loads(tmp_path):
    rules = load_rules(_write(tmp_path, BASE))
    assert [r.id for r in rules] == ["cuda-oom.test-rule"]


def test_no_quantifier_on_a_multibyte_character():
    """Hyperscan scans bytes: in ``各个?`` the ``?`` would apply to the last byte of 个 only, so the
    prefilter misses what RE2 matches. Wrap the character: ``各(?:个)?``."""
    import re

    bad = re.compile(r"[^\x00-\x7f][?*+{]")
    from assistant.outside import load_outside
    from assistant.tree import load_tree

    tree = load_tree()
    patterns = [p for r in RULES for p in [*r.patterns, *r.requires, *r.unless]]
    patterns += [p for r in load_outside() for p in [*r.patterns, *r.unless]]
    patterns += [p for f in tree.facts.values() for d in f.detect for p in [*d.patterns, *d.unless]]
    patterns += [p for m in tree.modes.values() for h in m.hints for p in [*h.patterns, *h.unless]]
    assert not [p for p in patterns if bad.search(p)]
