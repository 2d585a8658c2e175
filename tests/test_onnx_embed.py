"""Query embedding without torch: the model's ONNX export (made at index build) gives sentence-transformers'
vectors, a missing, stale or corrupt export falls back to sentence-transformers with the same answers, and a
fresh process answering through retrieval imports neither torch nor sentence-transformers nor transformers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from retrieval_fixtures import sample_passages, sample_records

from assistant.config import KB_DIR, Settings
from assistant.retrieval import Retriever
from assistant.retrieval.embeddings import Embedder, default_model_dir
from assistant.retrieval.index import build_index, onnx_dir
from assistant.retrieval.onnx_embed import OnnxEmbedder, onnx_path
from kb.store import dump

pytestmark = pytest.mark.slow

LONG = " ".join(f"step {i}: loss=nan grad_norm=inf lr=3e-4 rank {i % 8} NCCL watchdog timeout" for i in range(60))
QUERIES = {
    "english": ["CUDA out of memory. Tried to allocate 2.00 GiB", "how many checkpoints should I keep?",
                "RuntimeError: NCCL communicator was aborted on rank 3"],
    "chinese": ["显存不够怎么办", "训练到一半 loss 变成 NaN 了", "加载 Checkpoint 报错：权重形状不匹配"],
    "long": [LONG, "Traceback (most recent call last):\n" + "  File \"train.py\", line 42, in step\n" * 80],
    "empty-ish": ["", " ", "\n\t", "?", "a", "   padded on both sides   "],
}
HEAVY = ("torch", "sentence_transformers", "transformers")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Embedder:
    """The shipped model with its ONNX export in a temp dir (exported once for the module)."""
    emb = Embedder(default_model_dir(), tmp_path_factory.mktemp("onnx"))
    path, made = emb.export_onnx()
    assert made and path.is_file()
    return emb


@pytest.mark.parametrize("kind", sorted(QUERIES))
def test_onnx_query_vectors_equal_sentence_transformers(exported, kind):
    assert exported.backend == "onnx"
    reference = Embedder(default_model_dir())  # no onnx_dir: sentence-transformers
    assert reference.backend == "sentence-transformers"
    texts = QUERIES[kind]
    if kind == "long":  # really past the model's 256-token window, so truncation is compared too
        assert all(len(reference.model.tokenizer(t)["input_ids"]) > 256 for t in texts)
    one_by_one = np.array([exported.embed([t])[0] for t in texts])  # as queries are embedded
    batched = np.array(exported.embed(texts))  # as documents are, padded to the batch's longest text
    st = np.array(reference.embed(texts))
    assert one_by_one.shape == st.shape == (len(texts), 384)
    assert np.abs(one_by_one - st).max() < 1e-5
    assert np.abs(batched - st).max() < 1e-5
    assert np.allclose(np.linalg.norm(one_by_one, axis=1), 1.0, atol=1e-5)


def test_onnx_document_vectors_equal_sentence_transformers(exported, tmp_path):
    """Documents as an index build embeds them — the knowledge base's records, passages and past incidents, many past
    the 256-token window, in one pass batched by token count — give sentence-transformers' vectors."""
    from assistant.retrieval.index import KnowledgeBase

    kb = KnowledgeBase.load(Settings(data_dir=tmp_path), embedder=exported)
    by_kind: dict[str, list[str]] = {}
    for chunk in kb.chunks:
        by_kind.setdefault(chunk.kind, []).append(chunk.text)
    assert set(by_kind) == {"record", "passage", "case"}
    texts = []
    for _, items in sorted(by_kind.items()):
        items = sorted(items, key=len)
        texts += items[::max(1, len(items) // 12)][:12] + items[-3:]  # a spread of lengths and the longest
    done: list[int] = []
    onnx = exported.embed_array(texts, done.append)
    st = Embedder(default_model_dir()).embed_array(texts)
    assert onnx.shape == st.shape == (len(texts), 384) and onnx.dtype == np.float32
    assert np.abs(onnx - st).max() < 1e-5
    assert done[-1] == len(texts) and done == sorted(done)
    alone = np.array([exported.embed([t])[0] for t in texts[::4]])  # as a query: a batch of one, no padding
    assert np.abs(alone - onnx[::4]).max() < 1e-6
    assert exported.embed_array([]).shape == (0, 384)


def test_export_is_kept_until_the_model_changes(exported):
    path = onnx_path(exported.onnx_dir, exported.fingerprint)
    before = path.stat().st_mtime_ns
    assert exported.export_onnx() == (path, False)  # a re-ingest does not export again
    assert path.stat().st_mtime_ns == before
    other = Embedder(default_model_dir(), exported.onnx_dir)
    other.fingerprint = "0" * 64  # another model: this export is not its own
    assert other.backend == "sentence-transformers"


def _spoil(path: Path, how: str) -> None:
    if how == "missing":
        path.unlink()
    elif how == "corrupt":
        path.write_bytes(b"\x08\x07not an onnx model" * 100)
    elif how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    elif how == "stale":  # a readable export made from another model, under this model's name
        import onnx

        proto = onnx.load(str(path))
        for prop in proto.metadata_props:
            if prop.key == "trainfix_fingerprint":
                prop.value = "f" * 64
        onnx.save(proto, str(path))


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> Settings:
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"))
    report = build_index(settings, sample_records(), sample_passages())
    assert report.onnx and report.onnx_exported and Path(report.onnx).is_file()
    return settings


def _answers(settings: Settings) -> tuple[str, list]:
    r = Retriever(settings, sample_records(), sample_passages(), progress=lambda m: None)
    try:
        out = [[(h.id, h.vector_rank, h.bm25_rank) for h in r.search(q, k=4)]
               for q in ("CUDA out of memory during backward", "NCCL timeout on rank 3", "显存不足", "loss becomes nan")]
        r.open()
        return r._kb.embedder.backend, out
    finally:
        r.close()


@pytest.mark.parametrize("how", ["missing", "corrupt", "truncated", "stale"])
def test_unusable_export_falls_back_to_sentence_transformers_with_the_same_answers(small_index, how):
    backend, expected = _answers(small_index)
    assert backend == "onnx"
    path = onnx_path(onnx_dir(small_index), Embedder(default_model_dir()).fingerprint)
    _spoil(path, how)
    backend, answers = _answers(small_index)
    assert backend == "sentence-transformers"
    assert answers == expected
    report = build_index(small_index, sample_records(), sample_passages())  # the next ingest exports it again
    assert report.onnx_exported and report.embedded == 0 and not report.rebuilt
    OnnxEmbedder.load(path, Embedder(default_model_dir()).fingerprint, default_model_dir())
    assert _answers(small_index) == ("onnx", expected)


# Answer a question through retrieval in a fresh process and report which heavy modules it imported.
_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('MODULES ' + ','.join(m for m in %r if m in sys.modules) + '\\n'))\n"
    "sys.argv = ['trainfix', 'diagnose', '--json', '--retrieval', 'always', sys.argv[1]]\n"
    "from app.main import main\n"
    "main()\n"
) % (HEAVY,)


@pytest.fixture
def small_kb(tmp_path) -> Path:
    """The real knowledge base's rules and sources with the sample records and three past incidents (a quick index)."""
    kb = tmp_path / "kb"
    shutil.copytree(KB_DIR, kb, ignore=shutil.ignore_patterns("records", "cases"))
    (kb / "cases").mkdir()
    incidents = (KB_DIR / "cases" / "incidents.jsonl").read_text(encoding="utf-8").splitlines()
    (kb / "cases" / "incidents.jsonl").write_text("\n".join(incidents[:3]) + "\n", encoding="utf-8")
    for sub, items in (("modes", sample_records()), ("passages", sample_passages())):
        (kb / "records" / sub).mkdir(parents=True)
        for item in items:
            (kb / "records" / sub / f"{item.id}.json").write_text(dump(item), encoding="utf-8")
    return kb


def test_fresh_process_answers_through_retrieval_without_torch(small_kb, tmp_path):
    env = {**os.environ, "TRAINFIX_KB_DIR": str(small_kb), "TRAINFIX_DATA_DIR": str(tmp_path / "data"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    build = subprocess.run([sys.executable, "-m", "app.main", "index", "build", "--json"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    assert json.loads(build.stdout)["onnx_exported"]
    paste = tmp_path / "question.txt"
    paste.write_text("how many checkpoints should I keep and where do I save them?\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(paste)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads(proc.stdout)
    assert "retrieval" in d["routes"], d["routes"]
    assert "MODULES \n" in proc.stderr, proc.stderr[-500:]  # none of torch, sentence_transformers, transformers
