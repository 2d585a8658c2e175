"""Test isolation: offline hubs, and every test sees a clean TRAINFIX_* environment with a temp data dir."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Nothing may come from a model hub, in tests as at runtime.
for _var, _val in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_var, _val)


# Property tests run the same examples on every machine and every run (HYPOTHESIS_PROFILE=long: a long random run).
settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=20_000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def shared_data_dir(tmp_path_factory: pytest.TempPathFactory):
    """One index directory shared by the tests that only read it (building it costs seconds)."""
    return tmp_path_factory.mktemp("trainfix-data")


@pytest.fixture(scope="session", autouse=True)
def _session_env(shared_data_dir):
    """The same for module- and session-scoped fixtures, which are built before a test's own environment:
    an ``Assistant()`` made by a module fixture must not read or rebuild the user's index either."""
    patch = pytest.MonkeyPatch()
    for key in [k for k in os.environ if k.startswith("TRAINFIX_")]:
        patch.delenv(key)
    patch.setenv("TRAINFIX_DATA_DIR", str(shared_data_dir))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, shared_data_dir):
    for key in list(os.environ):
        if key.startswith("TRAINFIX_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TRAINFIX_DATA_DIR", str(shared_data_dir))
