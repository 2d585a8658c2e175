"""Run a zoo case script in a subprocess and turn its raw output into a stable fixture text."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .catalogue import CaseSpec

REPO_ROOT = Path(__file__).resolve().parents[2]

# Placeholders that keep each volatile value's shape, so text that matches on `pid 123`, a port
# or a log timestamp still matches after normalisation.
FIXED_PORT = 29500
FIXED_EPHEMERAL_PORT = 50000
FIRST_PID = 1001
FIXED_GLOG_TIME = "0101 00:00:00.000000"
FIXED_DATETIME = "2000-01-01_00:00:00"


def base_env(tmp: Path) -> dict[str, str]:
    """Variables every case runs with (on top of the caller's environment)."""
    # No hub access; caches and temp files inside the run's temp dir; one thread per process
    # (2 shared cores); unbuffered output so stdout and stderr interleave in the order written.
    return {
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp / "hf"),
        "HF_DATASETS_CACHE": str(tmp / "hf" / "datasets"),
        "TORCH_HOME": str(tmp / "torch"),
        "TMPDIR": str(tmp),
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # gloo talks over loopback only.
        "GLOO_SOCKET_IFNAME": "lo",
    }


@dataclass(frozen=True)
class CaseRun:
    """One real run of a case: the raw combined output and how the run ended."""

    case: CaseSpec
    raw: str
    text: str  # `raw` after `normalise_output`
    exit_code: int
    timed_out: bool
    seconds: float
    command: list[str]  # as recorded: interpreter shown as `python`, port normalised
    env: dict[str, str]  # as recorded: temp dir normalised
    normalised: list[str]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the launcher binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recorded_tmp(case: CaseSpec) -> str:
    """The stable path that stands for a run's random temp dir in fixtures."""
    return f"/tmp/zoo/{case.id}"


def _command(case: CaseSpec, port: int | None) -> list[str]:
    script = str(case.script)
    if case.launcher == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run",
            "--nproc-per-node", str(case.nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(port),
            script,
        ]
    return [sys.executable, script]


PORT_TRIES = 5  # torchrun binds the master port a moment after free_port(): a port taken in between is re-picked


def run_case(case: CaseSpec) -> CaseRun:
    """Run `cases/<id>.py` for real (fresh temp dir as cwd, hard timeout) and capture stdout+stderr."""
    for _ in range(PORT_TRIES - 1):
        run = _run_case(case, free_port() if case.launcher == "torchrun" else None)
        if case.launcher != "torchrun" or "address already in use" not in run.raw.lower():
            return run
    return _run_case(case, free_port())


def _run_case(case: CaseSpec, port: int | None) -> CaseRun:
    tmp = Path(tempfile.mkdtemp(prefix=f"zoo-{case.id}-"))
    command = _command(case, port)
    env = {**os.environ, **base_env(tmp), **case.env}
    start = time.monotonic()
    timed_out = False
    try:
        # Own session, so a timeout can kill the launcher and every rank/worker it started.
        proc = subprocess.Popen(
            command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=case.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        seconds = time.monotonic() - start
        try:  # nothing the case started may outlive it (e.g. an orphaned worker or rank)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    raw = out.decode("utf-8", errors="replace")
    text, normalised = normalise_output(raw, tmp=str(tmp), stand_in=recorded_tmp(case), port=port)
    recorded_command = ["python", *[_relative(a) for a in command[1:]]]
    if port is not None:
        recorded_command = [str(FIXED_PORT) if a == str(port) else a for a in recorded_command]
    recorded_env = {k: v.replace(str(tmp), recorded_tmp(case)) for k, v in {**base_env(tmp), **case.env}.items()}
    return CaseRun(case, raw, text, proc.returncode, timed_out, seconds, recorded_command, recorded_env, normalised)


def _relative(arg: str) -> str:
    path = Path(arg)
    if path.is_absolute() and path.is_relative_to(REPO_ROOT):
        return str(path.relative_to(REPO_ROOT))
    return arg


# --- normalisation -----------------------------------------------------------------------------

# Where a process id appears in PyTorch / torchrun / Python output. Group 1 holds the id(s).
_PID_PATTERNS = [
    re.compile(r"\b[Pp][Ii][Dd](?:\(s\))?:? (\d+(?:, \d+)*)"),  # pid 12, pid(s) 12, 13, (pid: 12), PID 12
    re.compile(r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6,9} +(\d+) ", re.M),  # glog: E1202 14:32:04.227000 5484 file:line]
    re.compile(r"\bprocess (\d+) closing signal\b"),  # torchrun: Sending process 5542 closing signal SIGTERM
]
# glog (`E1202 14:32:04.227000`) and c10d's C++ log (`[W1202 14:40:21.864093137 socket.cpp:469]`).
_GLOG_TIME = re.compile(r"^(\[?[IWEF])\d{4} \d\d:\d\d:\d\d\.(\d{6,9})\b", re.M)
# A loopback peer's port, e.g. c10d `addr=[::ffff:127.0.0.1]:38270` or gloo `Connection closed by
# peer [127.0.0.1]:28360`: ephemeral unless it is the launcher's port.
_LOOPBACK_PORT = re.compile(r"(\[(?:127\.0\.0\.1|::1|::ffff:127\.0\.0\.1)\]:)(\d+)\b")
_TORCHRUN_TIME = re.compile(r"\b\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d\b")
_LOGGING_TIME = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\b")
# The Trainer's closing summary: wall-clock measurements, different on every run.
_TRAINER_TIMING = re.compile(
    r"('(?:train_runtime|train_samples_per_second|train_steps_per_second)': )'[0-9.e+-]+'"
)


def normalise_output(raw: str, *, tmp: str, stand_in: str, port: int | None) -> tuple[str, list[str]]:
    """Replace only the parts of a run's output that change from run to run; keep the rest verbatim.

    - the run's random temp dir → `stand_in` (`/tmp/zoo/<case>`),
    - process ids (after `pid`, `pid(s)`, `(pid: …)`, `PID`, in glog prefixes and torchrun's
      `Sending process N closing signal`) → 1001, 1002, … in order of first appearance,
    - the launcher's free port → 29500, any other port of a bracketed loopback peer
      (`addr=[::ffff:127.0.0.1]:38270`, `peer [127.0.0.1]:28360`) → 50000,
    - glog / c10d timestamps (`E1202 14:32:04.227000`, `[W1202 14:40:21.864093137`) → `E0101 00:00:00.000000`
      (same number of fraction digits); torchrun's
      `2026-12-02_14:32:04` → `2000-01-01_00:00:00`; `logging` times → `2000-01-01 00:00:00,000`,
    - the Trainer summary's `train_runtime` / `*_per_second` values → `'<measured>'`.

    Line structure, order, tracebacks, messages, numbers in messages, `\\r` redraws are untouched.
    Returns the text and the list of kinds that were actually replaced (for the sidecar).
    """
    done: list[str] = []
    text = raw
    for path in {tmp, os.path.realpath(tmp)}:
        if path in text:
            text = text.replace(path, stand_in)
            done.append("temp-dir")
    # Number pids by where they first appear in the text, so re-normalising a fixture is a no-op.
    found = sorted((m.start(1), m.group(1)) for p in _PID_PATTERNS for m in p.finditer(text))
    pid_map: dict[str, str] = {}
    for _, ids in found:
        for pid in re.findall(r"\d+", ids):
            pid_map.setdefault(pid, str(FIRST_PID + len(pid_map)))

    def _sub_ids(m: re.Match[str]) -> str:
        start, end = m.span(1)
        ids = re.sub(r"\d+", lambda d: pid_map[d.group(0)], m.group(1))
        return m.group(0)[: start - m.start()] + ids + m.group(0)[end - m.start():]

    for pattern in _PID_PATTERNS:
        text = pattern.sub(_sub_ids, text)
    if pid_map:
        done.append("pids")
    if port is not None and re.search(rf"\b{port}\b", text):
        text = re.sub(rf"\b{port}\b", str(FIXED_PORT), text)
        done.append("port")
    for pattern, repl, kind in (
        (_LOOPBACK_PORT,
         lambda m: m.group(1) + (m.group(2) if m.group(2) == str(FIXED_PORT) else str(FIXED_EPHEMERAL_PORT)),
         "port"),
        (_GLOG_TIME, lambda m: m.group(1) + FIXED_GLOG_TIME[:-6] + "0" * len(m.group(2)), "timestamps"),
        (_TORCHRUN_TIME, FIXED_DATETIME, "timestamps"),
        (_LOGGING_TIME, "2000-01-01 00:00:00,000", "timestamps"),
        (_TRAINER_TIMING, r"\g<1>'<measured>'", "trainer-timings"),
    ):
        text, n = pattern.subn(repl, text)
        if n and kind not in done:
            done.append(kind)
    return text, done


def versions() -> dict[str, str]:
    """Python and library versions of the interpreter the cases run with."""
    out = {"python": ".".join(map(str, sys.version_info[:3]))}
    for dist in ("torch", "transformers", "datasets", "safetensors"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out
