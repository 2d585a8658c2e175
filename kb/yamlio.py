"""YAML loading for the knowledge base's data files: libyaml's C loader when present (about 10x faster).

:func:`where` turns a YAML or validation error into ``file, line N`` so a broken knowledge-base
file is reported where it is broken (``trainfix`` exits 2 with that message).

PyYAML is imported when a file is parsed, not with this module: a fresh ``trainfix diagnose`` reads the
knowledge base from snapshots (``assistant.snapshot``) and never parses YAML, and importing PyYAML was
~30 ms of it. A parse error is re-raised as :class:`YAMLError`, which carries PyYAML's marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


class YAMLError(ValueError):
    """A data file that is not valid YAML (PyYAML's error, with the marks :func:`where` reads)."""

    def __init__(self, err: Exception) -> None:
        super().__init__(str(err))
        self.problem = getattr(err, "problem", None)
        self.problem_mark = getattr(err, "problem_mark", None)
        self.context_mark = getattr(err, "context_mark", None)


def load_yaml(path: str | Path) -> Any:
    """Parse a trusted YAML data file (safe loader: plain data only); :class:`YAMLError` if it does not parse."""
    import yaml

    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"),  # noqa: S506 - safe loader
                         Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        raise YAMLError(err) from err


def line_of(path: str | Path, loc: Sequence[str | int]) -> int | None:
    """1-based line of the YAML node at ``loc`` (mapping keys and list indexes), or of its nearest parent."""
    import yaml

    try:
        node = yaml.compose(Path(path).read_text(encoding="utf-8"),  # noqa: S506 - safe loader
                            Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == str(key)), None)
            if child is None:  # the key itself is missing or is the problem: point at the mapping
                break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            child = node.value[key]
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line


def where(path: str | Path, err: Exception, prefix: Sequence[str | int] = (), label: str = "") -> str:
    """``<path>, line N: [label: ]<what is wrong>`` for a YAML syntax error or a pydantic validation error."""
    label = f"{label}: " if label else ""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    if mark is not None:
        return f"{path}, line {mark.line + 1}: {label}{getattr(err, 'problem', None) or err}"
    errors = getattr(err, "errors", None)
    if callable(errors):
        first = errors()[0] if errors() else {}
        loc = [*prefix, *first.get("loc", ())]
        line = line_of(path, loc)
        field = ".".join(str(p) for p in loc) or "(top level)"
        count = len(errors())
        more = f" (and {count - 1} more problem(s))" if count > 1 else ""
        at = f", line {line}" if line else ""
        return f"{path}{at}: {label}{field}: {first.get('msg', err)}{more}"
    return f"{path}: {label}{err}"
