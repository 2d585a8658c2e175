"""Where the time (and the web chat's memory) goes, for each Performance row whose target is missed.

    python -m bench.profile [--only cold,question,warm,scan,ingest,web,retrieval] [--smoke]

Each profile is written to ``bench/results/profile-<name>.txt`` (pyinstrument's text report, CPU time
next to wall time: the machines here are shared, so CPU time is the figure to read):

- ``cold``: a fresh ``trainfix diagnose`` on the CUDA OOM line (snapshot and bytecode caches warm);
- ``question``: a fresh ``trainfix ask`` that needs retrieval (index and ONNX export built);
- ``warm``: ``Assistant.diagnose`` over the labelled sets in one process, after a warm-up pass;
- ``scan``: ``trainfix diagnose`` on a generated 10 MiB multi-rank log (``bench/make_log.py``);
- ``ingest``: ``trainfix ingest`` into an empty data dir with an empty cache (the full build);
- ``web``: not time but resident memory, step by step, of what ``trainfix web`` loads;
- ``retrieval``: ``Retriever.search`` at 100k records (embedded Chroma, synthetic document vectors, real query
  embedding, as ``bench.retrieval``'s row), the 60 measured queries only, not the index build.

``--smoke`` profiles the cold answer and a 1 MiB scan only (the test that keeps this script running).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import RESULTS, ROOT, child_env

NAMES = ("cold", "question", "warm", "scan", "ingest", "web", "retrieval")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
QUESTION = "how many checkpoints should I keep?"


def _pyinstrument(args: list[str], out: Path, env: dict[str, str] | None = None, header: str = "") -> None:
    cmd = [sys.executable, "-m", "pyinstrument", "-r", "text", "-o", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env or child_env(), cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    if header:
        out.write_text(f"# {header}\n\n" + out.read_text(encoding="utf-8"), encoding="utf-8")


def cold(out_dir: Path, tmp: Path) -> Path:
    paste = tmp / "oom.txt"
    paste.write_text(OOM, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "app.main", "diagnose", str(paste)], capture_output=True, env=child_env(),
                   cwd=ROOT, check=True)  # warm the snapshot and bytecode caches, as after a first run
    out = out_dir / "profile-cold.txt"
    _pyinstrument(["-m", "app.main", "diagnose", "--plain", str(paste)], out,
                  header="pyinstrument -m app.main diagnose --plain <the CUDA OOM line>"
                         "  (python -m bench.profile --only cold)")
    return out


def question(out_dir: Path, tmp: Path) -> Path:
    env = child_env()
    for args in (["index", "build"], ["ask", QUESTION]):  # index and ONNX export up to date, caches warm
        subprocess.run([sys.executable, "-m", "app.main", *args], capture_output=True, env=env, cwd=ROOT, check=True)
    out = out_dir / "profile-question.txt"
    _pyinstrument(["-m", "app.main", "ask", QUESTION], out, env,
                  header=f"pyinstrument -m app.main ask {QUESTION!r}  (python -m bench.profile --only question)")
    return out


_WARM = """
import json, sys
from pathlib import Path
from pyinstrument import Profiler
from assistant.api import Assistant
from assistant.evaluate import load_cases
sets = ["tests/data/realworld/test.jsonl", "tests/data/triage_cases.jsonl", "tests/data/retrieval_queries.jsonl"]
texts = [c.text for s in sets for c in load_cases(s)]
a = Assistant()
for t in texts:
    a.diagnose(t)
a._recent.clear()  # the answer cache would answer the timed pass
p = Profiler()
p.start()
for t in texts:
    a.diagnose(t)
    a._recent.clear()
p.stop()
Path(sys.argv[1]).write_text(
    "# Assistant.diagnose over the %d labelled texts, after a warm-up pass (python -m bench.profile --only warm)\\n\\n"
    % len(texts) + p.output_text(show_all=False), encoding="utf-8")
"""


def warm(out_dir: Path, tmp: Path) -> Path:
    out = out_dir / "profile-warm.txt"
    subprocess.run([sys.executable, "-c", _WARM, str(out)], env=child_env(), cwd=ROOT, check=True, capture_output=True)
    return out


def scan(out_dir: Path, tmp: Path, mib: float = 10.0) -> Path:
    log = tmp / "big.log"
    subprocess.run([sys.executable, "-m", "bench.make_log", "--out", str(log), "--size-mb", str(mib)],
                   env=child_env(), cwd=ROOT, check=True, capture_output=True)
    out = out_dir / "profile-scan.txt"
    _pyinstrument(["-m", "app.main", "diagnose", "--plain", "--retrieval", "never", str(log)], out,
                  header=f"pyinstrument -m app.main diagnose --plain --retrieval never"
                         f" <{mib:g} MiB bench/make_log.py log>  (python -m bench.profile --only scan)")
    return out


def ingest(out_dir: Path, tmp: Path) -> Path:
    env = child_env(TRAINFIX_DATA_DIR=str(tmp / "data"), XDG_CACHE_HOME=str(tmp / "cache"))
    out = out_dir / "profile-ingest.txt"
    _pyinstrument(["-m", "app.main", "ingest"], out, env,
                  header="pyinstrument -m app.main ingest, empty data dir and cache"
                         "  (python -m bench.profile --only ingest)")
    return out


_WEB = """
import sys
def rss():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) / 1024 for l in fh if l.startswith("VmRSS:"))
rows = [("python interpreter", rss())]
import gradio  # noqa: F401
rows.append(("import gradio", rss()))
from assistant.api import Assistant
a = Assistant()
rows.append(("Assistant(): rules, tree, records, case memory", rss()))
a.diagnose("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
rows.append(("first rule-path answer", rss()))
a.diagnose("how many checkpoints should I keep?")
rows.append(("first question: embedding model, Chroma, BM25", rss()))
from app.web import WebApp
WebApp(assistant=a).build()
rows.append(("the Gradio app built", rss()))
prev = 0.0
lines = ["# resident memory (MiB) after each step of what `trainfix web` loads",
         "# (python -m bench.profile --only web)", "", "| step | RSS MiB | added |", "|---|---:|---:|"]
for name, mib in rows:
    lines.append(f"| {name} | {mib:.0f} | {mib - prev:+.0f} |")
    prev = mib
open(sys.argv[1], "w").write("\\n".join(lines) + "\\n")
"""


def web(out_dir: Path, tmp: Path) -> Path:
    out = out_dir / "profile-web.txt"
    subprocess.run([sys.executable, "-c", _WEB, str(out)], env=child_env(), cwd=ROOT, check=True,
                   capture_output=True)
    return out


_RETRIEVAL = """
import sys, tempfile
from pathlib import Path
sys.path.insert(0, "tests")
from pyinstrument import Profiler
from bench.retrieval import QueriesWithModel, queries
from retrieval_fixtures import SyntheticEmbedder, synthetic_records
from assistant.config import Settings
from assistant.retrieval import Retriever
from assistant.retrieval.embeddings import Embedder, resolve_model_dir
from ingest.index import KnowledgeBase, build_index
out, n = sys.argv[1], int(sys.argv[2])
synthetic = SyntheticEmbedder()
emb = QueriesWithModel(Embedder(resolve_model_dir(None)), synthetic)
records = synthetic_records(n)
with tempfile.TemporaryDirectory(prefix="trainfix-profile-retrieval-") as tmp:
    settings = Settings(data_dir=Path(tmp))
    build_index(settings, records, [], kb=KnowledgeBase.load(settings, records, [], embedder=emb))
    retriever = Retriever(settings, records, [], progress=lambda m: None, embedder=emb)
    qs = queries()
    retriever.search(qs[0], k=5)  # warm-up, as the benchmark: opens the index, builds BM25
    profiler = Profiler()
    profiler.start()
    for q in qs:
        retriever.search(q, k=5)
    profiler.stop()
    retriever.close()
head = f"# Retriever.search x {len(qs)} at {n:,} records, embedded  (python -m bench.profile --only retrieval)\\n\\n"
open(out, "w").write(head + profiler.output_text(unicode=True, color=False))
"""


def retrieval(out_dir: Path, tmp: Path, records: int = 100_000) -> Path:
    out = out_dir / "profile-retrieval.txt"
    subprocess.run([sys.executable, "-c", _RETRIEVAL, str(out), str(records)], env=child_env(), cwd=ROOT, check=True,
                   capture_output=True)
    return out


def run(only: tuple[str, ...] = NAMES, smoke: bool = False, out_dir: Path = RESULTS) -> list[Path]:
    """Write the profiles and return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = {"cold": cold, "question": question, "warm": warm, "scan": scan, "ingest": ingest, "web": web,
             "retrieval": retrieval}
    written = []
    with tempfile.TemporaryDirectory(prefix="trainfix-profile-") as tmp_s:
        tmp = Path(tmp_s)
        for name in only:
            print(f"profile: {name}…", file=sys.stderr, flush=True)
            written.append(scan(out_dir, tmp, 1.0) if smoke and name == "scan" else steps[name](out_dir, tmp))
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(NAMES), help="comma-separated: " + ", ".join(NAMES))
    ap.add_argument("--smoke", action="store_true",
                    help="the cold answer and a 1 MiB scan, into a temporary directory")
    args = ap.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="trainfix-profile-out-") as out_s:
            for path in run(("cold", "scan"), smoke=True, out_dir=Path(out_s)):
                print(f"{path.name}: {len(path.read_text(encoding='utf-8').splitlines())} lines")
                print(path.read_text(encoding="utf-8")[:3000])
        return
    only = tuple(n.strip() for n in args.only.split(",") if n.strip())
    unknown = set(only) - set(NAMES)
    if unknown:
        ap.error(f"unknown profile(s): {', '.join(sorted(unknown))}")
    for path in run(only):
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
