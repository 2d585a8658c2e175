"""Where an exception was raised (``kb/frames.yaml``): the traceback's frames name the failure.

``KeyError: 17`` says nothing on its own; raised in ``pycocotools/coco.py`` ``loadImgs`` it is an
annotation file the loader cannot use. Contexts are data like the signature rules: an exception type,
an optional message pattern, and patterns on the innermost frames' file paths and function names
(RE2), with inline ``match`` / ``no_match`` examples that tests/test_frames.py runs through the triage.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assistant.errors import KnowledgeBaseError
from assistant.models import TracebackInfo
from assistant.signatures import Examples, Strength, _check_re2, _compiled
from kb.taxonomy import MODE_IDS
from kb.yamlio import YAMLError, load_yaml, where


class FrameContext(BaseModel):
    """An exception raised inside code of a kind (reading data, loading weights) that names a failure mode."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9-]+$")
    failure_mode: str
    strength: Strength
    description: str
    exceptions: list[str] = Field(min_length=1)
    message: str | None = None
    message_not: str | None = None
    innermost: int = Field(default=6, ge=1, le=50)
    files: list[str] = []
    functions: list[str] = []
    frames_not: str | None = None
    examples: Examples

    @field_validator("failure_mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        if v not in MODE_IDS:
            raise ValueError(f"unknown failure mode {v!r}")
        return v

    @field_validator("files", "functions")
    @classmethod
    def _re2_list(cls, v: list[str]) -> list[str]:
        return [_check_re2(p, True) for p in v]

    @model_validator(mode="after")
    def _some_frames(self) -> FrameContext:
        if not self.files and not self.functions:
            raise ValueError("a context needs `files` or `functions` patterns")
        return self

    @field_validator("message", "message_not", "frames_not")
    @classmethod
    def _re2(cls, v: str | None) -> str | None:
        return None if v is None else _check_re2(v, True)

    def fires_on(self, tb: TracebackInfo) -> bool:
        """Whether this python traceback was raised in this context."""
        if tb.kind != "python" or not tb.exc_type or tb.exc_type.rsplit(".", 1)[-1] not in self.exceptions:
            return False
        message = tb.message or ""
        if self.message and not _compiled(self.message, True).search(message):
            return False
        if self.message_not and _compiled(self.message_not, True).search(message):
            return False
        inner = tb.frames[-self.innermost:]
        if self.frames_not and any(_compiled(self.frames_not, True).search(p) for f in inner for p in (f.file, f.function)):
            return False
        return any(_compiled(pat, True).search(f.file) for pat in self.files for f in inner) or any(
            _compiled(pat, True).search(f.function) for pat in self.functions for f in inner)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    contexts: list[FrameContext]


def load_frames(path: Path | None = None) -> tuple[FrameContext, ...]:
    """Load ``kb/frames.yaml`` (or ``path``); a missing file means no frame contexts."""
    if path is None:
        from assistant.config import KB_DIR

        path = KB_DIR / "frames.yaml"
    return _load(Path(path))


@lru_cache(maxsize=4)
def _load(path: Path) -> tuple[FrameContext, ...]:
    if not path.is_file():
        return ()
    try:
        data = _File.model_validate(load_yaml(path))
    except (ValidationError, YAMLError) as err:
        raise KnowledgeBaseError(f"invalid frame contexts: {where(path, err)}") from None
    ids = [c.id for c in data.contexts]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise KnowledgeBaseError(f"{path.name}: duplicate ids {sorted(dup)}")
    return tuple(data.contexts)


def contexts_hit(contexts: tuple[FrameContext, ...], tracebacks: list[TracebackInfo]) -> list[tuple[FrameContext, TracebackInfo]]:
    """Each (context, traceback) pair where the traceback was raised in that context, first traceback first."""
    return [(c, tb) for tb in tracebacks for c in contexts if c.fires_on(tb)]
