"""YAML loading for the knowledge base's data files: libyaml's C loader when present (about 10x faster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str | Path) -> Any:
    """Parse a trusted YAML data file (safe loader: plain data only)."""
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - safe loader
