"""Ingest: `trainfix ingest` into an empty data directory (parse kb/sources, check records, embed and index
every chunk, case records included), again with nothing changed, and once more after the index directory was
deleted (kb/records unchanged: the rebuild takes its vectors from the vector cache beside it).

    python -m bench.ingest [--repeats 3] [--smoke]

Each repeat starts from an empty data directory and an empty ``$XDG_CACHE_HOME`` (so the full ingest is a first
ingest on a new machine: no snapshot, no ONNX export, no vectors). The reference is a bare interpreter start
measured in the same run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import BIN, Row, Summary, child_env, timed_run

COMMAND = "python -m bench.ingest"


def run(repeats: int = 3, smoke: bool = False) -> list[Row]:
    """Measure and return the table rows."""
    trainfix = str(BIN / "trainfix")
    full, again, rebuild, bare = [], [], [], []
    extra = ["--no-index"] if smoke else []
    for _ in range(1 if smoke else repeats):
        with tempfile.TemporaryDirectory(prefix="trainfix-ingest-") as tmp:
            data = Path(tmp) / "data"
            env = child_env(TRAINFIX_DATA_DIR=str(data), XDG_CACHE_HOME=str(Path(tmp) / "cache"))
            bare.append(timed_run([sys.executable, "-c", "pass"], env=env)[0])
            full.append(timed_run([trainfix, "ingest", *extra], env=env)[0])
            again.append(timed_run([trainfix, "ingest", *extra], env=env)[0])
            shutil.rmtree(data / "chroma", ignore_errors=True)
            rebuild.append(timed_run([trainfix, "ingest", *extra], env=env)[0])
    f, a, r, b = Summary.of(full), Summary.of(again), Summary.of(rebuild), Summary.of(bare)
    what = "(no index: smoke)" if smoke else "(fresh data dir: parse, embed, index)"
    return [
        Row(f"full `trainfix ingest` {what}", f.text("s"), f"bare interpreter {b.text('s', 3)}", "—",
            "≤ 20 s", f.median <= 20, COMMAND, {"seconds": f.__dict__}),
        Row("no-op re-ingest (nothing changed)", a.text("s"), f"bare interpreter {b.text('s', 3)}", "—", "≤ 2 s",
            a.median <= 2, COMMAND, {"seconds": a.__dict__}),
        Row("re-ingest after the index directory was deleted (kb unchanged: vectors from the cache)", r.text("s"),
            f"full ingest {f.text('s')}", f"{r.median / f.median:.3f}×" if f.median else "—", "—", None, COMMAND,
            {"seconds": r.__dict__}),
    ]


def main() -> None:
    from bench.common import report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one repeat, without building the index")
    args = ap.parse_args()
    report("ingest", run(args.repeats, args.smoke), keep=not args.smoke)


if __name__ == "__main__":
    main()
