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
