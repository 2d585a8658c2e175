"""The zoo's case list (`cases.yaml`) and its fixtures (`fixtures/<case>.log` + `<case>.json`)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kb.taxonomy import FailureMode

ZOO_DIR = Path(__file__).resolve().parent
CASES_DIR = ZOO_DIR / "cases"
FIXTURES_DIR = ZOO_DIR / "fixtures"
CASES_FILE = ZOO_DIR / "cases.yaml"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectedEvidence(_Model):
    """A line the diagnosis must point at: it contains `contains`, or `regex` is found in it."""

    contains: str | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ExpectedEvidence:
        if (self.contains is None) == (self.regex is None):
            raise ValueError("give exactly one of 'contains' or 'regex'")
        if self.regex is not None:
            re.compile(self.regex)
        return self

    def matches(self, line: str) -> bool:
        """Whether this expectation is met by one line of output."""
        if self.contains is not None:
            return self.contains in line
        # Our own captured output (never user input), so Python `re` is fine here.
        return re.search(self.regex or "", line) is not None

    def describe(self) -> str:
        return f"contains {self.contains!r}" if self.contains is not None else f"matches /{self.regex}/"


class CaseSpec(_Model):
    """One zoo case: how to run `cases/<id>.py` and what its output must be diagnosed as."""

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    failure_mode: FailureMode
    acceptable_second: list[FailureMode] = []
    why: str
    exit_code: int
    evidence: list[ExpectedEvidence] = Field(min_length=1)
    launcher: Literal["python", "torchrun"] = "python"
    nproc: int = Field(default=2, ge=2, le=2)
    timeout_s: int = Field(default=60, ge=5, le=60)
    env: dict[str, str] = {}
    known_gap: str | None = Field(
        default=None,
        description="why the diagnosis currently gets this case wrong; its diagnosis tests are then "
        "strict xfails, which fail as soon as the diagnosis gets it right (then delete this)",
    )

    @property
    def script(self) -> Path:
        return CASES_DIR / f"{self.id}.py"

    @property
    def log_path(self) -> Path:
        return FIXTURES_DIR / f"{self.id}.log"

    @property
    def sidecar_path(self) -> Path:
        return FIXTURES_DIR / f"{self.id}.json"


class Sidecar(_Model):
    """What `fixtures/<case>.json` records about the run that produced `<case>.log`."""

    case: str
    command: list[str]
    cwd: str
    env: dict[str, str]
    exit_code: int
    versions: dict[str, str]
    failure_mode: FailureMode
    acceptable_second: list[FailureMode]
    why: str
    expected_evidence: list[ExpectedEvidence]
    normalised: list[str] = Field(description="which volatile parts of the log were normalised")


class _CasesFile(_Model):
    cases: list[CaseSpec]


@lru_cache(maxsize=1)
def load_cases() -> tuple[CaseSpec, ...]:
    """All cases from `cases.yaml`, in file order (ids unique, every script present)."""
    data = _CasesFile.model_validate(yaml.safe_load(CASES_FILE.read_text(encoding="utf-8")))
    ids = [c.id for c in data.cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{CASES_FILE}: duplicate case ids {duplicates}")
    missing = [str(c.script) for c in data.cases if not c.script.is_file()]
    if missing:
        raise ValueError(f"{CASES_FILE}: case scripts missing: {missing}")
    return tuple(data.cases)


def case_by_id(case_id: str) -> CaseSpec:
    for case in load_cases():
        if case.id == case_id:
            return case
    raise KeyError(f"no zoo case {case_id!r}; known: {', '.join(c.id for c in load_cases())}")


def read_fixture(case: CaseSpec) -> tuple[str, Sidecar]:
    """The stored log text (exactly as written) and its sidecar."""
    text = case.log_path.read_bytes().decode("utf-8")
    sidecar = Sidecar.model_validate_json(case.sidecar_path.read_text(encoding="utf-8"))
    return text, sidecar


def write_fixture(case: CaseSpec, text: str, sidecar: Sidecar) -> None:
    FIXTURES_DIR.mkdir(exist_ok=True)
    case.log_path.write_bytes(text.encode("utf-8"))
    payload = sidecar.model_dump(mode="json", exclude_none=True)
    case.sidecar_path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def lines_of(text: str) -> list[str]:
    """The text's lines as the diagnosis numbers them: only '\\n' starts a line (a '\\r' does not)."""
    return text.split("\n")
