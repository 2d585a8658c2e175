"""Shared pieces of the benchmarks: repeated timing, summaries, rows of the README's Performance table.

Every benchmark measures its reference in the same invocation (so a busy machine slows both), repeats
each measurement and reports the median with the min–max. A row says what was measured, the figure,
its reference, the ratio, the target and whether it is met, and the command that reproduces it.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BIN = Path(sys.executable).parent


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child process: offline, and with bytecode caching on as on a user's machine
    (a session may set PYTHONDONTWRITEBYTECODE, which makes every start recompile the project's modules)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
                "GRADIO_ANALYTICS_ENABLED": "False", "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra)
    return env


def timed_run(cmd: list[str], *, env: dict[str, str] | None = None, stdin: bytes | None = None,
              cwd: Path = ROOT) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of one child process (it must succeed)."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, env=env or child_env(), cwd=cwd)
    dt = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return dt, proc


def peak_rss_mib(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one child.

    Linux keeps a process's peak RSS across fork and exec, so a child forked from this (large) process
    reports at least this process's size. GNU time, a small process, forks the command itself: its report
    is the command's own peak. Without /usr/bin/time the figure is an upper bound.
    """
    timer = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile(prefix="trainfix-rss-", suffix=".txt") as out, tempfile.TemporaryFile() as sink:
        full = [str(timer), "-f", "%M", "-o", out.name, *cmd] if timer.exists() else cmd
        t = time.perf_counter()
        # stdout to a real file: GNU grep stops at the first match when its output is /dev/null.
        proc = subprocess.Popen(full, stdout=sink, stderr=subprocess.PIPE, env=env or child_env(), cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        dt = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
        kib = Path(out.name).read_text().strip().splitlines()[-1:] if timer.exists() else []
    return dt, (int(kib[0]) if kib and kib[0].isdigit() else usage.ru_maxrss) / 1024


@dataclass
class Summary:
    """Median and range of repeated measurements (seconds or milliseconds, as given)."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        return cls(statistics.median(values), min(values), max(values), len(values))

    def text(self, unit: str = "s", digits: int = 2) -> str:
        if self.n == 1:
            return f"{self.median:.{digits}f} {unit}"
        return f"{self.median:.{digits}f} {unit} ({self.low:.{digits}f}–{self.high:.{digits}f}, n={self.n})"


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation, like numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Row:
    """One line of the Performance table."""

    what: str
    figure: str
    reference: str = "—"
    ratio: str = "—"
    target: str = "—"
    met: bool | None = None  # None: no target
    command: str = ""
    data: dict = field(default_factory=dict)

    def cells(self) -> list[str]:
        verdict = {True: "met", False: "**missed**", None: "—"}[self.met]
        return [self.what, self.figure, self.reference, self.ratio, self.target, verdict, f"`{self.command}`"]


HEADER = ["what", "trainfix", "reference (same run)", "ratio", "target", "", "command"]


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> dict:
    """Cores, memory and Python of this machine, for the table's caption."""
    mem = 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"cores": os.cpu_count(), "ram_gib": round(mem / 2**30, 1), "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(), "load_at_start": round(load, 1),
            "date": time.strftime("%Y-%m-%d")}


def save(name: str, rows: list[Row], extra: dict | None = None, m: dict | None = None) -> Path:
    """Write ``bench/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": m or machine(), "rows": [asdict(r) for r in rows], **(extra or {})},
                               indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def report(name: str, rows: list[Row], extra: dict | None = None, *, keep: bool = True) -> None:
    """Print the rows as a table and (unless ``keep`` is false: a smoke run) save them."""
    print(table(rows))
    if keep:
        print(f"\nJSON: {save(name, rows, extra).relative_to(ROOT)}")


def self_rss_mib() -> float:
    """Peak RSS of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
