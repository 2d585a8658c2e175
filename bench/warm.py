"""Warm answers: `Assistant.diagnose` in a running session over the labelled sets, rule path and retrieval
path apart, against embedding one short query with the same model in the same run.

    python -m bench.warm [--smoke]

Every labelled text (tests/data: the real-world test split, the team's pastes and questions) is answered
once to warm up (model, index, caches), then timed once more; p50/p95 per path. A text is on the
retrieval path when the assistant consulted retrieval for it.
"""

from __future__ import annotations

import argparse
import time

from bench.common import ROOT, Row, percentile, report

SETS = ["tests/data/realworld/test.jsonl", "tests/data/triage_cases.jsonl", "tests/data/retrieval_queries.jsonl"]
COMMAND = "python -m bench.warm"


def run(smoke: bool = False) -> list[Row]:
    """Measure and return the table rows."""
    from assistant.api import Assistant
    from assistant.evaluate import load_cases

    texts = [c.text for s in SETS for c in load_cases(ROOT / s)]
    if smoke:
        texts = ["CUDA out of memory. Tried to allocate 2.00 GiB", "OSError: [Errno 28] No space left on device"]
    assistant = Assistant(retrieval="never" if smoke else "auto")
    consulted: list[bool] = []
    decide = assistant._consult_retrieval

    def spy(*args, **kwargs):
        consulted.append(decide(*args, **kwargs))
        return consulted[-1]

    assistant._consult_retrieval = spy  # type: ignore[method-assign]
    for t in texts:
        assistant.diagnose(t)
    times: dict[bool, list[float]] = {False: [], True: []}
    for t in texts:
        consulted.clear()
        start = time.perf_counter()
        assistant.diagnose(t)
        times[bool(consulted and consulted[-1])].append((time.perf_counter() - start) * 1000)
    embed: list[float] = []
    if not smoke:
        emb = assistant._get_retriever()._kb.embedder  # opened by the warm-up
        for t in ("CUDA out of memory", "loss is nan after 300 steps", "NCCL watchdog timeout"):
            for _ in range(5):
                start = time.perf_counter()
                emb.embed([t])
                embed.append((time.perf_counter() - start) * 1000)
    ref = f"embed one short query: p50 {percentile(embed, 50):.1f} ms" if embed else "—"
    rows = []
    for path, label in ((False, "rule path"), (True, "retrieval path")):
        v = times[path]
        if not v:
            continue
        p50, p95 = percentile(v, 50), percentile(v, 95)
        rows.append(Row(f"warm `Assistant.diagnose`, {label} ({len(v)} labelled texts)",
                        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (max {max(v):.0f})", ref,
                        f"p50 = {p50 / percentile(embed, 50):.1f}× one embedding" if embed else "—",
                        "p50 ≤ 10 ms, p95 ≤ 40 ms", p50 <= 10 and p95 <= 40, COMMAND,
                        {"p50_ms": p50, "p95_ms": p95, "n": len(v)}))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="two texts, rule path only")
    args = ap.parse_args()
    report("warm", run(args.smoke), keep=not args.smoke)


if __name__ == "__main__":
    main()
