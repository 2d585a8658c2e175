"""Every benchmark still runs (tiny sizes, `--smoke`) and prints its table. Nothing here is timed: the
figures are for bench/ and the README, never asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["cold", "warm", "scan", "ingest", "retrieval", "web"])
def test_benchmark_runs(name, tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", f"bench.{name}", "--smoke"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("| what | trainfix |"), proc.stdout[:500]
    assert "failed:" not in proc.stdout


def test_profile_script_runs(tmp_path):
    """bench/profile.py (where the time goes for each missed target) still profiles a cold answer and a scan."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "bench.profile", "--smoke"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "profile-cold.txt" in proc.stdout and "profile-scan.txt" in proc.stdout
    assert "run_diagnose" in proc.stdout, proc.stdout[:1500]  # pyinstrument's call tree of the CLI's diagnose


def test_rerun_keeps_other_rows_and_a_failed_benchmarks_previous_figures():
    """`bench.all --only …`: re-measured rows replace theirs, a failed re-run keeps the previous figures
    (marked as such), and the caption says when each benchmark was last measured."""
    from bench.all import caption, merge
    from bench.common import Row

    previous = {"machine": {"date": "2026-12-03", "cores": 2, "ram_gib": 8, "python": "3.11",
                            "load_at_start": 1.0, "measured": {"scan": "2026-12-05 (load average 1.0)"}},
                "rows": [Row("cold", "0.5 s", command="python -m bench.cold").__dict__,
                         Row("scan", "9 s", command="python -m bench.scan").__dict__,
                         Row("retrieval 100k", "60 ms", command="python -m bench.retrieval").__dict__]}
    rows = [Row("cold", "0.4 s", command="python -m bench.cold"),
            Row("retrieval", "failed: OSError: disk", met=False, command="python -m bench.retrieval")]
    merged, m = merge(previous, rows, {"date": "2026-12-07", "load_at_start": 0.3}, "cold,retrieval")
    assert [r.figure for r in merged] == ["0.4 s", "9 s", "60 ms (previous run; re-run failed: OSError: disk)"]
    assert m["measured"] == {"scan": "2026-12-05 (load average 1.0)", "cold": "2026-12-07 (load average 0.3)"}
    assert m["date"] == "2026-12-03"
    assert "Last measured: cold 2026-12-07 (load average 0.3); scan 2026-12-05 (load average 1.0)." in caption(m)


def test_quick_rerun_keeps_the_rows_it_did_not_measure():
    """A `--quick` re-run measures retrieval at 100 and 10k records only: the 100k rows stay, marked as older."""
    from bench.all import merge
    from bench.common import Row

    previous = {"machine": {"date": "2026-12-03", "measured": {}},
                "rows": [Row("retrieval 100", "15 ms", command="python -m bench.retrieval").__dict__,
                         Row("retrieval 100k", "25 ms", command="python -m bench.retrieval").__dict__,
                         Row("web", "500 MiB", command="python -m bench.web").__dict__]}
    rows = [Row("retrieval 100", "14 ms", command="python -m bench.retrieval")]
    merged, _ = merge(previous, rows, {"date": "2026-12-08", "load_at_start": 0.3}, "retrieval")
    assert [(r.what, r.figure) for r in merged] == [("retrieval 100", "14 ms"), ("retrieval 100k", "25 ms (earlier run)"),
                                                     ("web", "500 MiB")]
    again, _ = merge({"machine": {"measured": {}}, "rows": [r.__dict__ for r in merged]}, rows,
                     {"date": "2026-12-09", "load_at_start": 0.3}, "retrieval")
    assert [r.figure for r in again][1] == "25 ms (earlier run)"  # marked once, not once per re-run
