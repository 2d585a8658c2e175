"""Secret redaction: applied to untrusted text before it is stored, posted or sent to an LLM.

Patterns are data (``kb/secrets.yaml``), compiled with RE2 so matching is linear-time whatever
the input. Redaction keeps the line count, so evidence line numbers stay valid.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import re2
from pydantic import BaseModel, ConfigDict

from kb.yamlio import load_yaml

_FILE = Path(__file__).resolve().parent.parent / "kb" / "secrets.yaml"
_BEGIN = "-----BEGIN "
_KEY_END = "PRIVATE KEY-----"


class SecretPattern(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    pattern: str
    note: str | None = None
    min_length: int = 0  # a shorter secret is left alone
    examples: dict[str, list[str]]


class Redaction(BaseModel):
    """Redacted text and what was removed (kinds only — never the secret itself)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str
    count: int
    kinds: list[str]


@lru_cache(maxsize=1)
def patterns() -> tuple[SecretPattern, ...]:
    """The secret patterns from ``kb/secrets.yaml``."""
    from assistant.snapshot import cached

    # from a snapshot keyed by the file's content: a fresh process answers without importing a YAML parser
    return cached("secrets", [_FILE],
                  lambda: tuple(SecretPattern.model_validate(p) for p in load_yaml(_FILE)["patterns"]))


def _options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = 64 << 20
    return opts


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, re2._Regexp, int], ...]:
    return tuple((p.id, re2.compile(p.pattern, _options()), p.min_length)
                 for p in patterns() if p.id != "private-key-block")


@lru_cache(maxsize=1)
def _prefilter():
    """All line patterns in one RE2 set: one pass says which of them occur in a line (most lines: none)."""
    found = re2.Set.SearchSet(_options())
    for _pid, rx, _min in _compiled():
        found.Add(rx.pattern)
    found.Compile()
    return found


def _redact_line(line: str, found: list[str]) -> str:
    occur = _prefilter().Match(line)
    if not occur:
        return line
    compiled = _compiled()
    for i in sorted(occur):  # in file order, as if every pattern were tried
        pid, rx, min_length = compiled[i]
        parts: list[str] = []
        pos = 0
        use_group = "secret" in rx.groupindex
        for m in rx.finditer(line):
            gi = rx.groupindex["secret"] if use_group else 0
            start, end = m.span(gi) if m.group(gi) is not None else m.span()
            if line.startswith("[REDACTED:", start) or end - start < min_length:  # already redacted, or too short
                continue
            parts.append(line[pos:start])
            parts.append(f"[REDACTED:{pid}]")
            pos = end
            found.append(pid)
        if parts:
            line = "".join(parts) + line[pos:]
    return line


def redact(text: str) -> Redaction:
    """Replace secrets in ``text`` with ``[REDACTED:<kind>]``; line count is preserved."""
    found: list[str] = []
    out: list[str] = []
    in_key = False
    for line in text.split("\n"):
        if in_key:
            out.append("[REDACTED:private-key-block]")
            if "-----END " in line:
                in_key = False
            continue
        if _BEGIN in line and _KEY_END in line:
            found.append("private-key-block")
            out.append("[REDACTED:private-key-block]")
            in_key = "-----END " not in line.split(_KEY_END, 1)[1]
            continue
        out.append(_redact_line(line, found) if line else line)
    return Redaction(text="\n".join(out), count=len(found), kinds=sorted(set(found)))
