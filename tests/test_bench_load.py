"""The load test script (bench/bench_load.py) keeps running: a tiny load, not timed (the figures are in the README)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.web, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parent.parent


def test_load_script_runs_with_web_slack_and_ingest_at_once(shared_data_dir):
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_load.py"), "--requests", "4", "--log-mb", "0.2",
                          "--workers", "2", "--data-dir", str(shared_data_dir), "--json"],
                         capture_output=True, text=True, timeout=1700, cwd=ROOT)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    report = json.loads(run.stdout)
    assert report["requests"] == 8 and report["errors"] == 0
    assert report["feedback_clicks"] == 4 and report["feedback_lost"] == 0
    assert report["ingest_runs"] >= 1 and report["ingest_failures"] == 0
    assert set(report["latency_s"]) == {"web short", "web 5MB log", "slack short", "slack 5MB log"}
