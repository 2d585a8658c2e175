"""The fixed failure-mode taxonomy (15 modes in 5 categories), loaded from ``taxonomy.yaml``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kb.yamlio import load_yaml

FailureMode = Literal[
    "nan-loss", "loss-spike", "gradient-explosion",
    "cuda-oom", "cpu-oom", "disk-full",
    "token-out-of-range", "data-format-error", "data-imbalance",
    "distributed-sync-failure", "checkpoint-corruption", "network-timeout",
    "slow-training", "low-gpu-utilization", "communication-bottleneck",
]
Category = Literal["numeric", "memory", "data", "infrastructure", "performance"]

_FILE = Path(__file__).with_name("taxonomy.yaml")


class Mode(BaseModel):
    """One failure mode: its id, category and names in both languages."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: FailureMode
    category: Category
    zh: str
    en: str


@lru_cache(maxsize=1)
def modes() -> tuple[Mode, ...]:
    """All 15 modes in display order."""
    data = load_yaml(_FILE)
    out = [Mode(category=c["id"], **m) for c in data["categories"] for m in c["modes"]]
    return tuple(out)


@lru_cache(maxsize=1)
def categories() -> dict[str, dict[str, str]]:
    """Category id -> {"zh": ..., "en": ...}."""
    data = load_yaml(_FILE)
    return {c["id"]: {"zh": c["zh"], "en": c["en"]} for c in data["categories"]}


def mode(mode_id: str) -> Mode:
    """The mode with this id; ``KeyError`` if it is not in the taxonomy."""
    for m in modes():
        if m.id == mode_id:
            return m
    raise KeyError(mode_id)


MODE_IDS: tuple[str, ...] = (
    "nan-loss", "loss-spike", "gradient-explosion",
    "cuda-oom", "cpu-oom", "disk-full",
    "token-out-of-range", "data-format-error", "data-imbalance",
    "distributed-sync-failure", "checkpoint-corruption", "network-timeout",
    "slow-training", "low-gpu-utilization", "communication-bottleneck",
)
