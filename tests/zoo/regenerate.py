"""Rerun zoo cases for real and rewrite their fixtures: `python -m tests.zoo.regenerate [CASE ...]`.

For each case: run the script (hard timeout), check the run reproduced the failure (expected exit
code, every expected evidence line present), normalise volatile parts, and rewrite
`fixtures/<case>.log` + `.json` — printing whether each fixture changed (with a short diff) and,
when `assistant.triage` is importable, what the diagnosis says about the new log. A run that does
not reproduce its failure is reported and its fixture left alone; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time

from .catalogue import CaseSpec, Sidecar, case_by_id, lines_of, load_cases, read_fixture, write_fixture
from .diagnosis import check_diagnosis
from .runner import CaseRun, run_case, versions


def reproduction_problems(run: CaseRun) -> list[str]:
    """Why a run does not count as reproducing its case's failure (empty if it does)."""
    problems = []
    if run.timed_out:
        problems.append(f"timed out after {run.case.timeout_s} s")
    if run.exit_code != run.case.exit_code:
        problems.append(f"exit code {run.exit_code}, expected {run.case.exit_code}")
    lines = lines_of(run.text)
    for expected in run.case.evidence:
        if not any(expected.matches(line) for line in lines):
            problems.append(f"no output line {expected.describe()}")
    return problems


def sidecar_for(run: CaseRun) -> Sidecar:
    case = run.case
    return Sidecar(
        case=case.id,
        command=run.command,
        cwd="a fresh temporary directory (recorded as " + f"/tmp/zoo/{case.id})",
        env=run.env,
        exit_code=run.exit_code,
        versions=versions(),
        failure_mode=case.failure_mode,
        acceptable_second=case.acceptable_second,
        why=case.why,
        expected_evidence=case.evidence,
        normalised=run.normalised,
    )


def _diff_summary(case: CaseSpec, new_text: str, limit: int = 12) -> str:
    if not case.log_path.exists():
        return f"new fixture ({len(lines_of(new_text))} lines)"
    old_text, _ = read_fixture(case)
    if old_text == new_text:
        return "log unchanged"
    diff = list(difflib.unified_diff(
        old_text.splitlines(), new_text.splitlines(), "old", "new", lineterm="", n=0,
    ))
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    shown = [d for d in diff[2:] if not d.startswith("@@")][:limit]
    more = "\n      …" if len(diff) - 2 > limit else ""
    return f"log changed (+{added} -{removed} lines)\n" + "\n".join("      " + d for d in shown) + more


def regenerate(case: CaseSpec, *, write: bool = True) -> bool:
    """Rerun one case and (if it reproduced) rewrite its fixture. Returns whether it reproduced."""
    run = run_case(case)
    print(f"{case.id}: exit {run.exit_code} in {run.seconds:.1f} s, {len(run.text.encode())} bytes")
    problems = reproduction_problems(run)
    if problems:
        print("  NOT REPRODUCED, fixture left as is: " + "; ".join(problems))
        tail = "\n".join(lines_of(run.text)[-15:])
        print("  last output lines:\n" + "\n".join("    | " + line for line in tail.split("\n")))
        return False
    sidecar = sidecar_for(run)
    print("  " + _diff_summary(case, run.text))
    if case.sidecar_path.exists():
        _, old = read_fixture(case)
        if old != sidecar:
            changed = [k for k in Sidecar.model_fields if getattr(old, k) != getattr(sidecar, k)]
            print(f"  sidecar changed: {', '.join(changed)}")
    if write:
        write_fixture(case, run.text, sidecar)
    print("  diagnosis: " + check_diagnosis(run.text, case).summary())
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.zoo.regenerate", description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help="case ids (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="run and compare, write nothing")
    args = parser.parse_args(argv)
    try:
        cases = [case_by_id(c) for c in args.cases] if args.cases else list(load_cases())
    except KeyError as err:
        print(err.args[0], file=sys.stderr)
        return 2
    start = time.monotonic()
    failed = [c.id for c in cases if not regenerate(c, write=not args.dry_run)]
    print(f"{len(cases)} case(s) in {time.monotonic() - start:.1f} s; not reproduced: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
