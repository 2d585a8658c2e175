"""Every benchmark in one run, one table: `python -m bench.all [--update-readme] [--quick] [--smoke]`.

Runs bench.cold, bench.warm, bench.scan (100 MiB, and 1 GiB unless --quick), bench.ingest,
bench.retrieval (100 / 10k, and 100k records unless --quick) and bench.web in turn, prints the combined Markdown table (date, machine, each figure
with its reference, ratio and target, and the command that reproduces the row) and with
--update-readme rewrites the table in README.md's Performance section.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from bench.common import RESULTS, ROOT, Row, machine, save, table

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


def collect(quick: bool = False, smoke: bool = False, only: set[str] | None = None) -> list[Row]:
    """Run every benchmark (or those in ``only``); one that fails adds a row saying so and the others still run."""
    from bench import cold, ingest, retrieval, scan, warm, web

    steps = [
        ("cold", lambda: cold.run(1 if smoke else 7, smoke)),
        ("warm", lambda: warm.run(smoke)),
        ("scan 100 MiB", lambda: scan.run(1.0, 1, smoke=True) if smoke else scan.run(100.0, 3)),
    ]
    if not quick and not smoke:
        steps.append(("scan 1 GiB", lambda: scan.run(1024.0, 1)))
    steps += [
        ("ingest", lambda: ingest.run(1 if smoke or quick else 3, smoke)),
        ("retrieval", lambda: retrieval.run((20,), True) if smoke else
         retrieval.run((100, 10_000) if quick else (100, 10_000, 100_000))),
        ("web", lambda: web.run(2, 1, smoke=True) if smoke else web.run()),
    ]
    rows: list[Row] = []
    for name, step in steps:
        if only and name.split()[0] not in only:
            continue
        print(f"bench: {name}…", file=sys.stderr, flush=True)
        try:
            rows += step()
        except Exception as err:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
            traceback.print_exc()
            rows.append(Row(name, f"failed: {type(err).__name__}: {str(err)[:200]}", met=False,
                            command=f"python -m bench.{name.split()[0]}"))
    return rows


def _bench(row: Row) -> str:
    """The benchmark a row comes from: ``cold`` for ``python -m bench.cold …``."""
    return row.command.split()[2].split(".")[1]


def merge(previous: dict, rows: list[Row], m: dict, only: str) -> tuple[list[Row], dict]:
    """Re-measured rows replace theirs in the last run's table; the other rows are kept as they were (those of a
    re-measured benchmark that this run left out, e.g. with ``--quick``, marked "(earlier run)").

    A benchmark that failed this time keeps its previous rows (marked, with the failure) rather than
    losing its figures to one "failed" row. The caption says when each benchmark was last measured (why a
    figure changed is told by the commit that re-measured it, not by the table).
    """
    old = [Row(**r) for r in previous["rows"]]
    order = list(dict.fromkeys(_bench(r) for r in old))
    fresh: dict[str, list[Row]] = {}
    for r in rows:
        fresh.setdefault(_bench(r), []).append(r)
    merged: list[Row] = []
    measured = dict(previous["machine"].get("measured", {}))
    for name in order + [n for n in fresh if n not in order]:
        before = [r for r in old if _bench(r) == name]
        now = fresh.get(name)
        if now is None:
            merged += before
        elif before and all(r.figure.startswith("failed:") for r in now):
            note = now[0].figure
            merged += [Row(**{**r.__dict__, "figure": f"{r.figure} (previous run; re-run {note})"}) for r in before]
        else:
            # A partial re-run (--quick: no 1 GiB log, no 100k index) keeps the rows it did not measure, marked.
            again = {r.what for r in now}
            merged += now + [Row(**{**r.__dict__, "figure": r.figure if r.figure.endswith("(earlier run)")
                                    else f"{r.figure} (earlier run)"}) for r in before if r.what not in again]
            measured[name] = f"{m['date']} (load average {m['load_at_start']})"
    machine = {k: v for k, v in previous["machine"].items() if k != "rerun"}
    return merged, {**machine, "measured": measured}


def caption(m: dict) -> str:
    when: dict[str, list[str]] = {}
    for name, date in m.get("measured", {}).items():
        when.setdefault(date, []).append(name)
    last = "; ".join(f"{', '.join(names)} {date}" for date, names in sorted(when.items(), reverse=True))
    last = f" Last measured: {last}." if last else ""
    return (f"Measured {m['date']} on {m['cores']} cores, {m['ram_gib']} GiB RAM, Python {m['python']} "
            f"(load average {m['load_at_start']} at the start: the machine is shared, so every figure is next to "
            f"its reference measured in the same run).{last} Regenerate with `python -m bench.all --update-readme` "
            "(`make bench`).")


def update_readme(text: str) -> None:
    readme = ROOT / "README.md"
    body = readme.read_text(encoding="utf-8")
    if START not in body or END not in body:
        raise SystemExit(f"README.md has no {START} … {END} block to update")
    head, rest = body.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--quick", action="store_true", help="skip the 1 GiB log and the 100k-record index; one ingest")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that every benchmark runs")
    ap.add_argument("--only", help="re-run these benchmarks (e.g. cold,scan) and keep the other rows of the last run")
    args = ap.parse_args()
    m = machine()
    only = set(args.only.split(",")) if args.only else None
    rows = collect(args.quick, args.smoke, only)
    if only:
        previous = json.loads((RESULTS / "all.json").read_text(encoding="utf-8"))
        rows, m = merge(previous, rows, m, args.only)
    text = caption(m) + "\n\n" + table(rows)
    print(text)
    save("all", rows, m=m)
    if args.update_readme and not args.smoke:
        update_readme(text)


if __name__ == "__main__":
    main()
