"""Cold answer: a fresh `trainfix diagnose` process vs a bare interpreter and vs importing a naive RAG stack.

    python -m bench.cold [--repeats 7] [--smoke]

Each repeat runs, interleaved, `python -c pass`, `trainfix diagnose` on a recognised error line (with and
without its exception class), a cold question needing retrieval (`trainfix ask`), the query embedding alone
as that question does it (import onnxruntime + tokenizers, load the model's ONNX export, embed one query) and
the naive RAG stack's import (sentence-transformers + chromadb + langchain-core) and import + model load + one
query. Medians with min–max; every ratio is against the reference measured in the same run. The snapshot and
bytecode caches are warmed once first, and `trainfix index build` brings the index and the ONNX export up to
date, as after a user's `trainfix ingest` and first run. The index is the one in `TRAINFIX_DATA_DIR` (default:
the user's data dir).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench.common import BIN, Row, Summary, child_env, report, timed_run

FULL = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
BARE = "CUDA out of memory. Tried to allocate 2.00 GiB"
QUESTION = "how many checkpoints should I keep?"
RAG_IMPORT = "import sentence_transformers, chromadb, langchain_core"
RAG_QUERY = (RAG_IMPORT + "\nfrom assistant.retrieval.embeddings import default_model_dir\n"
             "m = sentence_transformers.SentenceTransformer(str(default_model_dir()), device='cpu')\n"
             "m.encode([%r])\n" % QUESTION)
ONNX_QUERY = ("from assistant.config import Settings\n"
              "from assistant.retrieval.embeddings import Embedder, resolve_model_dir\n"
              "from assistant.retrieval.index import onnx_dir\n"
              "s = Settings()\n"
              "e = Embedder(resolve_model_dir(s.embedding_model), onnx_dir(s))\n"
              "assert e.backend == 'onnx', 'no ONNX export: run trainfix index build'\n"
              "e.embed([%r])\n"
              "import sys\n"
              "assert not {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n" % QUESTION)
COMMAND = "python -m bench.cold"


def run(repeats: int = 7, smoke: bool = False) -> list[Row]:
    """Measure and return the table rows."""
    py = sys.executable
    trainfix = str(BIN / "trainfix")
    with tempfile.TemporaryDirectory(prefix="trainfix-cold-") as tmp:
        full, bare = Path(tmp) / "full.txt", Path(tmp) / "bare.txt"
        full.write_text(FULL + "\n", encoding="utf-8")
        bare.write_text(BARE + "\n", encoding="utf-8")
        env = child_env()
        cases = {
            "bare": [py, "-c", "pass"],
            "full": [trainfix, "diagnose", "--plain", str(full)],
            "words": [trainfix, "diagnose", "--plain", str(bare)],
            "rag_import": [py, "-c", "import json" if smoke else RAG_IMPORT],
        }
        if not smoke:
            timed_run([trainfix, "index", "build"], env=env)  # the index and its ONNX export, as `trainfix ingest` leaves them
            cases["question"] = [trainfix, "ask", "--plain", QUESTION]
            cases["onnx_query"] = [py, "-c", ONNX_QUERY]
            cases["rag_query"] = [py, "-c", RAG_QUERY]
        for cmd in cases.values():  # warm-up: snapshot, bytecode, the index for the question
            timed_run(cmd, env=env)
        times: dict[str, list[float]] = {k: [] for k in cases}
        heavy = {"rag_import", "rag_query"}
        for i in range(repeats):
            for name, cmd in cases.items():
                if name in heavy and i >= max(1, repeats // 2):
                    continue  # ~10 s each: fewer repeats of the slow references
                times[name].append(timed_run(cmd, env=env)[0])
    s = {k: Summary.of(v) for k, v in times.items() if v}
    rows = []
    for key, label in (("full", f"cold `trainfix diagnose`: `{FULL[:40]}…`"),
                       ("words", f"cold `trainfix diagnose`: `{BARE}` (no exception class)")):
        x = s[key]
        vs_bare, vs_rag = x.median / s["bare"].median, x.median / s["rag_import"].median
        rows.append(Row(label, x.text("s"),
                        f"bare `python -c pass` {s['bare'].text('s', 3)}; naive RAG import {s['rag_import'].text('s')}",
                        f"{vs_bare:.1f}× bare; {vs_rag:.3f}× RAG import", "≤ 10× bare and ≤ 0.03× RAG import",
                        vs_bare <= 10 and vs_rag <= 0.03, COMMAND,
                        {"seconds": x.__dict__, "vs_bare": vs_bare, "vs_rag_import": vs_rag}))
    if "question" in s:
        ref = s["rag_query"]
        for key, label in (("question", f"cold question needing retrieval: `trainfix ask \"{QUESTION}\"` "
                                        "(query embedded with the ONNX export, no torch)"),
                           ("onnx_query", "cold query embedding alone: import onnxruntime + tokenizers, load the ONNX "
                                          "export, embed the question")):
            x = s[key]
            rows.append(Row(label, x.text("s"), f"naive RAG import + model load + 1 query {ref.text('s')}",
                            f"{x.median / ref.median:.3f}×", "≤ 0.1× naive RAG", x.median / ref.median <= 0.1,
                            COMMAND, {"seconds": x.__dict__, "reference": ref.__dict__}))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--smoke", action="store_true", help="one repeat, no RAG stack (keeps the script running)")
    args = ap.parse_args()
    report("cold", run(1 if args.smoke else args.repeats, args.smoke), keep=not args.smoke)


if __name__ == "__main__":
    main()
