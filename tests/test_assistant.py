"""The public Assistant API: diagnosis, conversation, language, abstention, citations, redaction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.render import markdown
from assistant.api import Assistant, Exchange
from assistant.config import Settings

SOURCES = Settings().sources_dir
OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"

# A Trainer run (older transformers: no grad_norm logged) that was healthy for 60 logging steps,
# then turned NaN: nothing says fp16 or bf16, so FP16 overflow (高 in the guide) leads until answered.
MID_RUN_NAN = "\n".join(
    [f"{{'loss': {2.1 - i * 0.001:.4f}, 'learning_rate': 4e-05, 'epoch': {i / 100:.2f}}}" for i in range(60)]
    + ["{'loss': nan, 'learning_rate': 4e-05, 'epoch': 0.60}"] * 3
)


@pytest.fixture(scope="module")
def rules_only() -> Assistant:
    return Assistant(retrieval="never")


def _check_citations(d) -> None:
    for c in d.citations:
        lines = (SOURCES / c.source).read_text(encoding="utf-8").splitlines()
        span = "\n".join(lines[c.start_line - 1 : c.end_line])
        assert c.quote in span, c


def test_cuda_oom_cli_json_names_mode_evidence_and_guide_section():
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "diagnose", "--json", "--retrieval", "never"],
        input=OOM + "\n", capture_output=True, text=True, timeout=120, check=True,
    )
    d = json.loads(out.stdout)
    top = d["candidates"][0]
    assert top["failure_mode"] == "cuda-oom"
    assert top["evidence"][0]["line"] == 1 and "CUDA out of memory" in top["evidence"][0]["text"]
    guide_oom = [c for c in d["citations"] if c["source_kind"] == "guide" and c["section"] == "4"]
    assert guide_oom, d["citations"]


def test_evidence_points_into_the_input(rules_only):
    paste = "\x1b[31m[rank3]: Traceback (most recent call last):\x1b[0m\n[rank3]:   File \"train.py\", line 9, in <module>\n" \
            f"[rank3]: {OOM}\n"
    d = rules_only.diagnose(paste)
    lines = paste.splitlines()
    for cand in d.candidates:
        for ev in cand.evidence:
            assert ev.match in lines[ev.line - 1], (ev, lines[ev.line - 1])
    assert d.candidates[0].evidence[0].rank == "3"


def test_every_citation_contains_its_quote(rules_only):
    for text in (OOM, MID_RUN_NAN, "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed."):
        d = rules_only.diagnose(text)
        assert d.citations
        _check_citations(d)


def test_markdown_markers_all_resolve(rules_only):
    md = markdown(rules_only.diagnose(MID_RUN_NAN))
    body, _, sources = md.partition("**Sources**")
    import re  # our own rendered output, not untrusted input

    used = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    listed = {int(n) for n in re.findall(r"^\[(\d+)\]", sources, flags=re.M)}
    assert used and used == listed == set(range(1, len(listed) + 1))


def test_follow_up_answer_reranks_causes(rules_only):
    d = rules_only.diagnose(MID_RUN_NAN)
    assert d.candidates[0].failure_mode == "nan-loss"
    assert "precision" in [f.id for f in d.follow_up]
    first = d.candidates[0].causes[0].id
    assert first == "fp16-overflow", [c.id for c in d.candidates[0].causes]
    d2 = rules_only.ask("it's bf16 already", [Exchange(message=MID_RUN_NAN, diagnosis=d)])
    assert d2.answers == {"precision": "bf16"}
    assert d2.candidates[0].failure_mode == "nan-loss"
    assert d2.candidates[0].causes[0].id != "fp16-overflow"
    assert "precision" not in [f.id for f in d2.follow_up]
    d3 = rules_only.ask("就是bf16", [Exchange(message=MID_RUN_NAN, diagnosis=d)])
    assert d3.language == "zh" and d3.candidates[0].causes[0].id != "fp16-overflow"


def test_answer_language_follows_the_asker(rules_only):
    zh = rules_only.diagnose(f"训练的时候显存不够了，报错如下：\n{OOM}")
    en = rules_only.diagnose(OOM)
    assert zh.language == "zh" and en.language == "en"
    assert zh.candidates[0].title != en.candidates[0].title
    assert "证据" in markdown(zh) and "Evidence" in markdown(en)


def test_out_of_scope_abstains_plainly(rules_only):
    d = rules_only.diagnose("Traceback (most recent call last):\n  File \"app.py\", line 3, in view\n"
                            "    return request.args['user']\nKeyError: 'user'")
    assert d.abstained and not d.candidates and d.out_of_domain == "other-software"
    shown = markdown(d)
    assert "Not a training failure" in shown and "software unrelated to training" in shown
    assert not d.similar and "Similar past incidents" not in shown  # loosely similar failures would mislead


def test_secrets_in_evidence_are_redacted(rules_only):
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    d = rules_only.diagnose(f"{OOM} (HF_TOKEN={token})")
    assert d.candidates[0].failure_mode == "cuda-oom"
    dumped = d.model_dump_json()
    assert token not in dumped and "REDACTED" in dumped
    assert any("redacted" in n for n in d.notices)


def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path: Path):
    missing = tmp_path / "nope.log"
    out = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(missing)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "nope.log" in out.stderr and "Traceback" not in out.stderr


def test_public_api_is_documented():
    import inspect

    import assistant

    for name in assistant.__all__:
        obj = getattr(assistant, name)
        assert (obj.__doc__ or "").strip(), name
        if inspect.isclass(obj) and obj.__module__.startswith("assistant"):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and inspect.isfunction(member):
                    assert (member.__doc__ or "").strip(), f"{name}.{attr}"
    assert (markdown.__doc__ or "").strip()


def test_importing_the_core_loads_no_heavy_library():
    code = ("import sys, assistant; assistant.Assistant(retrieval='never').diagnose('CUDA out of memory'); "
            "print([m for m in ('torch', 'chromadb', 'sentence_transformers', 'gradio') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def with_retrieval() -> Assistant:
    return Assistant(retrieval="auto")


@pytest.mark.slow
def test_question_answers_cite_only_what_they_show(with_retrieval):
    zh = with_retrieval.ask("显存不够怎么办")
    assert zh.language == "zh" and zh.candidates[0].failure_mode == "cuda-oom"
    # With a diagnosis, supporting sections are passages; other records are not dragged in as "related".
    assert all(p.kind == "passage" for p in zh.passages)
    off_topic = with_retrieval.ask("how do I center a div")
    assert off_topic.abstained and not off_topic.candidates
    assert off_topic.passages  # nearest sections, labelled as not a confident match
    assert "not a confident match" in markdown(off_topic)
    for d in (zh, off_topic):
        _check_citations(d)


@pytest.mark.slow
def test_unrecognised_paste_abstains_even_when_retrieval_finds_something(with_retrieval):
    paste = ("npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
             "npm ERR! Found: react@18.2.0\nnpm ERR! Could not resolve dependency: peer react@\"^17\"")
    d = with_retrieval.diagnose(paste)
    assert d.abstained and not d.candidates
    assert "retrieval" not in d.routes


def test_runbook_knowledge_is_never_attributed_to_the_guide(rules_only):
    d = rules_only.diagnose("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.")
    md = markdown(d)
    body, _, sources = md.partition("**Sources**")
    assert "guide" not in body.lower()  # no "in the guide" wording next to runbook-sourced causes
    for line in sources.splitlines():
        if "team-runbook.md" in line:
            assert "team runbook" in line and "customer guide" not in line


def test_chinese_answers_explain_causes_in_chinese(rules_only):
    d = rules_only.diagnose("训练到 3000 步 loss 变成 nan 了，用的 fp16\n{'loss': nan, 'epoch': 2.98}")
    assert d.language == "zh"
    top = d.candidates[0].causes[0]
    assert top.id == "fp16-overflow" and len(top.reasons) >= 2
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in r) for r in top.reasons)
    assert "第 1 行" in markdown(d)


def test_a_repeated_paste_is_answered_the_same_and_a_caller_cannot_change_the_kept_answer(rules_only):
    log = "\n".join("{'loss': %.2f, 'grad_norm': %.1f, 'epoch': %.2f}" % (2.0 - i / 50, 1.0 + i / 10, i / 20)
                    for i in range(12)) + "\n{'loss': nan, 'grad_norm': nan, 'epoch': 0.60}"
    first = rules_only.diagnose(log)
    expected = first.model_dump_json()
    assert first.candidates and first.candidates[0].failure_mode in {"nan-loss", "gradient-explosion"}
    first.candidates.clear()  # the caller's copy, not the kept one
    again = rules_only.diagnose(log)
    assert again.model_dump_json() == expected  # NaN values included (written and read back as "NaN")
    assert again is not rules_only.diagnose(log)
