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
