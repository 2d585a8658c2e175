"""The cold path: a fresh `trainfix diagnose` on a recognised error loads no heavy library, the loaded
knowledge base comes from a snapshot keyed by content, and the Typer-free CLI agrees with the Typer one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app
from app.main import parse_diagnose
from assistant import snapshot

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "chromadb", "sentence_transformers", "gradio", "bm25s", "jieba", "onnxruntime", "typer", "rich")
RECOGNISED = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "CUDA out of memory. Tried to allocate 2.00 GiB",  # words only, no exception class: still the rules' answer
    "OSError: [Errno 28] No space left on device",
]

# Run the console script's entry point in a fresh interpreter and report what it imported.
_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('MODULES ' + ','.join(m for m in %r if m in sys.modules) + '\\n'))\n"
    "sys.argv = ['trainfix', 'diagnose', '--json', sys.argv[1]]\n"
    "from app.main import main\n"
    "main()\n"
) % (HEAVY,)


@pytest.mark.parametrize("text", RECOGNISED)
def test_fresh_diagnose_of_a_recognised_error_imports_no_heavy_library(text, tmp_path):
    paste = tmp_path / "paste.txt"
    paste.write_text(text + "\n", encoding="utf-8")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for _ in range(2):  # the first run writes the snapshot, the second reads it
        proc = subprocess.run([sys.executable, "-c", _PROBE, str(paste)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "MODULES \n" in proc.stderr, proc.stderr[-500:]
        d = json.loads(proc.stdout)
        assert d["candidates"][0]["failure_mode"] in ("cuda-oom", "disk-full")
        assert d["routes"] == ["rule"]
    assert list((tmp_path / "cache" / "trainfix").glob("kb-*.pickle"))


def test_snapshot_is_keyed_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = tmp_path / "kb.json"
    data.write_text("1", encoding="utf-8")
    calls: list[int] = []

    def build():
        calls.append(1)
        return json.loads(data.read_text(encoding="utf-8"))

    assert snapshot.cached("test", [data], build) == 1
    assert snapshot.cached("test", [data], build) == 1 and len(calls) == 1  # read back, not rebuilt
    data.write_text("2", encoding="utf-8")
    assert snapshot.cached("test", [data], build) == 2 and len(calls) == 2  # new content, new snapshot


def test_a_damaged_or_foreign_snapshot_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = tmp_path / "kb.json"
    data.write_text("3", encoding="utf-8")
    assert snapshot.cached("test", [data], lambda: 3) == 3
    (path,) = (tmp_path / "cache" / "trainfix").glob("kb-test-*.pickle")
    path.write_bytes(b"not a pickle")
    assert snapshot.cached("test", [data], lambda: 4) == 4
    path.chmod(0o666)  # writable by others: never unpickled
    assert snapshot.cached("test", [data], lambda: 5) == 5


def test_fast_parser_hands_anything_unusual_to_typer():
    assert parse_diagnose([]) == {"file": "-", "as_json": False, "answer": [], "lang": None, "retrieval": "auto",
                                  "plain": False}
    assert parse_diagnose(["crash.txt", "--json", "-a", "precision=bf16", "--answer=oom-when=mid", "--lang", "zh",
                           "--retrieval=never"]) == {
        "file": "crash.txt", "as_json": True, "answer": ["precision=bf16", "oom-when=mid"], "lang": "zh",
        "retrieval": "never", "plain": False}
    for args in (["--help"], ["a", "b"], ["--retrieval", "sometimes"], ["--lang"], ["--verbose"], ["--", "x"]):
        assert parse_diagnose(args) is None, args


def test_fast_cli_prints_what_the_typer_cli_prints(tmp_path):
    paste = tmp_path / "paste.txt"
    paste.write_text(RECOGNISED[1] + "\n", encoding="utf-8")
    typer_out = CliRunner().invoke(app, ["diagnose", "--plain", str(paste)])
    assert typer_out.exit_code == 0, typer_out.output
    proc = subprocess.run([sys.executable, "-m", "app.main", "diagnose", "--plain", str(paste)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == typer_out.stdout
    bad = subprocess.run([sys.executable, "-m", "app.main", "diagnose", str(tmp_path / "missing.log")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("trainfix: file not found")


def test_the_collector_is_off_while_loading_and_back_on_while_a_file_is_diagnosed(tmp_path, monkeypatch, capsys):
    """A fresh `trainfix diagnose` loads without garbage collection, but a long log is streamed with it on."""
    import gc

    from app import main as cli_main
    from assistant.api import Assistant

    log = tmp_path / "train.log"
    log.write_text(RECOGNISED[0] + "\n", encoding="utf-8")
    seen: list[tuple[str, bool]] = []
    init, diagnose_file = Assistant.__init__, Assistant.diagnose_file

    def spy_init(self, *a, **k):
        seen.append(("load", gc.isenabled()))
        init(self, *a, **k)

    def spy_file(self, *a, **k):
        seen.append(("diagnose", gc.isenabled()))
        return diagnose_file(self, *a, **k)

    monkeypatch.setattr(Assistant, "__init__", spy_init)
    monkeypatch.setattr(Assistant, "diagnose_file", spy_file)
    monkeypatch.setattr(sys, "argv", ["trainfix", "diagnose", "--plain", str(log)])
    try:
        cli_main.main()
    finally:
        gc.unfreeze()
        gc.enable()
    assert seen == [("load", False), ("diagnose", True)]
    assert "cuda-oom" in capsys.readouterr().out


def test_a_repeated_paste_gets_an_equal_answer_that_the_caller_may_change():
    from assistant.api import Assistant

    a = Assistant(retrieval="never")
    first = a.diagnose(RECOGNISED[0])
    first.candidates[0].failure_mode = "changed by the caller"
    again = a.diagnose(RECOGNISED[0])
    assert again.candidates[0].failure_mode == "cuda-oom"
    assert again == a.diagnose(RECOGNISED[0].encode())  # str and bytes of the same text: one key
    assert a.diagnose(RECOGNISED[0], lang="zh").language == "zh"  # the language is part of the key


def test_one_answer_embeds_its_query_once(tmp_path):
    from retrieval_fixtures import SyntheticEmbedder, sample_passages, sample_records

    from assistant.config import Settings
    from assistant.retrieval import Retriever

    class Counting(SyntheticEmbedder):
        queries = 0

        def embed(self, texts):
            if len(texts) == 1:
                Counting.queries += 1
            return super().embed(texts)

    r = Retriever(Settings(data_dir=tmp_path), sample_records(), sample_passages(), progress=lambda m: None,
                  embedder=Counting())
    first = r.search("CUDA out of memory during backward", k=3)
    r.search("CUDA out of memory during backward", k=3, kinds=("record",))
    assert r.search("CUDA out of memory during backward", k=3) == first
    assert Counting.queries == 1
    r.close()


def test_writing_a_snapshot_keeps_only_the_most_recently_used_of_its_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "trainfix"
    data = tmp_path / "data.txt"
    for i in range(snapshot.KEEP + 4):
        data.write_text(f"version {i}", encoding="utf-8")
        assert snapshot.cached("test", [data], lambda i=i: i) == i
        for n, path in enumerate(sorted(cache.glob("kb-test-*.pickle"), key=lambda p: p.stat().st_mtime)):
            os.utime(path, (n, n))  # strictly ordered times, whatever the file system's resolution
    assert len(list(cache.glob("kb-test-*.pickle"))) == snapshot.KEEP
    data.write_text("version 0", encoding="utf-8")  # long gone: built again
    assert snapshot.cached("test", [data], lambda: "again") == "again"
    # a snapshot read recently survives the writes of newer ones; other kinds are left alone
    other = tmp_path / "other.txt"
    other.write_text("x", encoding="utf-8")
    snapshot.cached("other-kind", [other], lambda: 1)
    keep = next(p for p in cache.glob("kb-test-*.pickle") if snapshot._read(p) == "again")
    os.utime(keep, (10**9, 10**9))
    for i in range(20, 20 + snapshot.KEEP):
        for path in cache.glob("kb-test-*.pickle"):
            if path != keep:
                os.utime(path, (1, 1))
        data.write_text(f"version {i}", encoding="utf-8")
        snapshot.cached("test", [data], lambda: None)
    assert keep.exists()
    assert len(list(cache.glob("kb-test-*.pickle"))) == snapshot.KEEP
    assert len(list(cache.glob("kb-other-kind-*.pickle"))) == 1
