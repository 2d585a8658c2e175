"""Scan benchmark: triage a large training log in one streaming pass vs ``grep -E -i -c`` over the same patterns.

    python bench/bench_scan.py [--log PATH] [--size-mb 100] [--runs 1]

Generates the log with ``bench/make_log.py`` if it does not exist, runs ``triage_file`` in a child
process (so its peak RSS is measured alone), exports the rule patterns as POSIX ERE for grep, prints a
Markdown table and writes ``bench/results/scan.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))


def _child(log: str) -> None:
    """Run in a fresh process: import, triage the file, report time and peak RSS as JSON."""
    t0 = time.perf_counter()
    from assistant.triage import _engine, triage_file

    _engine()  # load rules and compile the Hyperscan database outside the timed scan
    t1 = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = triage_file(log)
    t2 = time.perf_counter()
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # The one-pass prefilter alone (Hyperscan over raw 4 MiB blocks), to show where the time goes.
    t3 = time.perf_counter()
    patterns = _engine().patterns
    with open(log, "rb") as f:
        for block in iter(lambda: f.read(4 * 1024 * 1024), b""):
            patterns.hit_indexes(block)
    t4 = time.perf_counter()
    print(json.dumps({
        "prefilter_s": t4 - t3,
        "load_s": t1 - t0,
        "scan_s": t2 - t1,
        "rss_after_load_mib": rss_before / 1024,
        "rss_peak_mib": rss_peak / 1024,
        "top": [(c.failure_mode, c.confidence, c.evidence[0].line if c.evidence else None) for c in result.candidates[:3]],
        "input_lines": result.input_lines,
        "engine": _engine().patterns.engine,
    }))


def _engine_patterns() -> list:
    from assistant.triage import _engine

    return _engine().patterns.entries


def _grep(log: Path, ere: Path) -> dict:
    grep = shutil.which("grep")
    if grep is None:
        return {"error": "grep not found"}
    t0 = time.perf_counter()
    proc = subprocess.run([grep, "-E", "-i", "-c", "-f", str(ere), str(log)], capture_output=True, text=True,
                          env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    dt = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"seconds": dt, "matching_lines": proc.stdout.strip(), "returncode": proc.returncode,
            "stderr": proc.stderr.strip()[:300], "rss_peak_mib": usage.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", type=Path, default=Path("/tmp/trainfix_bench_100mb.log"))
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child)
        return

    from make_log import make_log

    from assistant.signatures import export_ere, load_rules

    if not args.log.exists():
        print(f"generating {args.log} ({args.size_mb:g} MB)…", file=sys.stderr)
        make_log(args.log, args.size_mb)
    size_mb = args.log.stat().st_size / (1024 * 1024)

    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    patterns, skipped = export_ere(load_rules())
    ere = results_dir / "patterns.ere"
    ere.write_text("\n".join(patterns) + "\n", encoding="utf-8")

    # grep first: RUSAGE_CHILDREN's peak RSS is a maximum over all children waited for so far.
    greps = [_grep(args.log, ere) for _ in range(args.runs)]
    g = min(greps, key=lambda r: r.get("seconds", 1e9))
    runs = []
    for _ in range(args.runs):
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(args.log)],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
        runs.append(json.loads(proc.stdout))
    best = min(runs, key=lambda r: r["scan_s"])

    result = {
        "log": str(args.log),
        "size_mib": round(size_mb, 1),
        "lines": best["input_lines"],
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
        "triage": {
            "engine": best["engine"],
            "scan_seconds": round(best["scan_s"], 3),
            "mib_per_s": round(size_mb / best["scan_s"], 1),
            "load_seconds": round(best["load_s"], 3),
            "rss_after_load_mib": round(best["rss_after_load_mib"], 1),
            "rss_peak_mib": round(best["rss_peak_mib"], 1),
            "top_candidates": best["top"],
            "prefilter_only_seconds": round(best["prefilter_s"], 3),
            "prefilter_only_mib_per_s": round(size_mb / best["prefilter_s"], 1),
            "what": "full triage: cleanup, one-pass Hyperscan+RE2 scan of rules/hints/metric/error lines, "
                    "metric series analysis, tracebacks, decision tree",
        },
        "grep": {
            "command": f"grep -E -i -c -f {ere.relative_to(ROOT)} LOG",
            "patterns": len(patterns),
            "patterns_not_translatable": len(skipped),
            "seconds": round(g.get("seconds", 0.0), 3),
            "mib_per_s": round(size_mb / g["seconds"], 1) if g.get("seconds") else None,
            "matching_lines": g.get("matching_lines"),
            "rss_peak_mib": round(g.get("rss_peak_mib", 0.0), 1),
            "what": "counts lines matching any rule pattern; no cleanup, no metrics, no ranking",
        },
        "runs": args.runs,
    }
    (results_dir / "scan.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    t, gr = result["triage"], result["grep"]
    print(f"Scan benchmark: {size_mb:.1f} MiB, {result['lines']:,} lines ({args.log})\n")
    print("| tool | what it does | seconds | MiB/s | peak RSS (MiB) |")
    print("|---|---|---:|---:|---:|")
    print(f"| trainfix triage_file ({t['engine']}) | full triage, one pass | {t['scan_seconds']} | {t['mib_per_s']} "
          f"| {t['rss_peak_mib']} (after load {t['rss_after_load_mib']}) |")
    print(f"| Hyperscan prefilter only ({len(_engine_patterns())} patterns) | which patterns occur, no extraction | "
          f"{t['prefilter_only_seconds']} | {t['prefilter_only_mib_per_s']} | — |")
    print(f"| grep -E -i -c ({gr['patterns']} patterns) | count matching lines | {gr['seconds']} | {gr['mib_per_s']} "
          f"| {gr['rss_peak_mib']} |")
    print(f"\ntop candidates: {t['top_candidates']}")
    print(f"grep matching lines: {gr['matching_lines']}; patterns not translatable to ERE: {gr['patterns_not_translatable']}")


if __name__ == "__main__":
    main()
