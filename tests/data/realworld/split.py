"""Merge collected real-world cases and split them once, by source thread, into dev and test.

    python tests/data/realworld/split.py raw/*.jsonl   # writes dev.jsonl and test.jsonl beside this file

A case goes to ``test`` when the SHA-256 of its source thread (``owner/repo#N`` or URL) falls in
the lowest TEST_PERCENT of the hash range, so the split is fixed by the thread alone: nobody
chooses which cases are hard, and the same thread can never be on both sides. The first copy of a
thread wins when two collectors found it.

One content rule, applied before anyone looked at results: a case whose text shares a line of 40+
characters with the knowledge base (``kb/``, before case records were added) or with a dev case
goes to dev — canonical messages ("No space left on device", nvidia-smi table borders) would
otherwise make the leak check (``tests/test_realworld.py``) fail for text nobody copied.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

TEST_PERCENT = 40
HERE = Path(__file__).resolve().parent
FIELDS = ("id", "text", "labels", "kind", "lang", "source", "note", "fix")


def split_of(source: str) -> str:
    """'test' or 'dev' for a source thread."""
    digest = int(hashlib.sha256(source.strip().lower().encode("utf-8")).hexdigest()[:8], 16)
    return "test" if digest % 100 < TEST_PERCENT else "dev"


def _lines(text: str) -> set[str]:
    return {ln.strip() for ln in text.splitlines() if len(ln.strip()) >= 40}


def _kb_text() -> str:
    kb = HERE.parents[2] / "kb"
    parts = []
    for path in sorted(kb.rglob("*")):
        if path.is_file() and "cases" not in path.parts and path.suffix in {".yaml", ".json", ".md", ".txt", ".jsonl"}:
            parts.append(path.read_text(encoding="utf-8", errors="ignore"))
    return "\n".join(parts)


def main(paths: list[str]) -> None:
    seen: set[str] = set()
    ids: set[str] = set()
    out: dict[str, list[dict]] = {"dev": [], "test": []}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            case = json.loads(line)
            key = case["source"].strip().lower()
            if key in seen:
                continue
            seen.add(key)
            assert case["id"] not in ids, case["id"]
            ids.add(case["id"])
            out[split_of(case["source"])].append({k: case.get(k, "") for k in FIELDS})
    kb = _kb_text()
    dev_text = "\n".join(c["text"] for c in out["dev"])
    moved = True
    while moved:  # moving a case to dev adds its lines to dev: repeat until stable
        moved = False
        for c in list(out["test"]):
            if any(ln in kb or ln in dev_text for ln in _lines(c["text"])):
                out["test"].remove(c)
                out["dev"].append(c)
                dev_text += "\n" + c["text"]
                moved = True
    for name, cases in out.items():
        cases.sort(key=lambda c: c["id"])
        with (HERE / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        print(f"{name}: {len(cases)}")


if __name__ == "__main__":
    main(sys.argv[1:])
