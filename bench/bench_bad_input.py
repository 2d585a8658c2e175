"""Time and memory bounds for the bad-input matrix (tests/test_bad_input_matrix.py): per input x front-end,
the wall time of one answer and the peak RSS of the process that served it.

Each (input, front-end) runs in a fresh child process so its peak RSS (``ru_maxrss``) is that input's alone:
the Python API (``Assistant.diagnose``), the CLI (``trainfix diagnose -`` with the input on stdin; the child is
the CLI itself), the web chat's submit handler, and the Slack bot (real Bolt app over HTTP, fake Slack Web API).
Sizes are the test's: 50 MB / 20 MB for the API and CLI, the caps' sizes for web and Slack. Wall time counts the
answer only (the app is built and warmed with a normal paste first); RSS includes the app (imports, rules, index).

    python bench/bench_bad_input.py                      # every input x front-end; table on stdout
    python bench/bench_bad_input.py --front api --case huge-paste --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _timer(out: str) -> list[str]:
    """GNU time in front of a command: Linux keeps a process's peak RSS across fork and exec, so a child's own
    ``ru_maxrss`` would include its parent's; GNU time (small) reports the command's own peak."""
    return ["/usr/bin/time", "-f", "%M", "-o", out] if Path("/usr/bin/time").exists() else []


def _peak(out: str, who: int) -> float:
    try:
        return int(Path(out).read_text().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return resource.getrusage(who).ru_maxrss / 1024  # an upper bound without GNU time


def _child(front: str, case_id: str, data_dir: str) -> dict:
    """Serve one input on one front-end in this process; the measurements as a dict."""
    from tests.bad_inputs import OOM, cases
    from tests.test_bad_input_matrix import AS_FILE, SIZES, Slack, Web, _settings, run_api

    from assistant import Assistant

    case = cases()[case_id]
    data = case.make(SIZES[front].get(case_id, 0))
    as_file = case.as_file or (case_id, front) in AS_FILE
    if front == "cli":
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINFIX_")}
        env["TRAINFIX_DATA_DIR"] = data_dir
        with tempfile.NamedTemporaryFile(prefix="bench-rss-") as rss_file:
            start = time.perf_counter()
            proc = subprocess.run([*_timer(rss_file.name), sys.executable, "-m", "app.cli", "diagnose", "--plain",
                                   "--retrieval", "never", "-"], input=data, capture_output=True, env=env, cwd=ROOT)
            wall = time.perf_counter() - start
            rss = _peak(rss_file.name, resource.RUSAGE_CHILDREN)
        return {"bytes": len(data), "seconds": wall, "peak_rss_mib": rss, "exit": proc.returncode,
                "mode": None, "shown": "(includes the CLI's start-up: imports, rules)"}
    settings = _settings(Path(data_dir))
    assistant = Assistant(settings, retrieval="auto")
    tmp = Path(tempfile.mkdtemp(prefix="bench-bad-"))
    app = Web(settings, assistant, tmp) if front == "web" else Slack(tmp, assistant) if front == "slack" else None

    def send(payload: bytes, file: bool):
        if front == "api":
            return run_api(assistant, payload, file)
        out = app.send(payload, file)
        return out[0] if front == "web" else out

    send(OOM.encode(), False)  # warm: rules, index, model loaded before the clock starts
    assistant.search("warm up")
    start = time.perf_counter()
    out = send(data, as_file)
    wall = time.perf_counter() - start
    if front == "slack":
        app.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"bytes": len(data), "seconds": wall, "peak_rss_mib": rss, "mode": out.mode,
            "shown": out.shown.strip().splitlines()[0][:80] if out.shown.strip() else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--front", action="append", choices=["api", "cli", "web", "slack"])
    parser.add_argument("--case", action="append")
    parser.add_argument("--data-dir", default=os.environ.get("TRAINFIX_DATA_DIR"),
                        help="index directory (default TRAINFIX_DATA_DIR; built once if missing)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1], args.data_dir)))
        return
    from tests.bad_inputs import cases

    data_dir = args.data_dir or tempfile.mkdtemp(prefix="bench-bad-data-")
    rows = []
    for case_id in args.case or list(cases()):
        for front in args.front or ["api", "cli", "web", "slack"]:
            rss_file = tempfile.NamedTemporaryFile(prefix="bench-rss-")
            proc = subprocess.run([*_timer(rss_file.name), sys.executable, __file__, "--data-dir", data_dir, "--child",
                                   front, case_id], capture_output=True, text=True, cwd=ROOT,
                                  env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                       "ANONYMIZED_TELEMETRY": "False", "GRADIO_ANALYTICS_ENABLED": "False"})
            try:
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                row = {"error": proc.stderr[-500:]}
            if front != "cli" and "error" not in row:
                row["peak_rss_mib"] = _peak(rss_file.name, resource.RUSAGE_CHILDREN)
            rss_file.close()
            row.update(case=case_id, front=front)
            rows.append(row)
            if not args.json:
                print(f"{case_id:20} {front:6} {row.get('bytes', 0):>11,} B {row.get('seconds', float('nan')):8.2f} s "
                      f"{row.get('peak_rss_mib', float('nan')):7.0f} MiB  {row.get('mode') or row.get('shown') or row.get('error', '')}"[:160],
                      flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
