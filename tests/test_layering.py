"""The layering contract kb ← assistant ← ingest ← app, checked on every import statement (lazy ones inside
functions included), as sqlfluff's import-linter contract does; and ``app`` reads nothing from ``tests/``
(a wheel does not ship it). ``tests/`` and ``bench/`` may import anything; nothing imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["kb", "assistant", "ingest", "app"]  # each may import only the layers before it
NEVER = {"tests", "bench", "scripts"}


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _violations(package: str) -> list[str]:
    allowed = set(LAYERS[: LAYERS.index(package) + 1])
    forbidden = (set(LAYERS) - allowed) | NEVER
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in _imports(path):
            top = module.split(".", 1)[0]
            if top in forbidden:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return out


@pytest.mark.parametrize("package", LAYERS)
def test_layer_imports_only_lower_layers(package):
    assert _violations(package) == []


def test_the_check_sees_a_lazy_import(tmp_path):
    bad = tmp_path / "kb"
    bad.mkdir()
    (bad / "x.py").write_text("def f():\n    from assistant.errors import InputError\n")
    found = [m for _, m in _imports(bad / "x.py")]
    assert found == ["assistant.errors"]


def test_app_reads_nothing_from_tests():
    """No path into tests/ in app/ (string literals naming it, or path joins with a "tests" part)."""
    out = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                v = node.value
                if v == "tests" or v.startswith("tests/") or "/tests/" in v:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {v!r}")
    assert out == []
