"""The README's Python API example runs as written and does what its comments say."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_api_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_python_api_example_runs():
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(_python_api_block(), "README.md", "exec"), namespace)  # noqa: S102 - our own README
    printed = out.getvalue()
    assert printed.startswith("cuda-oom 0.9")
    assert namespace["first"].candidates[0].failure_mode == "nan-loss"
    assert "precision" in [f.id for f in namespace["first"].follow_up]
    assert namespace["again"].candidates[0].causes[0].id != "fp16-overflow"
    assert namespace["first"].candidates[0].causes[0].id == "fp16-overflow"


def _example_blocks(readme: str):
    """``(input path, shown lines)`` of each README example that starts with ``$ trainfix diagnose docs/examples/…``."""
    import re

    for m in re.finditer(r"````text\n\$ trainfix diagnose (docs/examples/\S+)\n(.*?)\n````", readme, re.S):
        yield m.group(1), [ln for ln in m.group(2).splitlines() if ln.strip() and ln.strip() != "..."]


def test_readme_examples_are_what_diagnose_prints_today():
    from app.render import markdown
    from assistant import Assistant

    root = Path(__file__).resolve().parent.parent
    blocks = list(_example_blocks((root / "README.md").read_text(encoding="utf-8")))
    assert len(blocks) >= 2
    assistant = Assistant(retrieval="auto")
    for path, shown in blocks:
        out = [ln.rstrip() for ln in markdown(assistant.diagnose_file(root / path)).splitlines()]
        missing = [ln for ln in shown if ln.rstrip() not in out]
        assert not missing, f"{path}: README shows lines trainfix no longer prints: {missing[:3]}"
