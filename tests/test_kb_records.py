"""Integrity of the committed knowledge base (kb/records): coverage, citations, causes, source kinds."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from assistant.config import KB_DIR
from ingest.guide import parse_guide
from kb.schema import Citation, CodeSnippet
from kb.store import load_passages, load_records
from kb.taxonomy import MODE_IDS

GUIDE = "000_416041118514696b.txt"
RUNBOOK = "team-runbook.md"
# The cause ids per mode: a contract with kb/tree.yaml (the decision tree ranks exactly these; see test_tree.py).
EXPECTED_CAUSES = {
    "nan-loss": ["lr-too-high", "fp16-overflow", "nan-inf-in-data", "gradient-explosion", "embedding-index-out-of-range",
                 "no-label-tokens", "log-of-softmax"],
    "loss-spike": ["bad-data-batch", "lr-schedule", "grad-accum-sync", "data-distribution-shift"],
    "cuda-oom": ["model-or-batch-too-large", "variable-seq-len-or-leak", "long-samples", "kv-cache-growth",
                 "memory-fragmentation", "step-tensors-kept-alive"],
    "gradient-explosion": ["no-grad-clipping", "lr-too-high", "missing-warmup", "bad-data-batch"],
    "cpu-oom": ["dataloader-workers-memory", "dataset-in-memory", "full-checkpoint-load-per-rank",
                "full-state-dict-on-every-rank", "shuffle-buffer-per-worker", "host-memory-leak", "container-memory-limit",
                "shm-too-small"],
    "disk-full": ["checkpoints-accumulate", "cache-dir-full", "tmp-or-log-growth"],
    "token-out-of-range": ["vocab-mismatch-added-tokens", "wrong-tokenizer-for-data", "invalid-special-token-id"],
    "data-format-error": ["malformed-json", "schema-mismatch", "bad-encoding", "wrong-label-masking",
                          "no-padding-in-collation", "missing-pad-token", "labels-not-padded"],
    "data-imbalance": ["skewed-source-mix", "unshuffled-shards", "length-skew-across-ranks", "classifier-class-imbalance",
                       "reward-pair-skew"],
    "distributed-sync-failure": ["unused-parameters", "divergent-control-flow", "rank-local-skip",
                                 "inconsistent-initial-weights", "rank-crashed"],
    "checkpoint-corruption": ["incomplete-write", "format-or-loader-mismatch", "nan-weights-saved",
                              "resume-state-mismatch"],
    "network-timeout": ["rank-never-joined", "collective-timeout-too-short", "network-misconfigured", "network-hardware-fault",
                        "hub-unreachable", "remote-data-read-timeout"],
    "slow-training": ["no-fused-attention", "fp32-precision", "dataloader-bottleneck", "no-packing", "cpu-preprocessing",
                      "per-step-cost-growth", "straggler-gpu"],
    "low-gpu-utilization": ["dataloader-bottleneck", "batch-too-small", "host-sync-points", "cpu-preprocessing", "straggler-gpu"],
    "communication-bottleneck": ["slow-interconnect", "ib-unavailable", "allreduce-every-step", "poor-bucket-overlap",
                                 "cross-node-topology"],
}
GUIDE_CAUSE_MODES = {"nan-loss", "loss-spike", "cuda-oom"}
RUNBOOK_ADDED = {"memory-fragmentation", "step-tensors-kept-alive", "no-label-tokens", "log-of-softmax"}  # runbook causes in guide-table modes


@pytest.fixture(scope="module")
def records():
    return {r.id: r for r in load_records(KB_DIR / "records")}


@pytest.fixture(scope="module")
def passages():
    return {p.id: p for p in load_passages(KB_DIR / "records")}


def _citations(model) -> list[Citation]:
    """Every Citation anywhere inside a record or passage."""
    out: list[Citation] = []
    if isinstance(model, Citation):
        return [model]
    if isinstance(model, BaseModel):
        for name in type(model).model_fields:
            out.extend(_citations(getattr(model, name)))
    elif isinstance(model, (list, tuple)):
        for item in model:
            out.extend(_citations(item))
    elif isinstance(model, dict):
        for item in model.values():
            out.extend(_citations(item))
    return out


def _source_lines(name: str) -> list[str]:
    return (KB_DIR / "sources" / name).read_text(encoding="utf-8").split("\n")


def test_every_mode_has_a_complete_record(records):
    assert sorted(records) == sorted(MODE_IDS)
    for mode_id, r in records.items():
        assert r.failure_mode == mode_id
        assert len(r.symptoms) >= 1 and len(r.causes) >= 2 and len(r.fixes) >= 1, mode_id
        assert [f.priority for f in r.fixes] == list(range(1, len(r.fixes) + 1))
        assert r.title.zh and r.title.en and r.keywords.en and r.keywords.zh


def test_cause_ids_match_the_binding_list(records):
    for mode_id, expected in EXPECTED_CAUSES.items():
        assert [c.id for c in records[mode_id].causes] == expected, mode_id


def test_guide_table_causes_cite_the_guide_and_runbook_causes_the_runbook(records):
    for mode_id, r in records.items():
        for cause in r.causes:
            expected = "guide" if mode_id in GUIDE_CAUSE_MODES and cause.id not in RUNBOOK_ADDED else "runbook"
            assert cause.citation.source_kind == expected, (mode_id, cause.id)


def test_nan_table_is_structured(records):
    causes = [c for c in records["nan-loss"].causes if c.citation.source_kind == "guide"]
    assert [c.likelihood for c in causes] == ["high", "high", "medium", "medium", "low"]
    assert causes[3].detection.zh == "监控梯度范数" and causes[3].citation.start_line == 49
    table = records["nan-loss"].tables[0]
    assert table.header == ["原因", "概率", "检测方法"] and len(table.rows) == 5


def test_every_citation_quote_is_inside_its_line_range(records, passages):
    cache: dict[str, list[str]] = {}
    checked = 0
    for item in list(records.values()) + list(passages.values()):
        for c in _citations(item):
            lines = cache.setdefault(c.source, _source_lines(c.source))
            assert c.end_line <= len(lines), c
            assert c.quote and c.quote in "\n".join(lines[c.start_line - 1 : c.end_line]), (item.id, c.label())
            checked += 1
    assert checked > 300


def test_source_kinds_follow_the_file(records, passages):
    for item in list(records.values()) + list(passages.values()):
        for c in _citations(item):
            assert c.source_kind == ("guide" if c.source == GUIDE else "runbook"), (item.id, c.label())


def test_every_non_blank_guide_line_is_owned_exactly_once(records, passages):
    lines = _source_lines(GUIDE)
    owners: dict[int, list[str]] = {}
    for item in list(records.values()) + list(passages.values()):
        for span in item.owns:
            if span.source == GUIDE:
                for no in range(span.start_line, span.end_line + 1):
                    owners.setdefault(no, []).append(item.id)
    for no, line in enumerate(lines, start=1):
        if line.strip():
            assert len(owners.get(no, [])) == 1, (no, line, owners.get(no))


def test_required_guide_mapping(records, passages):
    def owned(item):
        return [(s.start_line, s.end_line) for s in item.owns if s.source == GUIDE]

    assert owned(passages["guide-front-matter"]) == [(1, 9)]
    assert owned(passages["taxonomy-overview"]) == [(11, 33)]
    assert owned(records["checkpoint-corruption"]) == [(212, 218)]
    assert owned(passages["checkpoint-best-practices"]) == [(220, 237)]
    assert passages["pre-launch-checklist"].truncated and owned(passages["pre-launch-checklist"]) == [(239, 250)]
    net = records["network-timeout"]
    assert not owned(net)
    assert any(c.source == GUIDE and c.start_line == 161 for c in _citations(net.symptoms))
    assert any(f.code and f.code.citation.start_line == 176 for f in net.fixes)
    low = records["low-gpu-utilization"]
    assert any(s.code and s.code.citation.start_line == 187 for s in low.diagnosis)


def test_every_guide_code_block_is_in_the_kb_byte_for_byte(records, passages):
    guide = parse_guide(GUIDE, (KB_DIR / "sources" / GUIDE).read_text(encoding="utf-8"))
    snippets = [s for item in list(records.values()) + list(passages.values())
                for s in _walk(item, CodeSnippet) if s.citation.source == GUIDE]
    found = {(s.citation.start_line, s.citation.end_line): s for s in snippets}
    for block in (b for b in guide.blocks() if b.kind == "code"):
        snippet = found[(block.start, block.end)]
        assert snippet.code == block.text and snippet.language == block.language


def test_every_guide_table_row_is_a_structured_row(records, passages):
    guide = parse_guide(GUIDE, (KB_DIR / "sources" / GUIDE).read_text(encoding="utf-8"))
    rows = {}
    for item in list(records.values()) + list(passages.values()):
        for table in item.tables:
            for row in table.rows:
                rows[row.citation.start_line] = row
    for block in (b for b in guide.blocks() if b.kind == "table"):
        for line, cells in block.rows:
            assert [rows[line].cells[h] for h in block.header] == list(cells)
            assert rows[line].en and all(rows[line].en.values())


def _walk(model, cls):
    if isinstance(model, cls):
        yield model
    if isinstance(model, BaseModel):
        for name in type(model).model_fields:
            yield from _walk(getattr(model, name), cls)
    elif isinstance(model, (list, tuple)):
        for item in model:
            yield from _walk(item, cls)


def test_runbook_says_it_is_the_teams():
    head = "\n".join(_source_lines(RUNBOOK)[:8])
    assert "team" in head.lower() and "NOT part of the\ncustomer's guide" in head


def test_keywords_carry_pasted_error_strings(records):
    expected = {
        "cuda-oom": ["OutOfMemoryError", "CUDA out of memory"],
        "distributed-sync-failure": ["find_unused_parameters", "NCCL"],
        "network-timeout": ["Watchdog caught collective operation timeout"],
        "disk-full": ["No space left on device"],
        "token-out-of-range": ["index out of range in self"],
        "data-format-error": ["JSONDecodeError"],
        "cpu-oom": ["DataLoader worker (pid"],
        "checkpoint-corruption": ["PytorchStreamReader failed", "SafetensorError"],
    }
    for mode_id, needles in expected.items():
        for needle in needles:
            assert needle in records[mode_id].keywords.en, (mode_id, needle)


def test_fix_addresses_name_causes_of_the_same_record_and_cover_every_cause(records):
    for mode_id, r in records.items():
        causes = {c.id for c in r.causes}
        for fix in r.fixes:
            assert set(fix.addresses) <= causes, (mode_id, fix.priority, fix.addresses)
        addressed = {a for fix in r.fixes for a in fix.addresses}
        assert causes == addressed, (mode_id, sorted(causes - addressed))
