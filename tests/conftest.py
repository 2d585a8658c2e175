"""Test isolation: offline hubs, and every test sees a clean TRAINFIX_* environment with a temp data dir."""

from __future__ import annotations

import os

import pytest

# Nothing may come from a model hub, in tests as at runtime.
for _var, _val in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_var, _val)


@pytest.fixture(scope="session")
def shared_data_dir(tmp_path_factory: pytest.TempPathFactory):
    """One index directory shared by the tests that only read it (building it costs seconds)."""
    return tmp_path_factory.mktemp("trainfix-data")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, shared_data_dir):
    for key in list(os.environ):
        if key.startswith("TRAINFIX_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TRAINFIX_DATA_DIR", str(shared_data_dir))
