"""Case memory: past incidents vote by similarity, propose modes the rules miss, and show up as similar incidents."""

from __future__ import annotations

import json
import shutil

import pytest

from assistant.cases import CaseMemory, CaseRecord, load_cases, tokens
from assistant.errors import KnowledgeBaseError


def _case(i: str, text: str, labels: list[str], source: str | None = None) -> CaseRecord:
    return CaseRecord(id=i, text=text, labels=labels, source=source or f"org/repo#{i}", fix="did a thing")


MEMORY = CaseMemory([
    _case("a", "ZeroDivisionError inside the frobnicator while packing sequences", ["data-format-error"]),
    _case("b", "frobnicator packing sequences crashed with ZeroDivisionError again", ["data-format-error"]),
    _case("c", "quokka scheduler keeps sleeping between steps, throughput halves", ["slow-training"]),
    _case("d", "pip cannot build the wombat extension wheel", []),
])


def test_tokens_keep_identifiers_words_and_chinese_bigrams():
    toks = tokens("torch.cuda.OutOfMemoryError 显存不足 max_split_size_mb")
    assert "torch.cuda.outofmemoryerror" in toks and "outofmemoryerror" in toks
    assert "显存" in toks and "存不" in toks and "max_split_size_mb" in toks and "split" in toks


def test_nearest_cases_vote_for_their_mode():
    votes = MEMORY.vote("ZeroDivisionError in the frobnicator when packing")
    assert votes.best[0] == "data-format-error" and votes.best[1] > 0.5
    assert [n.case.id for n in votes.neighbours][:2] in (["a", "b"], ["b", "a"])
    assert votes.out_of_scope == 0.0


def test_out_of_scope_cases_vote_out_of_scope():
    votes = MEMORY.vote("cannot build the wombat extension wheel with pip")
    assert votes.out_of_scope > 0.5 and not votes.modes


def test_unrelated_text_gets_no_votes():
    votes = MEMORY.vote("completely different words about gardening tomatoes")
    assert not votes.neighbours and votes.best == (None, 0.0)


def test_exclude_leaves_a_thread_out():
    votes = MEMORY.vote("quokka scheduler sleeping between steps", exclude="org/repo#c")
    assert all(n.case.id != "c" for n in votes.neighbours)


def test_similarity_is_the_cosine_of_the_tfidf_vectors_and_survives_the_snapshot():
    """The postings index gives each case exactly the cosine of its TF-IDF vector with the query's, pickled or not."""
    import math
    import pickle
    from collections import Counter

    text = "frobnicator throughput halves while packing sequences"
    q = MEMORY._query(text)
    vectors = MEMORY._vectors()
    cosine = {c.id: sum(w * vectors[i].get(t, 0.0) for t, w in q.items()) for i, c in enumerate(MEMORY.cases)}
    found = {n.case.id: n.similarity for n in MEMORY.nearest(text)}
    assert found and all(found[i] == round(cosine[i], 4) for i in found)
    assert all(math.isclose(sum(w * w for w in v.values()), 1.0) for v in vectors)
    assert vectors[0] == MEMORY._vector(Counter(tokens(MEMORY.cases[0].text)))
    again = pickle.loads(pickle.dumps(MEMORY))
    assert again.nearest(text) == MEMORY.nearest(text) and again.vote(text) == MEMORY.vote(text)


def test_bad_case_file_names_file_and_line(tmp_path):
    (tmp_path / "mine.jsonl").write_text(
        json.dumps({"id": "x", "text": "t", "labels": ["cuda-oom"]}) + "\n" + '{"id": "y", "text": "t", "labels": ["nope"]}\n',
        encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match=r"mine\.jsonl:2"):
        load_cases(tmp_path)


def test_link_for_github_sources():
    assert _case("q", "t", []).link == "https://github.com/org/repo/issues/q"
    assert CaseRecord(id="u", text="t", labels=[], source="https://example.org/t/1").link == "https://example.org/t/1"


@pytest.fixture
def user_kb(tmp_path):
    """A copy of the packaged knowledge base with one user case added."""
    from assistant.config import KB_DIR

    kb = tmp_path / "kb"
    shutil.copytree(KB_DIR, kb, ignore=shutil.ignore_patterns("__pycache__"))
    (kb / "cases" / "ours.jsonl").write_text(json.dumps({
        "id": "ours-1", "labels": ["communication-bottleneck"], "source": "https://wiki.example/incident/42",
        "text": "xylophone fabric link flaps on rack 7, allreduce crawls", "fix": "reseated the xylophone cable",
    }) + "\n", encoding="utf-8")
    return kb


def test_user_cases_answer_machine_output_the_rules_do_not_know(user_kb):
    from assistant import Assistant
    from assistant.config import Settings

    text = "WARN xylophone fabric link flaps on rack 7"
    packaged = Assistant(retrieval="never").diagnose(text)
    mine = Assistant(Settings(kb_dir=user_kb), retrieval="never").diagnose(text)
    assert not any(c.failure_mode == "communication-bottleneck" for c in packaged.candidates)
    assert mine.candidates[0].failure_mode == "communication-bottleneck"
    assert mine.candidates[0].route == "cases" and not mine.candidates[0].evidence
    assert mine.similar[0].id == "ours-1" and mine.similar[0].link == "https://wiki.example/incident/42"
    assert mine.similar[0].fix == "reseated the xylophone cable"
