"""Settings read ``TRAINFIX_*`` from arguments, the environment and ``.env``, in that order of precedence."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from assistant.config import Settings, environment


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in list(__import__("os").environ):
        if name.upper().startswith("TRAINFIX_"):
            monkeypatch.delenv(name)
    return tmp_path


def test_defaults_without_environment(in_tmp):
    s = Settings()
    assert s.collection == "trainfix"
    assert s.chroma_url is None
    assert s.watch_min_confidence == 0.5


def test_environment_converts_types_and_names_are_case_insensitive(in_tmp, monkeypatch):
    monkeypatch.setenv("TRAINFIX_DATA_DIR", str(in_tmp / "d"))
    monkeypatch.setenv("trainfix_watch_memory_steps", "12")
    monkeypatch.setenv("TRAINFIX_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("TRAINFIX_NOT_A_FIELD", "x")  # ignored, like any other variable
    s = Settings()
    assert s.data_dir == in_tmp / "d"
    assert s.watch_memory_steps == 12
    assert s.llm_api_key.get_secret_value() == "sk-test"
    assert "sk-test" not in repr(s)


def test_dotenv_is_read_and_the_environment_wins_over_it(in_tmp, monkeypatch):
    (in_tmp / ".env").write_text('TRAINFIX_COLLECTION="from-file"\nexport TRAINFIX_CHROMA_URL=http://h:1\n'
                                 "# TRAINFIX_LLM_MODEL=commented\n", encoding="utf-8")
    s = Settings()
    assert (s.collection, s.chroma_url, s.llm_model) == ("from-file", "http://h:1", None)
    monkeypatch.setenv("TRAINFIX_COLLECTION", "from-env")
    assert Settings().collection == "from-env"


def test_arguments_win_over_environment(in_tmp, monkeypatch):
    monkeypatch.setenv("TRAINFIX_COLLECTION", "from-env")
    assert Settings(collection="arg").collection == "arg"


def test_invalid_value_is_a_validation_error_naming_the_field(in_tmp, monkeypatch):
    monkeypatch.setenv("TRAINFIX_WATCH_MIN_CONFIDENCE", "2")
    with pytest.raises(ValidationError, match="watch_min_confidence"):
        Settings()


def test_subclass_fields_are_read_too(in_tmp, monkeypatch):
    from app.slack_settings import SlackSettings

    monkeypatch.setenv("TRAINFIX_SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("TRAINFIX_COLLECTION", "c")
    s = SlackSettings()
    assert (s.slack_bot_token.get_secret_value(), s.collection) == ("xoxb-1", "c")


def test_environment_helper_takes_explicit_sources(tmp_path):
    env_file = tmp_path / "custom.env"
    env_file.write_text("TRAINFIX_A=file\nTRAINFIX_B=file\n", encoding="utf-8")
    got = environment(["a", "b", "c"], environ={"TRAINFIX_B": "env", "OTHER": "x"}, env_file=env_file)
    assert got == {"a": "file", "b": "env"}
    assert environment(["a"], environ={}, env_file=Path(tmp_path / "missing")) == {}
