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
