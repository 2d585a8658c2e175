"""A broken rule, tree, out-of-domain, causality or frame-context file is an error at load — exit code 2 naming the file
and the line — never a quiet abstention with exit code 0."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.errors import KnowledgeBaseError
from assistant.triage import triage

ROOT = Path(__file__).resolve().parent.parent
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _kb_copy(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    shutil.copytree(ROOT / "kb", kb, ignore=shutil.ignore_patterns("sources", "translations"))
    return kb


def _break_yaml_syntax(kb: Path) -> tuple[Path, int]:
    path = kb / "tree.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(9, "  : [unclosed")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, 10


def _bad_rule_pattern(kb: Path) -> tuple[Path, int]:
    path = kb / "rules" / "cuda-oom.yaml"
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.strip().startswith("- id:"))
    j = next(n for n in range(i, len(lines)) if lines[n].strip().startswith("patterns:"))
    lines.insert(j + 1, lines[j].split("patterns:")[0] + "  - '(unbalanced'")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, i + 1


def _unknown_mode_in_tree(kb: Path) -> tuple[Path, int | None]:
    path = kb / "causality.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\nnot_a_field: 1\n", encoding="utf-8")
    return path, None


def _unknown_mode_in_frame_context(kb: Path) -> tuple[Path, int | None]:
    path = kb / "frames.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("failure_mode: data-format-error", "failure_mode: data-format-eror", 1), encoding="utf-8")
    return path, None


BREAKS = [_break_yaml_syntax, _bad_rule_pattern, _unknown_mode_in_tree, _unknown_mode_in_frame_context]


@pytest.mark.parametrize("breaker", BREAKS, ids=lambda f: f.__name__.strip("_"))
def test_broken_kb_file_raises_with_file_and_line(tmp_path, breaker):
    kb = _kb_copy(tmp_path)
    path, line = breaker(kb)
    with pytest.raises(KnowledgeBaseError) as info:
        triage(OOM, kb_dir=kb)
    message = str(info.value)
    assert str(path) in message
    if line is not None:
        assert f"line {line}" in message, message


@pytest.mark.parametrize("command", ["triage", "diagnose"])
def test_cli_exits_2_with_file_and_line(tmp_path, command):
    kb = _kb_copy(tmp_path)
    path, line = _break_yaml_syntax(kb)
    proc = subprocess.run([sys.executable, "-m", "app.cli", command, "--retrieval", "never", "-"] if command == "diagnose"
                          else [sys.executable, "-m", "app.cli", command, "-"], input=OOM, capture_output=True, text=True,
                          cwd=ROOT, env={**__import__("os").environ, "TRAINFIX_KB_DIR": str(kb)}, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"{path}, line {line}" in proc.stderr
    assert "Traceback" not in proc.stderr
